package handlers

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
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
	"sandman/projects"
	"sandman/versions"
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
	return versionJSON{Number: v.Number, Parent: v.ParentNumber, Source: v.Source, RestoredFrom: v.RestoredFrom, Message: v.Message,
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

// decodeJSON decodes a whole body strictly, like bindJSON.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The request body is not valid JSON for this route: "+err.Error())
	}
	return nil
}

// apiCreateVersion makes a version (POST /api/projects/{id}/versions).
func (h *Handlers) apiCreateVersion(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	owner := currentUser(c).ID
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
		return c.JSON(http.StatusConflict, map[string]any{"error": conflict.Error(), "code": "version_conflict",
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
	page, err := h.Versions.List(c.Request().Context(), currentUser(c).ID, id, int32(before), int32(limit))
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
	v, files, err := h.Versions.Get(c.Request().Context(), currentUser(c).ID, id, n)
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
	_, content, err := h.Versions.FileContent(c.Request().Context(), currentUser(c).ID, id, n, p)
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
	if err := h.Versions.Archive(c.Request().Context(), currentUser(c).ID, id, n, &buf); err != nil {
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
	owner := currentUser(c).ID
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
