package e2b

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Client talks to the provider's API and to envd. It is safe for concurrent use; make one per
// process so that all calls share the circuit breaker.
type Client struct {
	cfg     Config
	http    *http.Client
	breaker *gobreaker.CircuitBreaker[*response]
	metrics *metrics
	log     *slog.Logger
}

// New validates cfg, fills in defaults and returns a ready client. It sends no request.
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, http: cfg.HTTPClient, log: cfg.Logger}
	c.breaker = gobreaker.NewCircuitBreaker[*response](gobreaker.Settings{
		Name: "e2b-api",
		// One probe in half-open: a struggling provider gets one request, not a stampede.
		MaxRequests: 1,
		Timeout:     cfg.BreakerOpenFor,
		ReadyToTrip: func(n gobreaker.Counts) bool {
			return n.ConsecutiveFailures >= uint32(cfg.BreakerFailures)
		},
		// Only an absent or broken answer (timeouts, network errors, 5xx) says the provider is
		// unwell. 404, 409, 400 and 401 are answers from a healthy provider.
		IsSuccessful: func(err error) bool { return !errors.Is(err, ErrTransient) },
		// A caller giving up (its cancellation, or its deadline passing mid-request) says
		// nothing about the provider, and a 429 is the provider asking us to slow down, which
		// the retry wait already does.
		IsExcluded: func(err error) bool {
			var gaveUp *callerGaveUp
			return errors.As(err, &gaveUp) || errors.Is(err, context.Canceled) || errors.Is(err, ErrRateLimited)
		},
		OnStateChange: func(_ string, from, to gobreaker.State) {
			level := slog.LevelInfo
			if to == gobreaker.StateOpen {
				level = slog.LevelError
			}
			c.log.Log(context.Background(), level, "e2b circuit breaker", "from", from.String(), "to", to.String())
		},
	})
	c.metrics = newMetrics(cfg.Registerer, c.breaker.State)
	return c, nil
}

// Config returns the effective configuration, defaults filled in.
func (c *Client) Config() Config { return c.cfg }

// CircuitState is the breaker's state: "closed", "half-open" or "open".
func (c *Client) CircuitState() string { return c.breaker.State().String() }

// CallErrors counts this client's failed calls by operation since it was made: the provider
// did not answer, answered 5xx, refused the key, the request, or the rate, or the breaker was
// open (a 404 or 409 is an answer, not a failure).
func (c *Client) CallErrors() map[string]int64 {
	c.metrics.mu.Lock()
	defer c.metrics.mu.Unlock()
	return maps.Clone(c.metrics.failed)
}

// NewHTTPTransport returns a copy of http.DefaultTransport that resolves *.localhost names to
// loopback, as browsers do (RFC 6761). Go's resolver does not, and the local sandbox host
// serves sandboxes at {port}-{id}.localhost:{port}; use it for any client that fetches
// preview URLs.
func NewHTTPTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil && strings.HasSuffix(strings.ToLower(host), ".localhost") {
			addr = net.JoinHostPort("localhost", port)
		}
		return d.DialContext(ctx, network, addr)
	}
	return t
}

// maxResponseBody bounds what one answer may hold; a page of 100 sandboxes is far below it.
const maxResponseBody = 16 << 20

// request is one logical call: it may take several HTTP attempts.
type request struct {
	op          string
	method      string
	url         string
	header      http.Header
	body        []byte
	contentType string
	// api marks control-plane calls: they carry the API key and pass the circuit breaker.
	// envd calls go to one sandbox, whose troubles say nothing about the provider's health.
	api bool
	// idempotent calls may be repeated after any transient failure.
	idempotent bool
	// accept lists non-2xx statuses that are answers, not errors (409 for pause).
	accept []int
	// resolveAmbiguous, for a non-idempotent call, finds out after an ambiguous failure whether
	// the call took effect: a response means it did, nil means it did not and may be repeated.
	resolveAmbiguous func(ctx context.Context) (*response, error)
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (c *Client) apiURL(path string, q url.Values) string {
	u := c.cfg.APIURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// withDeadline gives ctx the default call timeout unless it already has a deadline.
func (c *Client) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.cfg.CallTimeout)
}

// do runs r with deadline, retries, breaker and metrics.
func (c *Client) do(ctx context.Context, r *request) (*response, error) {
	start := time.Now()
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	resp, err := c.retry(ctx, r)
	c.metrics.observe(r.op, err, time.Since(start))
	return resp, err
}

func (c *Client) retry(ctx context.Context, r *request) (*response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := c.attempt(ctx, r)
		if err == nil {
			return resp, nil
		}
		retryable, ambiguous, wait, reason := c.classify(r, err)
		if ambiguous && r.resolveAmbiguous != nil {
			found, rerr := r.resolveAmbiguous(ctx)
			if rerr != nil {
				return nil, fmt.Errorf("%w (and checking whether it took effect failed: %v)", err, rerr)
			}
			if found != nil {
				c.log.Info("e2b call took effect despite the error", "op", r.op, "err", err)
				return found, nil
			}
			retryable, reason = true, "transient"
		}
		if !retryable || attempt >= len(c.cfg.RetryDelays) {
			return nil, err
		}
		wait = max(wait, c.cfg.RetryDelays[attempt])
		if deadline, has := ctx.Deadline(); has && time.Until(deadline) < wait {
			// Waiting would only end in the deadline: fail now and let the caller decide.
			return nil, err
		}
		c.log.Warn("e2b call failed, retrying", "op", r.op, "attempt", attempt+1, "wait", wait, "err", err)
		c.metrics.retries.WithLabelValues(r.op, reason).Inc()
		if err := sleep(ctx, wait); err != nil {
			return nil, transportError(r.op, ctx, err)
		}
	}
}

// classify decides whether a failed attempt may be repeated. ambiguous marks a non-idempotent
// call that failed in a way that may have taken effect. wait is what the provider asked for
// (Retry-After), to be raised to the configured backoff.
func (c *Client) classify(r *request, err error) (retryable, ambiguous bool, wait time.Duration, reason string) {
	if errors.Is(err, ErrCircuitOpen) {
		return false, false, 0, ""
	}
	var rl *RateLimitedError
	if errors.As(err, &rl) {
		// A 429 means the provider did nothing: safe to repeat even a create. Retry-After is
		// honoured as the least wait (the backoff still applies when it is longer).
		return true, false, rl.RetryAfter, "rate_limited"
	}
	if !errors.Is(err, ErrTransient) {
		return false, false, 0, ""
	}
	var apiErr *APIError
	// 503 is an explicit "not now": nothing was done, and Retry-After (if any) says when.
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusServiceUnavailable {
		return true, false, apiErr.retryAfter, "transient"
	}
	if r.idempotent || notSent(err) {
		return true, false, 0, "transient"
	}
	return false, true, 0, ""
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// attempt sends r once, through the breaker for API calls.
func (c *Client) attempt(ctx context.Context, r *request) (*response, error) {
	if !r.api {
		return c.send(ctx, r)
	}
	resp, err := c.breaker.Execute(func() (*response, error) {
		resp, err := c.send(ctx, r)
		if err != nil && ctx.Err() != nil {
			// The call's own deadline passed (or it was cancelled) while the attempt ran: the
			// attempt's end is the caller's doing, not the provider's failure.
			return nil, &callerGaveUp{err}
		}
		return resp, err
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, fmt.Errorf("e2b %s: %w", r.op, ErrCircuitOpen)
	}
	var gaveUp *callerGaveUp
	if errors.As(err, &gaveUp) {
		return nil, gaveUp.err
	}
	return resp, err
}

// callerGaveUp marks, for the breaker only, an attempt that ended because its caller's context
// did; attempt returns the error inside.
type callerGaveUp struct{ err error }

func (e *callerGaveUp) Error() string { return e.err.Error() }

func (c *Client) send(ctx context.Context, r *request) (*response, error) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, r.method, r.url, bytes.NewReader(r.body))
	if err != nil {
		return nil, fmt.Errorf("e2b %s: %w", r.op, err)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	req.Header.Set("User-Agent", "sandman-e2b/1")
	if r.api {
		req.Header.Set("X-API-Key", c.cfg.APIKey)
		req.Header.Set("Accept", "application/json")
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, transportError(r.op, ctx, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBody+1))
	if err != nil {
		return nil, transportError(r.op, ctx, err)
	}
	if len(body) > maxResponseBody {
		return nil, fmt.Errorf("e2b %s: answer larger than %d bytes", r.op, maxResponseBody)
	}
	if res.StatusCode/100 == 2 || slices.Contains(r.accept, res.StatusCode) {
		return &response{status: res.StatusCode, header: res.Header, body: body}, nil
	}
	return nil, errorFromResponse(r.op, res.StatusCode, res.Header, body)
}
