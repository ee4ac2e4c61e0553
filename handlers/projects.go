package handlers

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/db"
	"sandman/projects"
	"sandman/sandbox"
	"sandman/versions"
	"sandman/views"
)

func (h *Handlers) dashboard(c echo.Context) error {
	ctx := c.Request().Context()
	rows, credits, err := h.Overview.Projects(ctx, principal(c).Founder.ID)
	if err != nil {
		return err
	}
	// Opening a page is what asks the provider for the truth of stale rows, in the background.
	h.Lifecycle.VerifyStale(ctx, rows...)
	setPageCredits(c, credits) // the header's balance, read with the projects (routes.go)
	usage, err := h.Versions.Usage(ctx, principal(c).Founder.ID)
	if err != nil {
		return err
	}
	p := views.DashboardPage{Layout: h.layout(c, "Your projects"), Projects: make([]views.Preview, 0, len(rows)),
		Usage: usageVM(usage, len(rows), h.Projects.Limit())}
	for _, r := range rows {
		p.Projects = append(p.Projects, previewVM(h.Lifecycle, r, p.Now, p.CSRF))
	}
	return render(c, http.StatusOK, views.Dashboard(p))
}

func (h *Handlers) projectPage(c echo.Context) error {
	u := principal(c).Founder
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	v, err := h.Overview.Project(ctx, u.ID, id)
	if err != nil {
		return err
	}
	h.Lifecycle.VerifyStale(ctx, v)
	_, files, err := h.Versions.Get(ctx, u.ID, id, v.CurrentVersion)
	if err != nil {
		return err
	}
	hist, err := h.Overview.History(ctx, u.ID, id, v.EventID)
	if err != nil {
		return err
	}
	box, err := h.shareBox(c, u.ID, id)
	if err != nil {
		return err
	}
	p := v.Project
	l := h.layout(c, p.Name)
	vs, err := h.versionsVM(c, u.ID, v, l.Now)
	if err != nil {
		return err
	}
	health, err := h.healthVM(ctx, u.ID, id, l.Now)
	if err != nil {
		return err
	}
	env, err := h.envVM(c, id, l.Now)
	if err != nil {
		return err
	}
	vm := views.ProjectPage{Layout: l, Preview: previewVM(h.Lifecycle, v, l.Now, l.CSRF), Share: box, History: historyVM(p.ID.String(), hist, h.Lifecycle.Deadlines().IdleTimeout, l.Now),
		InstallCommand: p.InstallCommand, StartCommand: p.StartCommand, Port: p.Port, PauseKind: p.PauseKind,
		ReloadsItself: p.ReloadsItself, PreviewReporter: p.PreviewReporter, Versions: vs, Health: health, Env: env}
	for _, f := range files {
		vm.Files = append(vm.Files, views.File{Path: f.Path, Size: humanSize(f.Size)})
	}
	return render(c, http.StatusOK, views.Project(vm))
}

func (h *Handlers) newProjectPage(c echo.Context) error {
	return render(c, http.StatusOK, views.NewProject(h.newProjectVM(c)))
}

func (h *Handlers) newProjectVM(c echo.Context) views.NewProjectPage {
	p := views.NewProjectPage{Layout: h.layout(c, "New project"), Form: views.NewProjectForm{Port: "3000"}}
	for _, s := range projects.Starters() {
		p.Starters = append(p.Starters, views.Starter{Name: s.Name, Title: s.Title, Description: s.Description})
	}
	return p
}

func (h *Handlers) createFromStarter(c echo.Context) error {
	u := principal(c).Founder
	p, err := h.Projects.CreateFromStarter(c.Request().Context(), u.ID, c.FormValue("name"), c.FormValue("starter"))
	if err != nil {
		if ae, ok := apperr.As(err); ok && ae.Kind == apperr.KindInvalid {
			vm := h.newProjectVM(c)
			vm.Errors = ae.Fields
			return render(c, http.StatusUnprocessableEntity, views.NewProject(vm))
		}
		return err
	}
	return redirect(c, "/projects/"+p.ID.String())
}

func (h *Handlers) createFromUpload(c echo.Context) error {
	u := principal(c).Founder
	up, err := readUpload(c)
	if err != nil {
		return err
	}
	set := projects.Settings{Name: up.fields["name"], InstallCommand: up.fields["install_command"],
		StartCommand: up.fields["start_command"], PauseKind: sandbox.PauseKind(up.fields["pause_kind"])}
	var portErr string
	if n, err := strconv.ParseInt(strings.TrimSpace(up.fields["port"]), 10, 32); err == nil {
		set.Port = int32(n)
	} else {
		portErr = "Enter the dev server's port as a number, like 3000."
	}
	p, err := h.Projects.CreateFromFiles(c.Request().Context(), u.ID, set, up.files, up.errs)
	if err == nil && portErr == "" {
		return redirect(c, "/projects/"+p.ID.String())
	}
	ae, ok := apperr.As(err)
	if err != nil && (!ok || ae.Kind != apperr.KindInvalid) {
		return err
	}
	fields := map[string]string{}
	if ae != nil {
		fields = ae.Fields
	}
	if portErr != "" {
		fields["port"] = portErr
	}
	vm := h.newProjectVM(c)
	vm.Errors = fields
	vm.Form = views.NewProjectForm{Name: up.fields["name"], InstallCommand: up.fields["install_command"],
		StartCommand: up.fields["start_command"], Port: up.fields["port"], PauseKind: sandbox.PauseKind(up.fields["pause_kind"])}
	for key, msg := range fields {
		if path, ok := strings.CutPrefix(key, "file:"); ok {
			vm.FileErrors = append(vm.FileErrors, views.FileError{Path: path, Message: msg})
		}
	}
	sortFileErrors(vm.FileErrors)
	return render(c, http.StatusUnprocessableEntity, views.NewProject(vm))
}

// projectJSON is a project in the JSON API.
type projectJSON struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Starter        *string           `json:"starter"`
	InstallCommand string            `json:"installCommand"`
	StartCommand   string            `json:"startCommand"`
	Port           int32             `json:"port"`
	PauseKind      sandbox.PauseKind `json:"pauseKind"`
	CreatedAt      time.Time         `json:"createdAt"`
	ReloadsItself  bool              `json:"reloadsItself"`
	// PreviewReporter: the preview proxy adds the error reporter to the app's pages.
	PreviewReporter bool         `json:"previewReporter"`
	CurrentVersion  int32        `json:"currentVersion,omitempty"`
	Build           *buildJSON   `json:"build"`
	Sandbox         *sandboxJSON `json:"sandbox"`
}

func toProjectJSON(p db.Project) projectJSON {
	return projectJSON{ID: p.ID.String(), Name: p.Name, Starter: p.Starter, InstallCommand: p.InstallCommand,
		StartCommand: p.StartCommand, Port: p.Port, PauseKind: p.PauseKind, CreatedAt: p.CreatedAt,
		ReloadsItself: p.ReloadsItself, PreviewReporter: p.PreviewReporter}
}

// apiPatchProject changes a project's settings; the preview reporter's switch is the one it
// takes so far.
func (h *Handlers) apiPatchProject(c echo.Context) error {
	id, err := h.ownedProjectID(c)
	if err != nil {
		return err
	}
	owner := principal(c).Founder.ID
	ctx := c.Request().Context()
	var in struct {
		PreviewReporter *bool `json:"previewReporter"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if in.PreviewReporter == nil {
		return echo.NewHTTPError(http.StatusBadRequest, `Give the setting to change: {"previewReporter": false} turns the preview's error reporter off, true turns it on.`)
	}
	p, err := h.Lifecycle.SetPreviewReporter(ctx, owner, id, *in.PreviewReporter)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toProjectJSON(p))
}

func (h *Handlers) apiListProjects(c echo.Context) error {
	rows, _, err := h.Overview.Projects(c.Request().Context(), principal(c).Founder.ID)
	if err != nil {
		return err
	}
	out := make([]projectJSON, 0, len(rows))
	for _, r := range rows {
		pj := toProjectJSON(r.Project)
		pj.CurrentVersion = r.CurrentVersion
		if r.Build != nil {
			b := toBuildJSON(*r.Build)
			pj.Build = &b
		}
		if r.Sandbox != nil {
			sb := h.sandboxOfView(r)
			pj.Sandbox = &sb
		}
		out = append(out, pj)
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handlers) apiCreateProject(c echo.Context) error {
	var in struct {
		Name    string `json:"name"`
		Starter string `json:"starter"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	p, err := h.Projects.CreateFromStarter(c.Request().Context(), principal(c).Founder.ID, in.Name, in.Starter)
	if err != nil {
		return err
	}
	pj := toProjectJSON(p)
	pj.CurrentVersion = 1 // a new project is its version 1
	return c.JSON(http.StatusCreated, pj)
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// usageVM is the dashboard's line on what the founder stores and may store.
func usageVM(u versions.Usage, projects, limit int) views.Usage {
	pct := 0
	if u.Quota > 0 {
		pct = int(min(100, u.Stored*100/u.Quota))
	}
	return views.Usage{Stored: versions.QuotaSize(u.Stored), Quota: versions.QuotaSize(u.Quota), Percent: pct,
		Projects: projects, MaxProjs: limit}
}
