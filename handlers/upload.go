package handlers

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/projects"
	"sandman/versions"
	"sandman/views"
)

// The upload form's own fields (name, commands, port, pause kind): a few, each short.
const (
	maxUploadFields    = 16
	maxUploadFieldSize = 4 << 10
)

type upload struct {
	fields map[string]string
	files  []versions.File
	errs   []versions.FileError
}

// readUpload streams a multipart upload: every file, and every file inside a zip, is charged to
// one budget for the whole request (versions.Budget) as it is read, and the first overrun
// refuses the upload. It reads each part's filename itself because mime/multipart keeps only
// the base name, and a folder upload's relative paths matter.
func readUpload(c echo.Context) (*upload, error) {
	mr, err := streamedForm(c)
	if err != nil {
		return nil, echo.NewHTTPError(http.StatusBadRequest, "Send the upload as multipart/form-data.")
	}
	up := &upload{fields: map[string]string{}}
	budget := versions.NewBudget()
	for {
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, uploadReadError(err)
		}
		name, filename, hasFile := partNames(part)
		switch {
		case name == "files" && hasFile:
			if err := up.readFile(part, filename, budget); err != nil {
				if ae, ok := apperr.As(err); ok && ae.Kind == apperr.KindTooLarge {
					// Take in the rest of what was sent (the wire limit bounds it, nothing is
					// kept), so the browser reads the answer instead of a reset connection.
					_, _ = io.Copy(io.Discard, c.Request().Body)
					return nil, err
				}
				return nil, uploadReadError(err)
			}
		case !hasFile:
			if len(up.fields) >= maxUploadFields {
				return nil, echo.NewHTTPError(http.StatusBadRequest, "The form has more fields than the upload form sends.")
			}
			v, err := io.ReadAll(io.LimitReader(part, maxUploadFieldSize+1))
			if err != nil {
				return nil, uploadReadError(err)
			}
			if len(v) > maxUploadFieldSize {
				return nil, &apperr.Error{Kind: apperr.KindTooLarge, Code: codeTooLarge,
					Message: "A field of the form is longer than 4 KiB, the limit for a name or a command. Shorten it and try again."}
			}
			up.fields[name] = string(v)
		}
		// Any other part is skipped unread: NextRawPart discards it.
	}
	up.files = stripCommonFolder(up.files)
	return up, nil
}

// readFile takes one file part: a zip archive's files, or the file itself.
func (up *upload) readFile(part io.Reader, filename string, budget *versions.Budget) error {
	if filename == "" {
		// The browser sends an empty, nameless part when no file was chosen.
		var one [1]byte
		if n, _ := io.ReadFull(part, one[:]); n > 0 {
			up.errs = append(up.errs, versions.FileError{Message: "A file was sent without a name."})
		}
		return nil
	}
	if strings.HasSuffix(strings.ToLower(filename), ".zip") {
		// The archive itself is bounded by the wire limit; what is inside is charged as it is
		// unpacked.
		data, err := io.ReadAll(part)
		if err != nil {
			return err
		}
		if bytes.HasPrefix(data, []byte("PK")) {
			files, errs, err := projects.ReadZip(data, budget)
			up.files, up.errs = append(up.files, files...), append(up.errs, errs...)
			return err
		}
		part = bytes.NewReader(data) // named .zip, but not one: an ordinary file
	}
	content, err := budget.ReadFile(part)
	if err != nil {
		return err
	}
	up.files = append(up.files, versions.File{Path: filename, Content: content})
	return nil
}

// uploadReadError is the answer to an upload whose body could not be read.
func uploadReadError(err error) error {
	if _, ok := apperr.As(err); ok {
		return err
	}
	return bodyReadError(uploadRule, err)
}

// partNames returns the form field name and the raw filename of a part.
func partNames(p *multipart.Part) (name, filename string, hasFile bool) {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return "", "", false
	}
	filename, hasFile = params["filename"]
	return params["name"], filename, hasFile
}

// stripCommonFolder drops the top folder a browser's folder upload puts before every path, so
// "myapp/package.json" is stored as "package.json".
func stripCommonFolder(files []versions.File) []versions.File {
	if len(files) == 0 {
		return files
	}
	top, _, ok := strings.Cut(files[0].Path, "/")
	if !ok || top == "" || top == ".." {
		return files
	}
	for _, f := range files {
		if !strings.HasPrefix(f.Path, top+"/") {
			return files
		}
	}
	out := make([]versions.File, len(files))
	for i, f := range files {
		f.Path = strings.TrimPrefix(f.Path, top+"/") // everything else kept: the executable bit too
		out[i] = f
	}
	return out
}

func sortFileErrors(errs []views.FileError) {
	sort.Slice(errs, func(i, j int) bool { return errs[i].Path < errs[j].Path })
}
