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
		return fragments(ctx, v)
	}
}

// RenderSnapshot renders every current card and pane of a founder for a (re)connection.
func RenderSnapshot(l *lifecycle.Service) func(context.Context, uuid.UUID) ([]live.Fragments, error) {
	return func(ctx context.Context, owner uuid.UUID) ([]live.Fragments, error) {
		views, err := l.Projects(ctx, owner)
		if err != nil {
			return nil, err
		}
		out := make([]live.Fragments, 0, len(views))
		for _, v := range views {
			if v.Sandbox == nil {
				continue
			}
			f, err := fragments(ctx, v)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		return out, nil
	}
}

func fragments(ctx context.Context, v lifecycle.ProjectView) (live.Fragments, error) {
	vm := previewVM(v)
	card, err := renderBytes(ctx, views.PreviewCard(vm))
	if err != nil {
		return live.Fragments{}, err
	}
	pane, err := renderBytes(ctx, views.PreviewPane(vm))
	if err != nil {
		return live.Fragments{}, err
	}
	return live.Fragments{EventID: v.EventID, ProjectID: vm.ProjectID, Card: card, Pane: pane}, nil
}
