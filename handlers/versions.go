package handlers

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/db"
	"sandman/overview"
	"sandman/projects"
	"sandman/versions"
	"sandman/views"
)

// versionJSON is a version in the JSON API (docs/api.md, "Versions").
type versionJSON struct {
	Number       int32     `json:"number"`
	Parent       *int32    `json:"parent"`
	Source       string    `json:"source"`
	RestoredFrom *int32    `json:"restoredFrom,omitempty"`
	Message      string    `json:"message"`
	Added        int32     `json:"added"`
	Changed      int32     `json:"changed"`
	Removed      int32     `json:"removed"`
	FileCount    int32     `json:"fileCount"`
	TotalBytes   int64     `json:"totalBytes"`
	CreatedAt    time.Time `json:"createdAt"`
	// Files is the manifest, in GET …/versions/{n} only.
	Files []versionFileJSON `json:"files,omitempty"`
}

type versionFileJSON struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
	Executable bool   `json:"executable,omitempty"`
}

func toVersionJSON(v db.Version) versionJSON {
	return versionJSON{Number: v.Number, Parent: v.ParentNumber, Source: string(v.Source), RestoredFrom: v.RestoredFrom, Message: v.Message,
		Added: v.Added, Changed: v.Changed, Removed: v.Removed, FileCount: v.FileCount, TotalBytes: v.TotalBytes, CreatedAt: v.CreatedAt}
}

// versionNumber reads {n} from the path; anything but a positive number is simply not found.
func versionNumber(c echo.Context) (int32, error) {
	n, err := strconv.ParseInt(c.Param("n"), 10, 32)
	if err != nil || n < 1 {
		return 0, apperr.NotFound("Version")
	}
	return int32(n), nil
}

// newVersionFileJSON is one file of POST …/versions: its text, or its bytes in base64.
type newVersionFileJSON struct {
	Path       string  `json:"path"`
	Content    *string `json:"content"`
	Base64     *string `json:"base64"`
	Executable bool    `json:"executable"`
}

type newVersionJSON struct {
	Message string               `json:"message"`
	Base    *int32               `json:"base"`
	Replace bool                 `json:"replace"`
	Files   []newVersionFileJSON `json:"files"`
	Delete  []string             `json:"delete"`
}

// versionChange parses a POST …/versions body: JSON, or a zip archive (the whole set, with
// ?message= and ?base=). Every file is charged to one budget as it is decoded.
func versionChange(c echo.Context, body []byte) (versions.Change, error) {
	budget := versions.NewBudget()
	mt, _, _ := mime.ParseMediaType(c.Request().Header.Get("Content-Type"))
	switch mt {
	case "application/zip":
		ch := versions.Change{Replace: true, Message: c.QueryParam("message"), Source: versions.SourceAPI}
		if b := c.QueryParam("base"); b != "" {
			n, err := strconv.ParseInt(b, 10, 32)
			if err != nil || n < 1 {
				return ch, apperr.Invalid(map[string]string{"base": "Send base as a version number, like ?base=7."})
			}
			ch.Base = int32(n)
		}
		files, errs, err := projects.ReadZip(body, budget)
		ch.Files, ch.ReadErrs = files, errs
		return ch, err
	case "application/json":
	default:
		return versions.Change{}, echo.NewHTTPError(http.StatusUnsupportedMediaType, "Send the version as application/json, or a zip archive as application/zip.")
	}
	var in newVersionJSON
	if err := decodeJSON(body, &in); err != nil {
		return versions.Change{}, err
	}
	ch := versions.Change{Message: in.Message, Replace: in.Replace, Delete: in.Delete, Source: versions.SourceAPI}
	if in.Base != nil {
		if *in.Base < 1 {
			return ch, apperr.Invalid(map[string]string{"base": "Send base as the number of the version you started from."})
		}
		ch.Base = *in.Base
	}
	for _, f := range in.Files {
		var r io.Reader
		switch {
		case f.Content != nil && f.Base64 != nil, f.Content == nil && f.Base64 == nil:
			ch.ReadErrs = append(ch.ReadErrs, versions.FileError{Path: f.Path, Message: `Send either "content" (text) or "base64" (bytes), not both or neither.`})
			continue
		case f.Content != nil:
			r = strings.NewReader(*f.Content)
		default:
			r = base64.NewDecoder(base64.StdEncoding, strings.NewReader(*f.Base64))
		}
		content, err := budget.ReadFile(r)
		if _, overrun := apperr.As(err); overrun {
			return ch, err // the budget's: 413
		}
		if err != nil { // only decoding can fail on a string
			ch.ReadErrs = append(ch.ReadErrs, versions.FileError{Path: f.Path,
				Message: "The base64 is not valid (" + err.Error() + "): send standard base64, with padding."})
			continue
		}
		ch.Files = append(ch.Files, versions.File{Path: f.Path, Content: content, Executable: f.Executable})
	}
	return ch, nil
}

// apiCreateVersion makes a version (POST /api/projects/{id}/versions).
func (h *Handlers) apiCreateVersion(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	owner := principal(c).Founder.ID
	// Another founder's project is not found, whatever the body says.
	if _, err := h.Versions.Current(c.Request().Context(), owner, id); err != nil {
		return err
	}
	body, err := io.ReadAll(c.Request().Body) // within its limit already (limitBody)
	if err != nil {
		return err
	}
	ch, err := versionChange(c, body)
	if err != nil {
		return err
	}
	// The key's request is its body and how to read it: the same bytes as JSON and as a zip
	// are two requests.
	sum := sha256.Sum256(append([]byte(c.Request().Header.Get("Content-Type")+"\n"+c.QueryString()+"\n"), body...))
	res, err := h.Versions.CreateOnce(c.Request().Context(), owner, id, c.Request().Header.Get("Idempotency-Key"), sum[:], ch)
	return h.versionAnswer(c, res, err)
}

// versionAnswer answers a new version: 201, or 200 with the current version when nothing
// changed; a conflict carries the current version, so the writer can re-base.
func (h *Handlers) versionAnswer(c echo.Context, res versions.Result, err error) error {
	var conflict *versions.ConflictError
	if errors.As(err, &conflict) {
		return c.JSON(http.StatusConflict, map[string]any{"error": conflict.Error(), "code": versions.CodeVersionConflict,
			"current": toVersionJSON(conflict.Current)})
	}
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if res.Unchanged {
		status = http.StatusOK
	}
	out := map[string]any{"version": toVersionJSON(res.Version)}
	if res.Unchanged {
		out["unchanged"] = true
	}
	if res.Replayed {
		out["replayed"] = true
	}
	return c.JSON(status, out)
}

func (h *Handlers) apiListVersions(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	var before, limit int64
	for name, dst := range map[string]*int64{"before": &before, "limit": &limit} {
		if raw := c.QueryParam(name); raw != "" {
			if *dst, err = strconv.ParseInt(raw, 10, 32); err != nil || *dst < 1 {
				return apperr.Invalid(map[string]string{name: "Send " + name + " as a positive number."})
			}
		}
	}
	page, err := h.Versions.List(c.Request().Context(), principal(c).Founder.ID, id, int32(before), int32(limit))
	if err != nil {
		return err
	}
	out := make([]versionJSON, len(page.Versions))
	for i, v := range page.Versions {
		out[i] = toVersionJSON(v)
	}
	var next *int32
	if n := len(page.Versions); n > 0 && page.Versions[n-1].Number > 1 {
		next = &page.Versions[n-1].Number
	}
	return c.JSON(http.StatusOK, map[string]any{"versions": out, "current": page.Current.Number, "nextBefore": next})
}

func (h *Handlers) apiGetVersion(c echo.Context) error {
	id, n, err := h.projectAndVersion(c)
	if err != nil {
		return err
	}
	v, files, err := h.Versions.Get(c.Request().Context(), principal(c).Founder.ID, id, n)
	if err != nil {
		return err
	}
	out := toVersionJSON(v)
	out.Files = make([]versionFileJSON, len(files))
	for i, f := range files {
		out.Files[i] = versionFileJSON{Path: f.Path, Size: f.Size, SHA256: fmt.Sprintf("%x", f.SHA256), Executable: f.Executable}
	}
	return c.JSON(http.StatusOK, out)
}

// versionFile answers one file's bytes, always as an attachment and never sniffed, so a
// founder's HTML never runs on Sandman's origin.
func (h *Handlers) versionFile(c echo.Context) error {
	id, n, err := h.projectAndVersion(c)
	if err != nil {
		return err
	}
	p := c.Param("*")
	if u, err := url.PathUnescape(p); err == nil {
		p = u
	}
	_, content, err := h.Versions.FileContent(c.Request().Context(), principal(c).Founder.ID, id, n, p)
	if err != nil {
		return err
	}
	attach(c, path.Base(p))
	return c.Blob(http.StatusOK, "application/octet-stream", content)
}

// attach makes the answer a download named name.
func attach(c echo.Context, name string) {
	hdr := c.Response().Header()
	hdr.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	hdr.Set("X-Content-Type-Options", "nosniff")
}

func (h *Handlers) versionArchive(c echo.Context) error {
	id, n, err := h.projectAndVersion(c)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := h.Versions.Archive(c.Request().Context(), principal(c).Founder.ID, id, n, &buf); err != nil {
		return err
	}
	attach(c, fmt.Sprintf("version-%d.zip", n))
	return c.Blob(http.StatusOK, "application/zip", buf.Bytes())
}

func (h *Handlers) apiRestoreVersion(c echo.Context) error {
	id, n, err := h.projectAndVersion(c)
	if err != nil {
		return err
	}
	owner := principal(c).Founder.ID
	if _, err := h.Versions.Current(c.Request().Context(), owner, id); err != nil {
		return err // another founder's project is not found, whatever the body says
	}
	var in struct {
		Paths []string `json:"paths"`
	}
	if c.Request().ContentLength != 0 {
		if err := bindJSON(c, &in); err != nil {
			return err
		}
	}
	res, err := h.Versions.Restore(c.Request().Context(), owner, id, n, in.Paths)
	return h.versionAnswer(c, res, err)
}

func (h *Handlers) projectAndVersion(c echo.Context) (uuid.UUID, int32, error) {
	id, err := h.projectID(c)
	if err != nil {
		return id, 0, err
	}
	n, err := versionNumber(c)
	return id, n, err
}

// sourceOf is a version's source as the founder reads it.
func sourceOf(v db.Version) string {
	switch v.Source {
	case versions.SourceCreated:
		return "Created"
	case versions.SourceUpload:
		return "Uploaded by you"
	case versions.SourceRestore:
		if v.RestoredFrom != nil {
			return fmt.Sprintf("Restored from version %d", *v.RestoredFrom)
		}
		return "Restored"
	}
	return "From the API"
}

func versionRow(v db.Version) views.VersionRow {
	return views.VersionRow{Number: v.Number, At: v.CreatedAt, Source: sourceOf(v), Message: v.Message,
		Added: v.Added, Changed: v.Changed, Removed: v.Removed}
}

// versionsShown is how many versions the build page lists.
const versionsShown = 20

// versionsVM is the build page's Versions section.
func (h *Handlers) versionsVM(c echo.Context, owner uuid.UUID, v overview.ProjectView, now time.Time) (views.Versions, error) {
	page, err := h.Versions.List(c.Request().Context(), owner, v.Project.ID, 0, versionsShown+1)
	if err != nil {
		return views.Versions{}, err
	}
	out := views.Versions{ProjectID: v.Project.ID.String(), CSRF: h.csrfToken(c), Now: now, Live: v.DeployedVersion, Current: page.Current.Number,
		DoesNotStart: v.App().DoesNotStart()}
	for i, ver := range page.Versions {
		if i == versionsShown {
			out.More = true
			break
		}
		out.Rows = append(out.Rows, versionRow(ver))
	}
	return out, nil
}

// versionPage shows a version's changes against its parent: per file, a unified diff of text,
// "binary" otherwise, within the page's bounds (versions.VersionChanges): what does not fit is
// folded behind a link to the version's archive.
func (h *Handlers) versionPage(c echo.Context) error {
	id, n, err := h.projectAndVersion(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	u := principal(c).Founder
	p, err := h.Projects.Get(ctx, u.ID, id)
	if err != nil {
		return err
	}
	v, changes, err := h.Versions.VersionChanges(ctx, u.ID, id, n)
	if err != nil {
		return err
	}
	cur, err := h.Versions.Current(ctx, u.ID, id)
	if err != nil {
		return err
	}
	vm := views.VersionPage{Layout: h.layout(c, fmt.Sprintf("%s: version %d", p.Name, n)), ProjectID: id.String(), ProjectName: p.Name,
		Version: versionRow(v), Current: cur.Number, More: changes.More}
	for _, f := range changes.Files {
		fc := views.FileChange{Path: f.Path, Kind: f.Kind, Binary: f.Binary, Folded: f.Folded, Lines: make([]views.DiffLine, len(f.Lines))}
		for i, l := range f.Lines {
			fc.Lines[i] = views.DiffLine{Kind: l.Kind, Text: l.Text}
		}
		vm.Files = append(vm.Files, fc)
	}
	return render(c, http.StatusOK, views.VersionView(vm))
}

// restoreAction restores a version (or, with path fields, those files of it) from a form, and
// goes back to the build page.
func (h *Handlers) restoreAction(c echo.Context) error {
	id, n, err := h.projectAndVersion(c)
	if err != nil {
		return err
	}
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	if _, err := h.Versions.Restore(c.Request().Context(), principal(c).Founder.ID, id, n, form["path"]); err != nil {
		return err
	}
	return redirect(c, "/projects/"+id.String())
}

func (h *Handlers) uploadVersionPage(c echo.Context) error {
	vm, err := h.uploadVersionVM(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.UploadVersion(vm))
}

func (h *Handlers) uploadVersionVM(c echo.Context) (views.UploadVersionPage, error) {
	id, err := h.projectID(c)
	if err != nil {
		return views.UploadVersionPage{}, err
	}
	ctx := c.Request().Context()
	u := principal(c).Founder
	p, err := h.Projects.Get(ctx, u.ID, id)
	if err != nil {
		return views.UploadVersionPage{}, err
	}
	cur, err := h.Versions.Current(ctx, u.ID, id)
	if err != nil {
		return views.UploadVersionPage{}, err
	}
	return views.UploadVersionPage{Layout: h.layout(c, "Upload a new version"), ProjectID: id.String(), ProjectName: p.Name, Current: cur.Number}, nil
}

// uploadVersion makes a version from the build page's form: the files (a zip's, a folder's)
// are the whole set. A refused upload shows the form again with what went wrong, file by file.
func (h *Handlers) uploadVersion(c echo.Context) error {
	vm, err := h.uploadVersionVM(c) // another founder's project is not found before its body is read
	if err != nil {
		return err
	}
	up, err := readUpload(c)
	if err != nil {
		return err
	}
	ch := versions.Change{Replace: true, Files: up.files, ReadErrs: up.errs, Message: up.fields["message"], Source: versions.SourceUpload}
	if n, err := strconv.ParseInt(up.fields["base"], 10, 32); err == nil {
		ch.Base = int32(n)
	}
	id, _ := uuid.Parse(vm.ProjectID)
	res, err := h.Versions.Create(c.Request().Context(), principal(c).Founder.ID, id, ch)
	var conflict *versions.ConflictError
	ae, invalid := apperr.As(err)
	status := http.StatusUnprocessableEntity
	switch {
	case err == nil || res.Unchanged:
		return redirect(c, "/projects/"+vm.ProjectID)
	case invalid && ae.Code == versions.CodeStorageQuota:
		vm.Errors = map[string]string{"files": ae.Message}
		status = http.StatusRequestEntityTooLarge
	case errors.As(err, &conflict):
		vm.Errors = map[string]string{"base": conflict.Error() + " Nothing was stored: choose your files again."}
		vm.Current = conflict.Current.Number
	case invalid && ae.Kind == apperr.KindInvalid:
		vm.Errors = ae.Fields
		for key, msg := range ae.Fields {
			if p, ok := strings.CutPrefix(key, "file:"); ok {
				vm.FileErrors = append(vm.FileErrors, views.FileError{Path: p, Message: msg})
			}
		}
		sortFileErrors(vm.FileErrors)
	default:
		return err
	}
	vm.Message = up.fields["message"]
	return render(c, status, views.UploadVersion(vm))
}

// reloadAction saves the project's reload choice.
func (h *Handlers) reloadAction(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	if _, err := h.Projects.SetReloadsItself(c.Request().Context(), principal(c).Founder.ID, id, c.FormValue("reloads_itself") == "true"); err != nil {
		return err
	}
	return redirect(c, "/projects/"+id.String())
}

// reporterAction turns the project's preview reporter on or off (the build page's form).
func (h *Handlers) reporterAction(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	if _, err := h.Lifecycle.SetPreviewReporter(c.Request().Context(), principal(c).Founder.ID, id, c.FormValue("preview_reporter") == "true"); err != nil {
		return err
	}
	return redirect(c, "/projects/"+id.String())
}
