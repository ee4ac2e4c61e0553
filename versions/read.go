package versions

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"sandman/apperr"
	"sandman/db"
)

// Page is one page of a project's versions, newest first, and its current version.
type Page struct {
	Versions []db.Version
	Current  db.Version
}

// List returns up to limit of the owner's project's versions below before (0: from the
// newest), newest first.
func (s *Service) List(ctx context.Context, owner, projectID uuid.UUID, before, limit int32) (Page, error) {
	if err := s.owned(ctx, owner, projectID); err != nil {
		return Page{}, err
	}
	if before <= 0 {
		before = math.MaxInt32
	}
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	cur, err := s.q.GetCurrentVersion(ctx, projectID)
	if err != nil {
		return Page{}, err
	}
	vs, err := s.q.ListVersions(ctx, db.ListVersionsParams{ProjectID: projectID, Before: before, MaxVersions: limit})
	return Page{Versions: vs, Current: cur}, err
}

// Current returns the owner's project's newest version.
func (s *Service) Current(ctx context.Context, owner, projectID uuid.UUID) (db.Version, error) {
	if err := s.owned(ctx, owner, projectID); err != nil {
		return db.Version{}, err
	}
	return s.q.GetCurrentVersion(ctx, projectID)
}

// Get returns version n of the owner's project and its manifest.
func (s *Service) Get(ctx context.Context, owner, projectID uuid.UUID, n int32) (db.Version, []Entry, error) {
	if err := s.owned(ctx, owner, projectID); err != nil {
		return db.Version{}, nil, err
	}
	v, err := getVersion(ctx, s.q, projectID, n)
	if err != nil {
		return v, nil, err
	}
	es, err := entries(ctx, s.q, v)
	return v, es, err
}

// FileContent returns one file of version n: its entry and its bytes.
func (s *Service) FileContent(ctx context.Context, owner, projectID uuid.UUID, n int32, path string) (Entry, []byte, error) {
	v, es, err := s.Get(ctx, owner, projectID, n)
	if err != nil {
		return Entry{}, nil, err
	}
	i := sort.Search(len(es), func(i int) bool { return es[i].Path >= path })
	if i == len(es) || es[i].Path != path {
		return Entry{}, nil, apperr.NotFound(fmt.Sprintf("File %q in version %d", path, v.Number))
	}
	rows, err := Contents(ctx, s.q, owner, v, []string{path})
	if err != nil {
		return Entry{}, nil, err
	}
	return es[i], rows[0].Content, nil
}

// Archive writes version n's files to w as a zip archive, with their executable bits.
func (s *Service) Archive(ctx context.Context, owner, projectID uuid.UUID, n int32, w io.Writer) error {
	if err := s.owned(ctx, owner, projectID); err != nil {
		return err
	}
	v, err := getVersion(ctx, s.q, projectID, n)
	if err != nil {
		return err
	}
	rows, err := Contents(ctx, s.q, owner, v, nil)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	for _, r := range rows {
		h := &zip.FileHeader{Name: r.Path, Method: zip.Deflate, Modified: v.CreatedAt}
		h.SetMode(0o644)
		if r.Executable {
			h.SetMode(0o755)
		}
		fw, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if _, err := fw.Write(r.Content); err != nil {
			return err
		}
	}
	return zw.Close()
}

// ErrContentMissing is a version's file whose stored content is gone: a reader fails with it
// rather than leave the file out.
var ErrContentMissing = errors.New("versions: stored content is missing")

// ContentReader reads version contents: a db.Tx or the pool's queries.
type ContentReader interface {
	ListVersionContents(ctx context.Context, arg db.ListVersionContentsParams) ([]db.ListVersionContentsRow, error)
}

// Contents are version v's files at paths (every file when paths is nil or empty) with their
// content, sorted by path, read from the owner's stored content. It is the one way to read a
// version's content: it fails (ErrContentMissing) when a file's content is not stored, or when
// a path asked for is not one of the version's files, never answering fewer files than asked.
func Contents(ctx context.Context, q ContentReader, owner uuid.UUID, v db.Version, paths []string) ([]db.ListVersionContentsRow, error) {
	if paths == nil {
		paths = []string{}
	}
	rows, err := q.ListVersionContents(ctx, db.ListVersionContentsParams{OwnerID: owner, ProjectID: v.ProjectID, Number: v.Number, Paths: paths})
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, r := range rows {
		if !r.Stored {
			missing = append(missing, r.Path)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %d file(s) of version %d of project %s, first %q", ErrContentMissing, len(missing), v.Number, v.ProjectID, missing[0])
	}
	if len(paths) > 0 && len(rows) != len(uniq(paths)) {
		return nil, fmt.Errorf("%w: version %d of project %s has %d of the %d files asked for", ErrContentMissing, v.Number, v.ProjectID, len(rows), len(uniq(paths)))
	}
	return rows, nil
}

func uniq(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

// FileChange is one file a version changed against its parent, as its page shows it.
type FileChange struct {
	Path   string
	Kind   string // added, changed, removed
	Binary bool   // not text: no lines
	// Lines are its unified diff, or the start of it when Folded.
	Lines []DiffLine
	// Folded: the change, or the rest of it, is too large for the page (MaxDiffBytes, the
	// page's bounds); the version's archive has it.
	Folded bool
}

// PageChanges is a version's page of changes, within the page's bounds.
type PageChanges struct {
	Files []FileChange // by path, at most MaxPageFiles
	More  int          // changed files past MaxPageFiles, not listed
}

// VersionChanges returns version n's changes against its parent, file by file, within the
// page's bounds: at most MaxPageFiles files, MaxPageReadBytes of content read and MaxPageLines
// lines (MaxPageTextBytes) of diff, whatever the versions hold.
func (s *Service) VersionChanges(ctx context.Context, owner, projectID uuid.UUID, n int32) (db.Version, PageChanges, error) {
	v, now, err := s.Get(ctx, owner, projectID, n)
	if err != nil {
		return v, PageChanges{}, err
	}
	var before []Entry
	var parent db.Version
	if v.ParentNumber != nil {
		if parent, err = s.q.GetVersionByNumber(ctx, db.GetVersionByNumberParams{ProjectID: projectID, Number: *v.ParentNumber}); err == nil {
			if before, err = entries(ctx, s.q, parent); err != nil {
				return v, PageChanges{}, err
			}
		} else if !db.IsNotFound(err) { // a pruned parent: every file reads as added
			return v, PageChanges{}, err
		}
	}
	d := Diff(before, now)
	var page PageChanges
	for _, group := range []struct {
		kind  string
		paths []string
	}{{"added", d.Added}, {"changed", d.Changed}, {"removed", d.Removed}} {
		for _, p := range group.paths {
			page.Files = append(page.Files, FileChange{Path: p, Kind: group.kind})
		}
	}
	slices.SortFunc(page.Files, func(a, b FileChange) int { return strings.Compare(a.Path, b.Path) })
	if len(page.Files) > MaxPageFiles {
		page.More = len(page.Files) - MaxPageFiles
		page.Files = page.Files[:MaxPageFiles]
	}
	// Which contents to read: in path order, each file whose two sides fit what is left to read.
	sizes := func(es []Entry) map[string]int64 {
		out := make(map[string]int64, len(es))
		for _, e := range es {
			out[e.Path] = e.Size
		}
		return out
	}
	oldSize, newSize := sizes(before), sizes(now)
	var oldPaths, newPaths []string
	left := int64(MaxPageReadBytes)
	for i := range page.Files {
		f := &page.Files[i]
		o, nw := oldSize[f.Path], newSize[f.Path]
		if o > MaxDiffBytes || nw > MaxDiffBytes || o+nw > left {
			f.Folded = true
			continue
		}
		left -= o + nw
		if f.Kind != "added" {
			oldPaths = append(oldPaths, f.Path)
		}
		if f.Kind != "removed" {
			newPaths = append(newPaths, f.Path)
		}
	}
	content := func(of db.Version, paths []string) (map[string][]byte, error) {
		out := map[string][]byte{}
		if len(paths) == 0 {
			return out, nil
		}
		rows, err := Contents(ctx, s.q, owner, of, paths)
		for _, r := range rows {
			out[r.Path] = r.Content
		}
		return out, err
	}
	olds, err := content(parent, oldPaths)
	if err != nil {
		return v, PageChanges{}, err
	}
	news, err := content(v, newPaths)
	if err != nil {
		return v, PageChanges{}, err
	}
	budget := newDiffBudget()
	for i := range page.Files {
		f := &page.Files[i]
		if f.Folded {
			continue
		}
		old, nw := olds[f.Path], news[f.Path]
		if !isText(old) || !isText(nw) {
			f.Binary = true
			continue
		}
		if budget.empty() {
			f.Folded = true
			continue
		}
		f.Lines, f.Folded = diffText(old, nw, budget)
	}
	return v, page, nil
}

// isText: within MaxDiffBytes, valid UTF-8 and no NUL byte.
func isText(b []byte) bool {
	if len(b) > MaxDiffBytes {
		return false
	}
	for _, c := range b {
		if c == 0 {
			return false
		}
	}
	return utf8.Valid(b)
}

func (s *Service) owned(ctx context.Context, owner, projectID uuid.UUID) error {
	_, err := s.q.GetProjectByOwner(ctx, db.GetProjectByOwnerParams{ID: projectID, OwnerID: owner})
	if db.IsNotFound(err) {
		return apperr.NotFound("Project")
	}
	return err
}

// ChangedPaths returns what version n changed against its parent, path by path (no contents):
// what a problem of that version tells the builder's AI it touched.
func (s *Service) ChangedPaths(ctx context.Context, owner, projectID uuid.UUID, n int32) (Changes, error) {
	v, now, err := s.Get(ctx, owner, projectID, n)
	if err != nil {
		return Changes{}, err
	}
	var before []Entry
	if v.ParentNumber != nil {
		parent, err := s.q.GetVersionByNumber(ctx, db.GetVersionByNumberParams{ProjectID: projectID, Number: *v.ParentNumber})
		if err == nil {
			if before, err = entries(ctx, s.q, parent); err != nil {
				return Changes{}, err
			}
		} else if !db.IsNotFound(err) { // a pruned parent: every file reads as added
			return Changes{}, err
		}
	}
	return Diff(before, now), nil
}
