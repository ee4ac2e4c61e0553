package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/db"
	"sandman/lifecycle"
	"sandman/overview"
	"sandman/projects"
	"sandman/sandbox"
	"sandman/views"
)

// previewVM turns a project's state into the card and pane view model. csrf is the session's
// token for the forms of pages and htmx answers; the live feed, rendered once for every browser
// of a founder, leaves it empty (htmx sends the header).
func previewVM(l *lifecycle.Service, v overview.ProjectView, now time.Time, csrf string) views.Preview {
	p := views.Preview{ProjectID: v.Project.ID.String(), ProjectName: v.Project.Name, Source: sourceText(v.Project),
		FileCount: v.FileCount, EventID: v.EventID, IdleFor: views.DurationText(l.Deadlines().IdleTimeout), Now: now, CSRF: csrf, Shared: v.Shared}
	if v.Sandbox != nil {
		sb := v.Sandbox
		p.SandboxID, p.Status, p.PreviewURL = sb.ID.String(), sb.Status, sb.PreviewURL
		p.FailureCause, p.Recreated = views.CauseText(sb.FailureCause, sb.FailureDetail), sb.Recreated
		if sb.SnapshotKind != nil {
			p.SnapshotKind = *sb.SnapshotKind
		}
		p.Why, p.WhyAt, p.SleepsAt = views.EventText(v.Change, v.Build.Kind, l.Deadlines().IdleTimeout), v.Change.CreatedAt, v.SleepsAt
	}
	p.Version, p.Waiting, p.Applying = v.DeployedVersion, v.Waiting(), v.DeployingVersion
	p.FailedVersion, p.RestoreTo = v.FailedVersion, v.RestoreTo
	app := v.App()
	p.AppDown, p.OpenProblems = app.DoesNotStart(), v.OpenProblems
	if p.AppDown {
		p.DownVersion = app.Version
	}
	if v.Problem != nil {
		p.ProblemMessage, p.ProblemDetail = v.Problem.Message, v.Problem.Detail
	}
	if p.AppDown && p.RestoreTo == 0 {
		// A card drawn from the founder's list (no failed version read): the last good version.
		if good := v.LastGoodVersion; good != 0 && good < p.Version {
			p.RestoreTo = good
		}
	}
	if v.Build != nil {
		p.BuildID = v.Build.ID.String()
		p.BuildStatus, p.Stage, p.BuildError = v.Build.Status, v.Build.Stage, views.BuildError(*v.Build)
	}
	return p
}

// historyVM is the project's history for its build page; idle is the configured idle timeout,
// which an idle pause's sentence names.
func historyVM(projectID string, entries []overview.HistoryEntry, idle time.Duration, now time.Time) views.History {
	h := views.History{ProjectID: projectID, Now: now}
	for _, e := range entries {
		h.Entries = append(h.Entries, views.HistoryEntry{At: e.CreatedAt, Text: views.EventText(e.SandboxEvent, e.Kind, idle), Files: e.Files})
	}
	return h
}

func sourceText(p db.Project) string {
	if p.Starter != nil {
		if st, ok := projects.StarterByName(*p.Starter); ok {
			return st.Title + " starter"
		}
	}
	return "Uploaded files"
}

// fragment is what one of a project's fragments delivers, whether it answers an htmx action or
// goes out on the live feed: the card, or the pane with its history out of band.
func fragment(ctx context.Context, l *lifecycle.Service, o *overview.Reader, f views.Fragment, v overview.ProjectView, now time.Time, csrf string) (templ.Component, error) {
	var hist []overview.HistoryEntry
	if f == views.Pane {
		var err error
		if hist, err = paneReads(ctx, o, v); err != nil {
			return nil, err
		}
	}
	return drawFragment(f, previewVM(l, v, now, csrf), hist, l.Deadlines().IdleTimeout, now), nil
}

// paneReads reads what a pane shows beyond the project's view: its history up to the view's
// event. A render reads everything first, then draws (drawFragment reads nothing).
func paneReads(ctx context.Context, o *overview.Reader, v overview.ProjectView) ([]overview.HistoryEntry, error) {
	return o.History(ctx, v.Project.OwnerID, v.Project.ID, v.EventID)
}

// drawFragment draws a card, or a pane with its history, from what was read (idle: the
// configured idle timeout, which an idle pause's sentence names).
func drawFragment(f views.Fragment, vm views.Preview, hist []overview.HistoryEntry, idle time.Duration, now time.Time) templ.Component {
	if f == views.Card {
		return views.PreviewCard(vm)
	}
	return templ.Join(views.PreviewPane(vm), views.HistoryList(historyVM(vm.ProjectID, hist, idle, now), true))
}

// renderPreview answers an htmx action with the fragment it targets (the card on the
// dashboard, the pane on the build page) and the header's balance out of band, since a build
// or a rebuild changes it.
func (h *Handlers) renderPreview(c echo.Context, status int, v overview.ProjectView) error {
	ctx := c.Request().Context()
	f := views.Pane
	if c.Request().Header.Get("HX-Target") == views.DOMID(views.Card, v.Project.ID.String()) {
		f = views.Card
	}
	credits, err := h.Credits.Balance(ctx, v.Project.OwnerID)
	if err != nil {
		return err
	}
	cmp, err := fragment(ctx, h.Lifecycle, h.Overview, f, v, time.Now(), h.csrfToken(c))
	if err != nil {
		return err
	}
	return render(c, status, templ.Join(cmp, views.Credits(credits, true)))
}

// back answers a form posted without JavaScript: 303 to the page it came from (its return
// field, when that is a path of Sandman's), else to fallback.
func back(c echo.Context, fallback string) error {
	return c.Redirect(http.StatusSeeOther, safeReturn(c.FormValue("return"), fallback))
}

// safeReturn is raw when it is a plain path on this site, else fallback: a return address must
// never send a founder to another origin (a scheme, a host, "//host", or a backslash, which
// browsers read as a slash), and control characters have no place in a path.
func safeReturn(raw, fallback string) string {
	if raw == "" || len(raw) > 1024 || raw[0] != '/' || strings.HasPrefix(raw, "//") || strings.ContainsRune(raw, '\\') {
		return fallback
	}
	for _, r := range raw {
		if r < 0x20 || r == 0x7f {
			return fallback
		}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return fallback
	}
	return raw
}

func (h *Handlers) projectID(c echo.Context) (uuid.UUID, error) {
	return parseID(c.Param("id"), "Project")
}

// ownedProjectID is the route's project, read before its body: another founder's project is
// not found, whatever the body says (a refusal of the body would tell that it exists).
func (h *Handlers) ownedProjectID(c echo.Context) (uuid.UUID, error) {
	id, err := h.projectID(c)
	if err != nil {
		return id, err
	}
	_, err = h.Projects.Get(c.Request().Context(), principal(c).Founder.ID, id)
	return id, err
}
func (h *Handlers) sandboxID(c echo.Context) (uuid.UUID, error) {
	return parseID(c.Param("id"), "Sandbox")
}

// buildAction starts the first build or a rebuild. htmx gets the fragment it targets; a form
// posted without JavaScript goes back where it came from.
func (h *Handlers) buildAction(rebuild bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := h.projectID(c)
		if err != nil {
			return err
		}
		u := principal(c).Founder
		ctx := c.Request().Context()
		if _, err := h.Lifecycle.StartBuild(ctx, actor(c), id, c.FormValue("idempotencyKey"), rebuild); err != nil {
			return err
		}
		if !isHTMX(c) {
			return back(c, "/projects/"+id.String())
		}
		v, err := h.Overview.Project(ctx, u.ID, id)
		if err != nil {
			return err
		}
		return h.renderPreview(c, http.StatusOK, v)
	}
}

// rebuildConfirm asks before a rebuild spends a credit: the dialog's content for htmx, a page
// of its own for a browser without JavaScript.
func (h *Handlers) rebuildConfirm(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	u := principal(c).Founder
	v, err := h.Overview.Project(c.Request().Context(), u.ID, id)
	if err != nil {
		return err
	}
	pid := v.Project.ID.String()
	target := views.DOMID(views.Pane, pid)
	if card := views.DOMID(views.Card, pid); c.QueryParam("target") == card {
		target = card
	}
	q := views.RebuildQuestion{ProjectID: pid, Target: target, Return: safeReturn(c.QueryParam("return"), "/projects/"+pid),
		Key: previewVM(h.Lifecycle, v, time.Now(), "").IdempotencyKey(), CSRF: h.csrfToken(c), Credits: pageCredits(c)}
	if app := v.App(); app.DoesNotStart() && v.Sandbox != nil && v.Sandbox.Status == sandbox.Running {
		q.NotStarting, q.RestoreTo = app.Version, v.RestoreTo
	}
	if isHTMX(c) {
		return render(c, http.StatusOK, views.RebuildDialog(q))
	}
	return render(c, http.StatusOK, views.RebuildConfirmPage(views.RebuildPage{Layout: h.layout(c, "Rebuild preview?"),
		ProjectName: v.Project.Name, Question: q}))
}

// sandboxAction runs one lifecycle action on a founder's sandbox. htmx gets the fragment it
// targets, re-rendered; a form posted without JavaScript goes back where it came from.
func (h *Handlers) sandboxAction(act func(echo.Context, uuid.UUID, uuid.UUID) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := h.sandboxID(c)
		if err != nil {
			return err
		}
		u := principal(c).Founder
		if err := act(c, u.ID, id); err != nil {
			return err
		}
		v, err := h.Overview.ProjectOfSandbox(c.Request().Context(), u.ID, id)
		if err != nil {
			return err
		}
		if !isHTMX(c) {
			return back(c, "/projects/"+v.Project.ID.String())
		}
		return h.renderPreview(c, http.StatusOK, v)
	}
}

func (h *Handlers) resume(c echo.Context, owner, id uuid.UUID) error {
	_, err := h.Lifecycle.Resume(c.Request().Context(), owner, id)
	return err
}

func (h *Handlers) verify(c echo.Context, owner, id uuid.UUID) error {
	return h.Lifecycle.Verify(c.Request().Context(), owner, id)
}

func (h *Handlers) pause(c echo.Context, owner, id uuid.UUID) error {
	_, err := h.Lifecycle.RequestPause(c.Request().Context(), owner, id)
	return err
}

// sandboxJSON is a sandbox in the JSON API (docs/api.md).
type sandboxJSON struct {
	ID                 string             `json:"id"`
	ProviderID         *string            `json:"providerId"`
	Status             sandbox.Status     `json:"status"`
	SnapshotKind       *sandbox.PauseKind `json:"snapshotKind"`
	PreviewURL         string             `json:"previewUrl"`
	LastActiveAt       time.Time          `json:"lastActiveAt"`
	LastVerifiedAt     *time.Time         `json:"lastVerifiedAt"`
	IdleTimeoutMs      int64              `json:"idleTimeoutMs"`
	LifecycleTimeoutMs int64              `json:"lifecycleTimeoutMs"`
	ExpiresAt          *time.Time         `json:"expiresAt"`
	Recreated          bool               `json:"recreated"`
	FailureCause       string             `json:"failureCause,omitempty"`
	// FailureCode is FailureCause's code, for programs (docs/api.md, "Failure codes").
	FailureCode *sandbox.Cause `json:"failureCode,omitempty"`
	// Version is the project's version the preview runs; PendingVersion a newer one not yet
	// applied (it goes live when the preview runs), or null.
	Version        *int32 `json:"version,omitempty"`
	PendingVersion *int32 `json:"pendingVersion"`
	// App is the app's own state (the dev server), beside the sandbox's.
	App *appJSON `json:"app,omitempty"`
}

// appJSON is a sandbox's app in the JSON API (docs/api.md, "The app").
type appJSON struct {
	Status          sandbox.AppStatus `json:"status"`
	Version         *int32            `json:"version"`
	Since           time.Time         `json:"since"`
	ExitCode        *int32            `json:"exitCode"`
	LastGoodVersion *int32            `json:"lastGoodVersion"`
}

func toAppJSON(a overview.AppState) *appJSON {
	out := &appJSON{Status: a.Status, Since: a.Since, ExitCode: a.ExitCode, LastGoodVersion: a.LastGoodVersion}
	if a.Version > 0 {
		v := a.Version
		out.Version = &v
	}
	return out
}

func (h *Handlers) toSandboxJSON(sb db.Sandbox) sandboxJSON {
	out := sandboxJSON{ID: sb.ID.String(), ProviderID: sb.ProviderID, Status: sb.Status, PreviewURL: sb.PreviewURL,
		LastActiveAt: sb.LastActiveAt, LastVerifiedAt: sb.LastVerifiedAt, IdleTimeoutMs: h.Lifecycle.Deadlines().IdleTimeout.Milliseconds(),
		LifecycleTimeoutMs: h.Lifecycle.Deadlines().SandboxTimeout.Milliseconds(), Recreated: sb.Recreated, FailureCause: views.CauseText(sb.FailureCause, sb.FailureDetail),
		FailureCode: sb.FailureCause}
	out.SnapshotKind = sb.SnapshotKind
	out.ExpiresAt = overview.ExpiresAt(sb)
	return out
}

// buildJSON is a build in the JSON API (docs/api.md).
type buildJSON struct {
	ID      string              `json:"id"`
	Version int32               `json:"version"`
	Status  sandbox.BuildStatus `json:"status"`
	Stage   string              `json:"stage"`
	Error   string              `json:"error,omitempty"`
	// FailureCode is Error's code, for programs (docs/api.md, "Failure codes").
	FailureCode *sandbox.BuildFailure `json:"failureCode,omitempty"`
	Kind        sandbox.BuildKind     `json:"kind"`
}

func toBuildJSON(b db.Build) buildJSON {
	return buildJSON{ID: b.ID.String(), Version: b.Version, Status: b.Status, Stage: b.Stage, Error: views.BuildError(b),
		FailureCode: b.FailureCode, Kind: b.Kind}
}

func (h *Handlers) apiBuild(rebuild bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := h.projectID(c)
		if err != nil {
			return err
		}
		var in struct {
			IdempotencyKey string `json:"idempotencyKey"`
		}
		if err := bindJSON(c, &in); err != nil {
			return err
		}
		res, err := h.Lifecycle.StartBuild(c.Request().Context(), actor(c), id, in.IdempotencyKey, rebuild)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusAccepted, map[string]any{"build": toBuildJSON(res.Build), "sandbox": h.toSandboxJSON(res.Sandbox), "replayed": res.Replayed})
	}
}

func (h *Handlers) apiGetSandbox(c echo.Context) error {
	id, err := h.sandboxID(c)
	if err != nil {
		return err
	}
	st, err := h.Overview.SandboxStatus(c.Request().Context(), principal(c).Founder.ID, id)
	if err != nil {
		return err
	}
	if !st.Current { // an older sandbox of the project runs nothing now
		out := h.toSandboxJSON(st.Sandbox)
		out.App = toAppJSON(st.App)
		return c.JSON(http.StatusOK, out)
	}
	out := h.currentSandboxJSON(st.Sandbox, st.DeployedVersion, st.Waiting)
	out.App = toAppJSON(st.App)
	return c.JSON(http.StatusOK, out)
}

// sandboxOfView is the project's current sandbox with the version it runs, the one waiting and
// its app.
func (h *Handlers) sandboxOfView(v overview.ProjectView) sandboxJSON {
	out := h.currentSandboxJSON(*v.Sandbox, v.DeployedVersion, v.Waiting())
	out.App = toAppJSON(v.App())
	return out
}

// currentSandboxJSON is a project's current sandbox with the version it runs and the one
// waiting (0: none).
func (h *Handlers) currentSandboxJSON(sb db.Sandbox, deployed, waiting int32) sandboxJSON {
	out := h.toSandboxJSON(sb)
	out.Version = &deployed
	if waiting != 0 {
		out.PendingVersion = &waiting
	}
	return out
}

// apiSandboxAction runs an action and answers with the sandbox as it now stands.
func (h *Handlers) apiSandboxAction(status int, act func(echo.Context, uuid.UUID, uuid.UUID) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := h.sandboxID(c)
		if err != nil {
			return err
		}
		u := principal(c).Founder
		if err := act(c, u.ID, id); err != nil {
			return err
		}
		sb, err := h.Overview.OwnedSandbox(c.Request().Context(), u.ID, id)
		if err != nil {
			return err
		}
		return c.JSON(status, h.toSandboxJSON(sb))
	}
}

func (h *Handlers) activity(c echo.Context, owner, id uuid.UUID) error {
	return h.Lifecycle.Activity(c.Request().Context(), owner, id)
}
