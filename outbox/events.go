// Package outbox is Sandman's outgoing webhooks and event feed (docs/architecture.md, "Outgoing
// webhooks"): the events of a founder's previews, recorded in the transaction of the change they
// tell (Record), the founder's endpoints with their signing secrets (sealed by the keyring), and
// the sender, which delivers each event to each endpoint at least once, signed as the Standard
// Webhooks specification says, retrying on a schedule. It knows no lifecycle: the writers of
// the changes call Record.
package outbox

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/sandbox"
)

// Type is an event's type, as its payload's "type" says.
type Type string

// The event types (docs/api.md, "Webhooks").
const (
	PreviewRunning      Type = "preview.running"
	PreviewPaused       Type = "preview.paused"
	PreviewResuming     Type = "preview.resuming"
	PreviewResumeFailed Type = "preview.resume_failed"
	PreviewGone         Type = "preview.gone"
	BuildStarted        Type = "build.started"
	BuildReady          Type = "build.ready"
	BuildFailed         Type = "build.failed"
	VersionCreated      Type = "version.created"
	VersionLive         Type = "version.live"
	VersionFailed       Type = "version.failed"
	ProblemOpened       Type = "problem.opened"
	ProblemClosed       Type = "problem.closed"
	CreditsChanged      Type = "credits.changed"
	// WebhookTest is sent to one endpoint by hand (Send test); it is no part of the feed.
	WebhookTest Type = "webhook.test"
)

// Types lists the types an endpoint may ask for.
var Types = []Type{PreviewRunning, PreviewPaused, PreviewResuming, PreviewResumeFailed, PreviewGone,
	BuildStarted, BuildReady, BuildFailed, VersionCreated, VersionLive, VersionFailed,
	ProblemOpened, ProblemClosed, CreditsChanged, WebhookTest}

// Channel announces, at the commit of an event with deliveries, that the senders have work.
const Channel = "sandman_outbox"

// Event is one thing that happened to a founder's project, as Record stores it. Its data carries
// codes, never a sentence: State and Reason are the typed values of package sandbox as strings.
type Event struct {
	Owner     uuid.UUID // uuid.Nil: the project's owner
	Type      Type
	ProjectID uuid.UUID
	SandboxID *uuid.UUID
	State     string
	Reason    string
	Version   int32
	// Extra adds fields of the type's own to data (a balance, a problem's id).
	Extra map[string]any
}

// Payload is the body of a delivery and an item of the feed: the Standard Webhooks shape.
type Payload struct {
	Type      Type           `json:"type"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

func (e Event) payload(now time.Time) ([]byte, error) {
	data := map[string]any{}
	for k, v := range e.Extra {
		data[k] = v
	}
	if e.ProjectID != uuid.Nil {
		data["projectId"] = e.ProjectID
	}
	if e.SandboxID != nil {
		data["sandboxId"] = *e.SandboxID
	}
	if e.State != "" {
		data["state"] = e.State
	}
	if e.Reason != "" {
		data["reason"] = e.Reason
	}
	if e.Version > 0 {
		data["version"] = e.Version
	}
	return json.Marshal(Payload{Type: e.Type, Timestamp: now.UTC(), Data: data})
}

// Record stores e in the caller's transaction with a delivery to each of its founder's
// endpoints that wants it, and wakes the senders at commit: the change and its event commit
// together or not at all. It costs the change one statement.
func Record(ctx context.Context, tx db.Tx, e Event) error {
	_, err := record(ctx, tx, e, nil)
	return err
}

func record(ctx context.Context, tx db.Tx, e Event, endpoint *uuid.UUID) (db.RecordOutboxEventRow, error) {
	body, err := e.payload(time.Now())
	if err != nil {
		return db.RecordOutboxEventRow{}, err
	}
	p := db.RecordOutboxEventParams{Channel: Channel, Type: string(e.Type), SandboxID: e.SandboxID, EndpointID: endpoint, Payload: body}
	if e.Owner != uuid.Nil {
		p.OwnerID = &e.Owner
	} else {
		p.ProjectID = &e.ProjectID
	}
	return tx.RecordOutboxEvent(ctx, p)
}

// PreviewType is the event of a preview's move to status (false: the move tells none, like the
// first starting, which is build.started).
func PreviewType(status sandbox.Status) (Type, bool) {
	switch {
	case status == sandbox.Running:
		return PreviewRunning, true
	case status == sandbox.Paused:
		return PreviewPaused, true
	case status == sandbox.Resuming:
		return PreviewResuming, true
	case status == sandbox.ResumeFailed:
		return PreviewResumeFailed, true
	case status.Gone():
		return PreviewGone, true
	}
	return "", false
}

// OfSandbox is an event of sb's project and sandbox, with its state and app version.
func OfSandbox(t Type, sb db.Sandbox, reason string) Event {
	e := Event{Owner: sb.OwnerID, Type: t, ProjectID: sb.ProjectID, SandboxID: &sb.ID, State: string(sb.Status), Reason: reason}
	if sb.AppVersion != nil {
		e.Version = *sb.AppVersion
	}
	return e
}
