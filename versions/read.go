package versions

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
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
	rows, err := s.q.ListVersionContents(ctx, db.ListVersionContentsParams{OwnerID: owner, ProjectID: projectID, Number: v.Number, Paths: []string{path}})
	if err != nil || len(rows) != 1 {
		return Entry{}, nil, fmt.Errorf("versions: the content of %q in version %d: %w (%d rows)", path, v.Number, err, len(rows))
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
	rows, err := s.q.ListVersionContents(ctx, db.ListVersionContentsParams{OwnerID: owner, ProjectID: projectID, Number: v.Number, Paths: []string{}})
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

// FileChange is one file a version changed against its parent, with both contents when the
// diff page can show them (text up to MaxDiffBytes).
type FileChange struct {
	Path     string
	Kind     string // added, changed, removed
	Text     bool   // both sides are text within MaxDiffBytes: Old and New hold them
	Old, New []byte
}

// MaxDiffBytes is the largest file the diff page shows line by line.
const MaxDiffBytes = 256 << 10

// VersionChanges returns version n's changes against its parent, file by file.
func (s *Service) VersionChanges(ctx context.Context, owner, projectID uuid.UUID, n int32) (db.Version, []FileChange, error) {
	v, now, err := s.Get(ctx, owner, projectID, n)
	if err != nil {
		return v, nil, err
	}
	var before []Entry
	var parent db.Version
	if v.ParentNumber != nil {
		if parent, err = s.q.GetVersionByNumber(ctx, db.GetVersionByNumberParams{ProjectID: projectID, Number: *v.ParentNumber}); err == nil {
			if before, err = entries(ctx, s.q, parent); err != nil {
				return v, nil, err
			}
		} else if !db.IsNotFound(err) { // a pruned parent: every file reads as added
			return v, nil, err
		}
	}
	d := Diff(before, now)
	content := func(number int32, paths []string) (map[string][]byte, error) {
		out := map[string][]byte{}
		if number == 0 || len(paths) == 0 {
			return out, nil
		}
		rows, err := s.q.ListVersionContents(ctx, db.ListVersionContentsParams{OwnerID: owner, ProjectID: projectID, Number: number, Paths: paths})
		for _, r := range rows {
			out[r.Path] = r.Content
		}
		return out, err
	}
	olds, err := content(parent.Number, slices.Concat(d.Changed, d.Removed))
	if err != nil {
		return v, nil, err
	}
	news, err := content(v.Number, slices.Concat(d.Added, d.Changed))
	if err != nil {
		return v, nil, err
	}
	var out []FileChange
	add := func(kind string, paths []string) {
		for _, p := range paths {
			fc := FileChange{Path: p, Kind: kind, Old: olds[p], New: news[p]}
			fc.Text = isText(fc.Old) && isText(fc.New)
			if !fc.Text {
				fc.Old, fc.New = nil, nil
			}
			out = append(out, fc)
		}
	}
	add("added", d.Added)
	add("changed", d.Changed)
	add("removed", d.Removed)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return v, out, nil
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
