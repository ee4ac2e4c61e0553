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
	"sandman/views"
)

// maxUploadBody leaves room for the form fields and multipart framing around the files.
const maxUploadBody = projects.MaxTotalBytes + 1<<20

type upload struct {
	fields map[string]string
	files  []projects.File
	errs   []projects.FileError
}

// readUpload streams a multipart upload. It reads each part's filename itself because
// mime/multipart keeps only the base name, and a folder upload's relative paths matter.
func readUpload(c echo.Context) (*upload, error) {
	r := c.Request()
	r.Body = http.MaxBytesReader(c.Response(), r.Body, maxUploadBody)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, echo.NewHTTPError(http.StatusBadRequest, "Send the upload as multipart/form-data.")
	}
	up := &upload{fields: map[string]string{}}
	for {
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, uploadReadError(err)
		}
		name, filename, hasFile := partNames(part)
		data, err := io.ReadAll(part)
		if err != nil {
			return nil, uploadReadError(err)
		}
		switch {
		case name == "files" && hasFile:
			if filename == "" && len(data) == 0 {
				continue // the browser sends an empty part when no file was chosen
			}
			if strings.HasSuffix(strings.ToLower(filename), ".zip") && bytes.HasPrefix(data, []byte("PK")) {
				files, errs := projects.ReadZip(data)
				up.files = append(up.files, files...)
				up.errs = append(up.errs, errs...)
				continue
			}
			up.files = append(up.files, projects.File{Path: filename, Content: data})
		case !hasFile && len(data) <= 4096:
			up.fields[name] = string(data)
		}
	}
	up.files = stripCommonFolder(up.files)
	return up, nil
}

func uploadReadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &apperr.Error{Kind: apperr.KindTooLarge, Code: "too_large",
			Message: "The upload is larger than 20 MiB. Remove large files (build output, node_modules) and try again."}
	}
	return echo.NewHTTPError(http.StatusBadRequest, "The upload could not be read; try again.")
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
func stripCommonFolder(files []projects.File) []projects.File {
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
	out := make([]projects.File, len(files))
	for i, f := range files {
		out[i] = projects.File{Path: strings.TrimPrefix(f.Path, top+"/"), Content: f.Content}
	}
	return out
}

func sortFileErrors(errs []views.FileError) {
	sort.Slice(errs, func(i, j int) bool { return errs[i].Path < errs[j].Path })
}
