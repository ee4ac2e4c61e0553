package handlers

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"sandman/apperr"
	"sandman/feed"
	"sandman/live"
	"sandman/overview"
	"sandman/sandbox"
	"sandman/shares"
	"sandman/views"
)

// Share links: the founder's side (the build page's share section and the JSON API) and the
// visitor's (the link's page, its wake, its activity reports and its stream). docs/api.md,
// "Share links".

// shareBox is the build page's share section of the founder's project.
func (h *Handlers) shareBox(c echo.Context, owner, projectID uuid.UUID) (views.ShareBox, error) {
	link, on, err := h.Shares.Current(c.Request().Context(), owner, projectID)
	if err != nil {
		return views.ShareBox{}, err
	}
	return views.ShareBox{ProjectID: projectID.String(), On: on, URL: link.URL, CreatedAt: link.CreatedAt,
		Enabled: h.Shares.Enabled(), CSRF: h.csrfToken(c), Now: time.Now()}, nil
}

// shareAction turns the project's link on, makes a new one or turns it off. htmx gets the share
// section again; a form posted without JavaScript goes back to the build page.
func (h *Handlers) shareAction(act func(ctx context.Context, owner, projectID uuid.UUID) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := h.projectID(c)
		if err != nil {
			return err
		}
		u := principal(c).Founder
		if err := act(c.Request().Context(), u.ID, id); err != nil {
			return err
		}
		if !isHTMX(c) {
			return back(c, "/projects/"+id.String())
		}
		box, err := h.shareBox(c, u.ID, id)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.ShareBoxView(box))
	}
}

func (h *Handlers) share(ctx context.Context, owner, projectID uuid.UUID) error {
	_, _, err := h.Shares.Share(ctx, owner, projectID)
	return err
}

func (h *Handlers) renewShare(ctx context.Context, owner, projectID uuid.UUID) error {
	_, err := h.Shares.Renew(ctx, owner, projectID)
	return err
}

// errLinkUnshowable answers a request for a link this Sandman's key did not make.
var errLinkUnshowable = apperr.New(apperr.KindConflict, codeLinkUnshowable,
	"This project's share link was made with another SANDMAN_SHARE_KEY, so it can't be shown again; it still works for whoever has it. "+
		"Turn it off (DELETE) and share again for a new link.")

// apiShare turns the project's link on: 201 with a new link, 200 with the current one.
func (h *Handlers) apiShare(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	link, created, err := h.Shares.Share(c.Request().Context(), principal(c).Founder.ID, id)
	if err != nil {
		return err
	}
	if link.URL == "" {
		return errLinkUnshowable
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.JSON(status, map[string]string{"url": link.URL})
}

// apiUnshare turns the project's link off (204, also when it was off).
func (h *Handlers) apiUnshare(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	if err := h.Shares.TurnOff(c.Request().Context(), principal(c).Founder.ID, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// The visitor's side.

// shareLinkPrefix starts the path of every visitor's route.
const shareLinkPrefix = "/s/"

// visitorLink opens the share link named by the path's token, for the visitor's routes, which
// have no session: the token is their only authority. Every answer, refusals included, asks
// search engines not to index it and browsers not to keep it. A turned-off, replaced or unknown
// token is a 404 (shares.ErrLinkGone).
func (h *Handlers) visitorLink(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		hd := c.Response().Header()
		hd.Set("X-Robots-Tag", "noindex, nofollow")
		hd.Set("Cache-Control", "no-store")
		v, err := h.Shares.Open(c.Request().Context(), c.Param("token"))
		if err != nil {
			return err
		}
		stateOf(c).visit = v
		return next(c)
	}
}

func visitOf(c echo.Context) shares.Visit {
	return stateOf(c).visit
}

// sharePath is the link's own path, /s/{token}.
func sharePath(c echo.Context) string { return shareLinkPrefix + c.Param("token") }

// shareStateVM is what the visitor's page shows of the shared preview.
func shareStateVM(sp overview.SharedPreview) views.ShareState {
	return views.ShareState{ProjectName: sp.ProjectName, State: sp.State, PreviewURL: sp.PreviewURL,
		ColdStart: sp.ColdStart, EventID: sp.EventID}
}

// sharePage is the link's page. A plain GET, which link unfurlers and crawlers send too, wakes
// nothing: the page's script (or its Wake preview button) does.
func (h *Handlers) sharePage(c echo.Context) error {
	sp, err := h.Lifecycle.Visit(c.Request().Context(), visitOf(c).ProjectID)
	if err != nil {
		return err
	}
	h.shareViews.WithLabelValues(string(sp.State)).Inc()
	return render(c, http.StatusOK, views.ShareView(views.SharePage{State: shareStateVM(sp), Path: sharePath(c),
		ActivityEvery: h.Lifecycle.Deadlines().ActivityEvery, Now: time.Now()}))
}

// shareWake wakes the shared preview, within the visitors' limits: htmx gets the page's state
// again, a form posted without JavaScript goes back to the link's page.
func (h *Handlers) shareWake(c echo.Context) error {
	ctx, v := c.Request().Context(), visitOf(c)
	if err := h.Shares.Allow(ctx, v, c.RealIP(), shares.Wake); err != nil {
		return err
	}
	sp, _, err := h.Lifecycle.VisitorWake(ctx, v.ProjectID)
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.Redirect(http.StatusSeeOther, sharePath(c))
	}
	return render(c, http.StatusOK, views.ShareStateView(shareStateVM(sp)))
}

// shareActivity is a visitor's page saying someone is looking (204), within the visitors'
// limits.
func (h *Handlers) shareActivity(c echo.Context) error {
	ctx, v := c.Request().Context(), visitOf(c)
	if err := h.Shares.Allow(ctx, v, c.RealIP(), shares.Activity); err != nil {
		return err
	}
	if err := h.Lifecycle.VisitorActivity(ctx, v.ProjectID); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// shareEvents is the link's stream: the visitor's page of that one project as it changes, and
// nothing else. It ends when the link stops working.
func (h *Handlers) shareEvents(c echo.Context) error {
	v := visitOf(c)
	err := h.Live.Serve(c.Response(), c.Request(), live.Stream{
		Topics:   []string{feed.Share(v.ProjectID), feed.Link(v.LinkID), feed.Visitors(v.OwnerID)},
		Snapshot: h.Feed.Snapshot(feed.Share(v.ProjectID)),
		Caps:     []live.Cap{{Key: feed.Link(v.LinkID), Max: maxStreamsPerLink}, {Key: "addr:" + c.RealIP(), Max: maxStreamsPerAddress}}})
	switch {
	case errors.Is(err, live.ErrTooManyStreams):
		return &apperr.Error{Kind: apperr.KindRateLimited, Code: codeTooManyStreams, RetryAfter: time.Minute,
			Message: "Too many pages are following this preview at once. Close it in a tab you no longer use and reload this page."}
	case errors.Is(err, live.ErrClosed):
		return &apperr.Error{Kind: apperr.KindUnavailable, Code: codeShuttingDown, Message: "The server is restarting; reload this page in a moment."}
	}
	return err
}

// shareError is the page a visitor gets for a refused or failed request: nothing of Sandman's
// own pages (no log-in, no projects).
func shareError(c echo.Context, status int, msg string) views.ShareMessage {
	m := views.ShareMessage{Status: status, Heading: http.StatusText(status), Message: msg, Now: time.Now()}
	switch status {
	case http.StatusNotFound:
		m.Heading, m.Message = msg, "Ask the person who shared it for a new link."
	case http.StatusTooManyRequests:
		m.Heading = "Too many requests"
	}
	if status != http.StatusNotFound && c.Param("token") != "" {
		m.Back = sharePath(c)
	}
	return m
}

// logPath is the request's path as the logs may keep it: a share link's token is a secret
// (only its hash is stored), so it is left out.
func logPath(r *http.Request) string {
	p := r.URL.Path
	if rest, ok := strings.CutPrefix(p, shareLinkPrefix); ok {
		_, sub, _ := strings.Cut(rest, "/")
		p = shareLinkPrefix + "…"
		if sub != "" {
			p += "/" + sub
		}
	}
	return p
}

// shareMetrics are the visitors' pages by the state they showed.
func newShareViewsMetric(reg prometheus.Registerer) *prometheus.CounterVec {
	m := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandman_share_views_total",
		Help: "Share links' pages shown to visitors, by the preview's state (live, sleeping, waking, starting, gone, trouble)."}, []string{"state"})
	if reg != nil {
		reg.MustRegister(m)
	}
	return m
}

// RenderShare renders the visitor's page of the project a sandbox belongs to, for the visitors'
// streams of its link.
func RenderShare(o *overview.Reader) func(context.Context, uuid.UUID, uuid.UUID) (live.Message, error) {
	return func(ctx context.Context, owner, sandboxID uuid.UUID) (live.Message, error) {
		sb, err := o.OwnedSandbox(ctx, owner, sandboxID)
		if err != nil {
			return live.Message{}, err
		}
		return RenderShareSnapshot(o)(ctx, sb.ProjectID)
	}
}

// RenderShareSnapshot renders the visitor's page of a project: a visitor's stream starts with it.
func RenderShareSnapshot(o *overview.Reader) func(context.Context, uuid.UUID) (live.Message, error) {
	return func(ctx context.Context, projectID uuid.UUID) (live.Message, error) {
		sp, err := o.SharedPreview(ctx, projectID)
		if err != nil {
			return live.Message{}, err
		}
		b, err := renderBytes(ctx, views.ShareStateView(shareStateVM(sp)))
		return live.Message{Topic: feed.Share(projectID), Key: feed.ShareKey, ID: sp.EventID,
			Parts: []live.Part{{Event: views.ShareStateID, Data: b}}}, err
	}
}

// ShareEnded is the last page a visitor's stream carries, when its link stops working, and the
// event that asks the browser to close the stream.
func ShareEnded() []live.Part {
	b, err := renderBytes(context.Background(), views.ShareStateView(views.ShareState{State: sandbox.VisitorEnded}))
	if err != nil {
		panic(err) // a fixed fragment: it renders or the views are broken
	}
	return []live.Part{{Event: views.ShareStateID, Data: b}, {Event: views.ShareClosedEvent, Data: []byte("closed")}}
}
