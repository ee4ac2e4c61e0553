package handlers

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/lifecycle"
	"sandman/live"
	"sandman/views"
)

// events is the SSE stream of the logged-in founder's sandbox states.
func (h *Handlers) events(c echo.Context) error {
	h.Live.ServeHTTP(c.Response(), c.Request(), currentUser(c).ID)
	return nil
}

// RenderSandbox renders one sandbox's card and pane for the live feed.
func RenderSandbox(l *lifecycle.Service) func(context.Context, uuid.UUID, uuid.UUID) (live.Fragments, error) {
	return func(ctx context.Context, owner, sandboxID uuid.UUID) (live.Fragments, error) {
		v, err := l.ProjectOfSandbox(ctx, owner, sandboxID)
		if err != nil {
			return live.Fragments{}, err
		}
		return fragments(ctx, l, v)
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
			f, err := fragments(ctx, l, v)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		return out, nil
	}
}

func fragments(ctx context.Context, l *lifecycle.Service, v lifecycle.ProjectView) (live.Fragments, error) {
	now := time.Now()
	credits, err := l.Credits(ctx, v.Project.OwnerID)
	if err != nil {
		return live.Fragments{}, err
	}
	out := live.Fragments{EventID: v.EventID, ProjectID: v.Project.ID.String()}
	for _, f := range []views.Fragment{views.Card, views.Pane} {
		cmp, err := fragment(ctx, l, f, v, now, "", credits)
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
	return out, nil
}
