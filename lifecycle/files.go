package lifecycle

import (
	"context"
	"sort"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/e2b"
	"sandman/versions"
)

// wanted is a version as a sandbox should hold it: the one answer to "the files this sandbox
// should have", which every build, check, heal, look and apply reads.
type wanted struct {
	version db.Version
	files   []versions.Entry // sorted by path
}

// versionFiles is the version with that id (a build's, or the one a sandbox runs).
func (s *Service) versionFiles(ctx context.Context, id uuid.UUID) (wanted, error) {
	v, err := s.q.GetVersion(ctx, id)
	if err != nil {
		return wanted{}, err
	}
	return s.manifestOf(ctx, v)
}

// currentFiles is the project's current (newest) version: what a sandbox converges to.
func (s *Service) currentFiles(ctx context.Context, projectID uuid.UUID) (wanted, error) {
	v, err := s.q.GetCurrentVersion(ctx, projectID)
	if err != nil {
		return wanted{}, err
	}
	return s.manifestOf(ctx, v)
}

func (s *Service) manifestOf(ctx context.Context, v db.Version) (wanted, error) {
	rows, err := s.q.ListVersionFiles(ctx, db.ListVersionFilesParams{ProjectID: v.ProjectID, Number: v.Number})
	if err != nil {
		return wanted{}, err
	}
	w := wanted{version: v, files: make([]versions.Entry, len(rows))}
	for i, r := range rows {
		w.files[i] = versions.Entry{Path: r.Path, Size: r.Size, SHA256: r.Sha256, Executable: r.Executable}
	}
	return w, nil
}

func (w wanted) paths() []string {
	out := make([]string, len(w.files))
	for i, f := range w.files {
		out[i] = f.Path
	}
	return out
}

// entry is the version's file at p (the zero Entry when it has none).
func (w wanted) entry(p string) versions.Entry {
	i := sort.Search(len(w.files), func(i int) bool { return w.files[i].Path >= p })
	if i < len(w.files) && w.files[i].Path == p {
		return w.files[i]
	}
	return versions.Entry{}
}

// executables are the version's files with the executable bit among paths (all when nil).
func (w wanted) executables(paths []string) []string {
	var out []string
	for _, f := range w.files {
		if f.Executable && (paths == nil || containsSorted(paths, f.Path)) {
			out = append(out, f.Path)
		}
	}
	return out
}

func containsSorted(sorted []string, p string) bool {
	i := sort.SearchStrings(sorted, p)
	return i < len(sorted) && sorted[i] == p
}

// contents are the version's files at paths (every file when paths is nil), read from the
// founder's stored content, to upload into the app directory. A file whose content is missing
// fails the whole read (versions.Contents): a deploy or a repair never goes on without it.
func (s *Service) contents(ctx context.Context, owner uuid.UUID, w wanted, paths []string) ([]e2b.File, error) {
	rows, err := versions.Contents(ctx, s.q, owner, w.version, paths)
	if err != nil {
		return nil, err
	}
	out := make([]e2b.File, len(rows))
	for i, r := range rows {
		out[i] = e2b.File{Path: appDir + "/" + r.Path, Content: r.Content}
	}
	return out, nil
}
