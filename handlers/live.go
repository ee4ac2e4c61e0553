package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/lifecycle"
	"sandman/live"
	"sandman/views"
)

// events is the SSE stream of the logged-in founder's sandbox states. It ends when the session
// does: at its expiry, or when it logs out on any instance (logOut).
func (h *Handlers) events(c echo.Context) error {
	ctx := c.Request().Context()
	founder := principal(c).Founder.ID
	seen := h.Live.OperatorEnds() // before the check: a removal it misses still ends the console
	operator, err := h.Operators.IsOperator(ctx, founder)
	if err != nil {
		return err
	}
	err = h.Live.Serve(c.Response(), c.Request(), live.Stream{Owner: founder, Operator: operator, OperatorSeen: seen,
		Session: h.sessionKey(ctx), Ends: h.Sessions.Deadline(ctx)})
	switch {
	case errors.Is(err, live.ErrTooManyStreams):
		return &apperr.Error{Kind: apperr.KindRateLimited, Code: "too_many_streams", RetryAfter: time.Minute,
			Message: "Too many browsers are showing live updates for this account at once. Close Sandman in a browser you no longer use and reload this page."}
	case errors.Is(err, live.ErrClosed):
		return &apperr.Error{Kind: apperr.KindUnavailable, Code: "shutting_down", Message: "Sandman is restarting; live updates resume in a moment."}
	}
	return err
}

// RenderSandbox renders one sandbox's card and pane for the live feed.
func RenderSandbox(l *lifecycle.Service) func(context.Context, uuid.UUID, uuid.UUID) (live.Fragments, error) {
	return func(ctx context.Context, owner, sandboxID uuid.UUID) (live.Fragments, error) {
		v, credits, err := l.ProjectOfSandboxAndCredits(ctx, owner, sandboxID)
		if err != nil {
			return live.Fragments{}, err
		}
		return fragments(ctx, l, v, credits)
	}
}

// RenderSnapshot renders every current card and pane of a founder for a (re)connection.
func RenderSnapshot(l *lifecycle.Service) func(context.Context, uuid.UUID) ([]live.Fragments, error) {
	return func(ctx context.Context, owner uuid.UUID) ([]live.Fragments, error) {
		views, credits, err := l.Projects(ctx, owner)
		if err != nil {
			return nil, err
		}
		out := make([]live.Fragments, 0, len(views))
		for _, v := range views {
			if v.Sandbox == nil {
				continue
			}
			f, err := fragments(ctx, l, v, credits)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		return out, nil
	}
}

// fragments renders a project's card and pane, and the header's balance, which every page's
// header takes from the stream: a change the founder did not make on that page (a failed
// build's refund, a build started in another tab) reaches the header of every open page, with a
// card or pane or without.
func fragments(ctx context.Context, l *lifecycle.Service, v lifecycle.ProjectView, credits int32) (live.Fragments, error) {
	now := time.Now()
	out := live.Fragments{EventID: v.EventID, ProjectID: v.Project.ID.String()}
	for _, f := range []views.Fragment{views.Card, views.Pane} {
		cmp, err := fragment(ctx, l, f, v, now, "")
		if err != nil {
			return live.Fragments{}, err
		}
		b, err := renderBytes(ctx, cmp)
		if err != nil {
			return live.Fragments{}, err
		}
		if f == views.Card {
			out.Card = b
		} else {
			out.Pane = b
		}
	}
	var err error
	out.Credits, err = renderBytes(ctx, views.CreditsText(credits))
	return out, err
}
