package outbox

import "sandman/apperr"

// The codes of this package's errors, as the JSON API answers them (docs/api.md, "Error codes").
const (
	// CodeURLRefused: an endpoint URL that breaks a rule or points where Sandman does not send (422).
	CodeURLRefused apperr.Code = "url_refused"
	// CodeEndpointLimit: a new endpoint past the most one founder may have (409).
	CodeEndpointLimit apperr.Code = "endpoint_limit"
	// CodeWebhooksOff: an endpoint asked of a Sandman without SANDMAN_SECRETS_KEY (503).
	CodeWebhooksOff apperr.Code = "webhooks_off"
	// CodeDeliveryInFlight: a retry of a delivery being sent right now (409).
	CodeDeliveryInFlight apperr.Code = "delivery_in_flight"
)
