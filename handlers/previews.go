package handlers

import (
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/db"
	"sandman/lifecycle"
	"sandman/projects"
	"sandman/views"
)

// previewVM turns a project's state into the card and pane view model.
func previewVM(v lifecycle.ProjectView) views.Preview {
	p := views.Preview{ProjectID: v.Project.ID.String(), ProjectName: v.Project.Name,
		Source: sourceText(v.Project), FileCount: v.FileCount, Key: uuid.NewString(), EventID: v.EventID}
	if v.Sandbox != nil {
		sb := v.Sandbox
		p.SandboxID, p.Status, p.PreviewURL = sb.ID.String(), string(sb.Status), sb.PreviewURL
		p.FailureCause, p.Recreated = sb.FailureCause, sb.Recreated
	}
	if v.Build != nil {
		p.BuildStatus, p.Stage, p.BuildError = string(v.Build.Status), v.Build.Stage, v.Build.Error
	}
	return p
}

func sourceText(p db.Project) string {
	if p.Starter != nil {
		if st, ok := projects.StarterByName(*p.Starter); ok {
			return st.Title + " starter"
		}
	}
	return "Uploaded files"
}

// renderPreview answers an htmx action with the fragment it targets: the card on the
// dashboard, the pane on the build page.
func (h *Handlers) renderPreview(c echo.Context, status int, v lifecycle.ProjectView) error {
	vm := previewVM(v)
	if c.Request().Header.Get("HX-Target") == views.DOMID(views.Card, vm.ProjectID) {
		return render(c, status, views.PreviewCard(vm))
	}
	return render(c, status, views.PreviewPane(vm))
}

func (h *Handlers) projectID(c echo.Context) (uuid.UUID, error) {
	return parseID(c.Param("id"), "Project")
}
func (h *Handlers) sandboxID(c echo.Context) (uuid.UUID, error) {
	return parseID(c.Param("id"), "Sandbox")
}

func (h *Handlers) buildAction(rebuild bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := h.projectID(c)
		if err != nil {
			return err
		}
		u := currentUser(c)
		ctx := c.Request().Context()
		if _, err := h.Lifecycle.StartBuild(ctx, u.ID, id, c.FormValue("idempotencyKey"), rebuild); err != nil {
			return err
		}
		v, err := h.Lifecycle.Project(ctx, u.ID, id)
		if err != nil {
			return err
		}
		if err := h.renderPreview(c, http.StatusOK, v); err != nil {
			return err
		}
		credits, err := h.Lifecycle.Credits(ctx, u.ID)
		if err != nil {
			return err
		}
		// The header's balance changed too.
		return views.Credits(credits, true).Render(ctx, c.Response())
	}
}

func (h *Handlers) rebuildConfirm(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	u := currentUser(c)
	v, err := h.Lifecycle.Project(c.Request().Context(), u.ID, id)
	if err != nil {
		return err
	}
	target := views.DOMID(views.Pane, v.Project.ID.String())
	if card := views.DOMID(views.Card, v.Project.ID.String()); c.QueryParam("target") == card {
		target = card
	}
	return render(c, http.StatusOK, views.RebuildConfirm(v.Project.ID.String(), target, uuid.NewString(), u.Credits))
}

// sandboxAction runs one lifecycle action on a founder's sandbox and re-renders its fragment.
func (h *Handlers) sandboxAction(act func(echo.Context, uuid.UUID, uuid.UUID) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := h.sandboxID(c)
		if err != nil {
			return err
		}
		u := currentUser(c)
		if err := act(c, u.ID, id); err != nil {
			return err
		}
		v, err := h.Lifecycle.ProjectOfSandbox(c.Request().Context(), u.ID, id)
		if err != nil {
			return err
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
	ID                 string     `json:"id"`
	ProviderID         *string    `json:"providerId"`
	Status             string     `json:"status"`
	SnapshotKind       *string    `json:"snapshotKind"`
	PreviewURL         string     `json:"previewUrl"`
	LastActiveAt       time.Time  `json:"lastActiveAt"`
	LastVerifiedAt     *time.Time `json:"lastVerifiedAt"`
	IdleTimeoutMs      int64      `json:"idleTimeoutMs"`
	LifecycleTimeoutMs int64      `json:"lifecycleTimeoutMs"`
	ExpiresAt          *time.Time `json:"expiresAt"`
	Recreated          bool       `json:"recreated"`
	FailureCause       string     `json:"failureCause,omitempty"`
}

func (h *Handlers) toSandboxJSON(sb db.Sandbox) sandboxJSON {
	out := sandboxJSON{ID: sb.ID.String(), ProviderID: sb.ProviderID, Status: string(sb.Status), PreviewURL: sb.PreviewURL,
		LastActiveAt: sb.LastActiveAt, LastVerifiedAt: sb.LastVerifiedAt, IdleTimeoutMs: h.Lifecycle.IdleTimeout(),
		LifecycleTimeoutMs: h.Lifecycle.SandboxTimeout(), Recreated: sb.Recreated, FailureCause: sb.FailureCause}
	if sb.SnapshotKind != nil {
		k := string(*sb.SnapshotKind)
		out.SnapshotKind = &k
	}
	out.ExpiresAt = lifecycle.ExpiresAt(sb)
	return out
}

// buildJSON is a build in the JSON API.
type buildJSON struct {
	ID      string `json:"id"`
	Version int32  `json:"version"`
	Status  string `json:"status"`
	Stage   string `json:"stage"`
	Error   string `json:"error,omitempty"`
	Kind    string `json:"kind"`
}

func toBuildJSON(b db.Build) buildJSON {
	return buildJSON{ID: b.ID.String(), Version: b.Version, Status: string(b.Status), Stage: b.Stage, Error: b.Error, Kind: string(b.Kind)}
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
		res, err := h.Lifecycle.StartBuild(c.Request().Context(), currentUser(c).ID, id, in.IdempotencyKey, rebuild)
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
	sb, err := h.Lifecycle.OwnedSandbox(c.Request().Context(), currentUser(c).ID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, h.toSandboxJSON(sb))
}

// apiSandboxAction runs an action and answers with the sandbox as it now stands.
func (h *Handlers) apiSandboxAction(status int, act func(echo.Context, uuid.UUID, uuid.UUID) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := h.sandboxID(c)
		if err != nil {
			return err
		}
		u := currentUser(c)
		if err := act(c, u.ID, id); err != nil {
			return err
		}
		sb, err := h.Lifecycle.OwnedSandbox(c.Request().Context(), u.ID, id)
		if err != nil {
			return err
		}
		return c.JSON(status, h.toSandboxJSON(sb))
	}
}

func (h *Handlers) activity(c echo.Context, owner, id uuid.UUID) error {
	return h.Lifecycle.Activity(c.Request().Context(), owner, id)
}
