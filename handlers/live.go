package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/a-h/templ"
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
	err := h.Live.Serve(c.Response(), c.Request(), live.Stream{Owner: currentUser(c).ID,
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
		v, err := l.ProjectOfSandbox(ctx, owner, sandboxID)
		if err != nil {
			return live.Fragments{}, err
		}
		credits, err := l.Credits(ctx, owner)
		if err != nil {
			return live.Fragments{}, err
		}
		return fragments(ctx, v, credits)
	}
}

// RenderSnapshot renders every current card and pane of a founder for a (re)connection.
func RenderSnapshot(l *lifecycle.Service) func(context.Context, uuid.UUID) ([]live.Fragments, error) {
	return func(ctx context.Context, owner uuid.UUID) ([]live.Fragments, error) {
		views, err := l.Projects(ctx, owner)
		if err != nil {
			return nil, err
		}
		credits, err := l.Credits(ctx, owner)
		if err != nil {
			return nil, err
		}
		out := make([]live.Fragments, 0, len(views))
		for _, v := range views {
			if v.Sandbox == nil {
				continue
			}
			f, err := fragments(ctx, v, credits)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		return out, nil
	}
}

// fragments renders a project's card and pane. Each carries the header's credit balance out of
// band, so a change the founder did not make on this page (a failed build's refund, a build
// started in another tab) reaches the header of every open page.
func fragments(ctx context.Context, v lifecycle.ProjectView, credits int32) (live.Fragments, error) {
	vm := previewVM(v)
	balance := views.Credits(credits, true)
	card, err := renderBytes(ctx, templ.Join(views.PreviewCard(vm), balance))
	if err != nil {
		return live.Fragments{}, err
	}
	pane, err := renderBytes(ctx, templ.Join(views.PreviewPane(vm), balance))
	if err != nil {
		return live.Fragments{}, err
	}
	return live.Fragments{EventID: v.EventID, ProjectID: vm.ProjectID, Card: card, Pane: pane}, nil
}
