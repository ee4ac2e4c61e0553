package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/feed"
	"sandman/lifecycle"
	"sandman/live"
	"sandman/overview"
	"sandman/views"
)

// The most streams per instance: a founder's (one browser shares one between its tabs, so this
// is about 20 browsers), a share link's, and a visitor's client address's.
const (
	maxStreamsPerFounder = 20
	maxStreamsPerLink    = 200
	maxStreamsPerAddress = 20
)

// events is the SSE stream of the logged-in founder's sandbox states (and, for an operator, the
// console). It ends when the session does: at its expiry, or when it logs out on any instance
// (logOut).
func (h *Handlers) events(c echo.Context) error {
	ctx := c.Request().Context()
	founder := principal(c).Founder.ID
	seen := h.Live.Ends() // before the check: a removal it misses still takes the console away
	operator, err := h.Operators.IsOperator(ctx, founder)
	if err != nil {
		return err
	}
	s := live.Stream{Topics: []string{feed.Founder(founder), feed.Session(h.sessionKey(ctx))},
		Snapshot: h.Feed.Snapshot(feed.Founder(founder)), Ends: h.Sessions.Deadline(ctx),
		Caps: []live.Cap{{Key: feed.Founder(founder), Max: maxStreamsPerFounder}}}
	if operator {
		s.Grant = &live.Grant{Revoke: feed.Operator(founder), Topics: []string{feed.Ops, feed.Operator(founder)}, Seen: seen}
		s.Snapshot = h.Feed.Snapshot(feed.Founder(founder), feed.Ops)
	}
	err = h.Live.Serve(c.Response(), c.Request(), s)
	switch {
	case errors.Is(err, live.ErrTooManyStreams):
		return &apperr.Error{Kind: apperr.KindRateLimited, Code: codeTooManyStreams, RetryAfter: time.Minute,
			Message: "Too many browsers are showing live updates for this account at once. Close Sandman in a browser you no longer use and reload this page."}
	case errors.Is(err, live.ErrClosed):
		return &apperr.Error{Kind: apperr.KindUnavailable, Code: codeShuttingDown, Message: "Sandman is restarting; live updates resume in a moment."}
	}
	return err
}

// RenderSandbox renders one sandbox's card and pane for the live feed.
func RenderSandbox(l *lifecycle.Service, o *overview.Reader) func(context.Context, uuid.UUID, uuid.UUID) (live.Message, error) {
	return func(ctx context.Context, owner, sandboxID uuid.UUID) (live.Message, error) {
		v, credits, err := o.ProjectOfSandboxAndCredits(ctx, owner, sandboxID)
		if err != nil {
			return live.Message{}, err
		}
		return founderMessage(ctx, l, o, owner, v, credits)
	}
}

// RenderSnapshot renders every current card and pane of a founder for a (re)connection.
func RenderSnapshot(l *lifecycle.Service, o *overview.Reader) func(context.Context, uuid.UUID) ([]live.Message, error) {
	return func(ctx context.Context, owner uuid.UUID) ([]live.Message, error) {
		views, credits, err := o.Projects(ctx, owner)
		if err != nil {
			return nil, err
		}
		out := make([]live.Message, 0, len(views))
		for _, v := range views {
			if v.Sandbox == nil {
				continue
			}
			m, err := founderMessage(ctx, l, o, owner, v, credits)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
		return out, nil
	}
}

// founderMessage renders a project's card and pane, and the header's balance, which every page's
// header takes from the stream: a change the founder did not make on that page (a failed
// build's refund, a build started in another tab) reaches the header of every open page, with a
// card or pane or without.
func founderMessage(ctx context.Context, l *lifecycle.Service, o *overview.Reader, owner uuid.UUID, v overview.ProjectView, credits int32) (live.Message, error) {
	now := time.Now()
	hist, err := paneReads(ctx, o, v) // every read before the drawing
	if err != nil {
		return live.Message{}, err
	}
	vm := previewVM(l, v, now, "")
	project := v.Project.ID.String()
	out := live.Message{Topic: feed.Founder(owner), Key: project, ID: v.EventID}
	for _, f := range []views.Fragment{views.Card, views.Pane} {
		b, err := renderBytes(ctx, drawFragment(f, vm, hist, l.Deadlines().IdleTimeout, now))
		if err != nil {
			return live.Message{}, err
		}
		out.Parts = append(out.Parts, live.Part{Event: views.DOMID(f, project), Data: b})
	}
	b, err := renderBytes(ctx, views.CreditsText(credits))
	out.Parts = append(out.Parts, live.Part{Event: views.CreditsEvent, Data: b})
	return out, err
}
