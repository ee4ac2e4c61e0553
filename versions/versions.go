// Package versions owns the versions of a project's files (docs/architecture.md, "Versions"):
// content stored once per founder by its SHA-256, numbered manifests over it (each version
// stores only the files it changed), restoring as a new version, the diff between two
// manifests, the file-set rules and retention. Putting a
// version into a sandbox is the lifecycle's (lifecycle/deploy.go).
package versions

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/apperr"
	"sandman/db"
)

// Source is where a version came from: the database's enum, so no other value can be stored.
type Source = db.VersionSource

// Sources of a version, as stored.
const (
	SourceCreated = db.VersionSourceCreated // the project's first files: a starter or the new-project upload
	SourceUpload  = db.VersionSourceUpload  // the build page's "Upload a new version"
	SourceAPI     = db.VersionSourceAPI     // POST /api/projects/{id}/versions
	SourceRestore = db.VersionSourceRestore // restored from another version (RestoredFrom)
)

// MaxVersions is how many versions a project keeps; beyond it the oldest are pruned, except
// one a build or a sandbox uses.
const MaxVersions = 1000

// MaxMessage is the longest message a version may carry, in characters.
const MaxMessage = 500

// Entry is one file of a manifest.
type Entry struct {
	Path       string
	Size       int64
	SHA256     []byte
	Executable bool
}

// Hook runs in the transaction that makes a version, after it is stored: the lifecycle queues
// its apply to the project's preview there, so the version and its apply commit together.
type Hook func(ctx context.Context, tx db.Tx, owner uuid.UUID, v db.Version) error

// Service makes and reads versions. Every call takes the owner: another founder's project is
// not found.
type Service struct {
	pool   *pgxpool.Pool
	q      *db.Queries
	onMade Hook
	quota  int64
}

// New returns a Service with the default storage quota; onMade may be nil.
func New(pool *pgxpool.Pool, onMade Hook) *Service {
	return &Service{pool: pool, q: db.New(pool), onMade: onMade, quota: DefaultQuota}
}

// WithQuota sets the bytes of unique content one founder may store (SANDMAN_STORAGE_QUOTA);
// zero keeps DefaultQuota.
func (s *Service) WithQuota(bytes int64) *Service {
	if bytes > 0 {
		s.quota = bytes
	}
	return s
}

// Change is what a new version is made of.
type Change struct {
	// Base is the version the writer started from; 0 means the current one. Any other number
	// than the current one is a conflict (ConflictError): the writer re-bases.
	Base int32
	// Files are written over the base's files, or are the whole set when Replace.
	Files   []File
	Replace bool
	// Delete removes paths of the base.
	Delete  []string
	Message string
	Source  Source
	// ReadErrs are problems found while reading the files (a zip's links, say), reported with
	// the rules' own.
	ReadErrs []FileError
}

// Result is a version made, or the current one when nothing changed.
type Result struct {
	Version   db.Version
	Unchanged bool // the request changed nothing: Version is the current one, no number was used
	Replayed  bool // an Idempotency-Key's earlier answer
}

// ConflictError is a base that is not the current version. It unwraps to a 409
// (version_conflict) for pages; the JSON API adds the current version to its answer.
type ConflictError struct {
	Base    int32
	Current db.Version
}

func (e *ConflictError) Error() string { return e.apperr().Message }

func (e *ConflictError) apperr() *apperr.Error {
	return apperr.New(apperr.KindConflict, CodeVersionConflict, fmt.Sprintf(
		"Version %d is not the current version any more (version %d is): make your change on version %d and send it again.",
		e.Base, e.Current.Number, e.Current.Number))
}

// Unwrap makes the conflict an apperr.Error for the one place errors become responses.
func (e *ConflictError) Unwrap() error { return e.apperr() }

// Create makes a version of the owner's project from c, in one transaction under the project's
// lock: all of it is stored, or nothing is.
func (s *Service) Create(ctx context.Context, owner, projectID uuid.UUID, c Change) (Result, error) {
	var res Result
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		var err error
		res, err = s.create(ctx, tx, owner, projectID, c)
		return err
	})
	return res, err
}

func (s *Service) create(ctx context.Context, tx db.Tx, owner, projectID uuid.UUID, c Change) (Result, error) {
	if err := checkChange(&c); err != nil {
		return Result{}, err
	}
	if _, err := lockProject(ctx, tx, owner, projectID); err != nil {
		return Result{}, err
	}
	stored, err := LockStorage(ctx, tx, owner)
	if err != nil {
		return Result{}, err
	}
	cur, err := tx.GetCurrentVersion(ctx, projectID)
	if err != nil {
		return Result{}, err
	}
	if c.Base != 0 && c.Base != cur.Number {
		return Result{}, &ConflictError{Base: c.Base, Current: cur}
	}
	base, err := entries(ctx, tx, cur)
	if err != nil {
		return Result{}, err
	}
	next, err := apply(base, c, cur.Number)
	if err != nil {
		return Result{}, err
	}
	d := Diff(base, next)
	if d.Empty() {
		return Result{Version: cur, Unchanged: true}, nil
	}
	if err := storeBlobs(ctx, tx, owner, c.Files); err != nil {
		return Result{}, err
	}
	if err := checkQuota(ctx, tx, owner, stored, s.quota, "version"); err != nil {
		return Result{}, err
	}
	v, err := s.insert(ctx, tx, owner, db.InsertVersionParams{ProjectID: projectID, ParentNumber: &cur.Number, Source: c.Source,
		Message: c.Message}, d, next)
	return Result{Version: v}, err
}

// CreateFirst makes a new project's version 1 in the caller's transaction (projects.Service),
// refused past the founder's storage quota. The files must have passed CheckFiles.
func CreateFirst(ctx context.Context, tx db.Tx, owner, projectID uuid.UUID, files []File, quota int64) (db.Version, error) {
	next := make([]Entry, len(files))
	for i, f := range files {
		next[i] = entryOf(f)
	}
	sortEntries(next)
	stored, err := LockStorage(ctx, tx, owner)
	if err != nil {
		return db.Version{}, err
	}
	if err := storeBlobs(ctx, tx, owner, files); err != nil {
		return db.Version{}, err
	}
	if err := checkQuota(ctx, tx, owner, stored, quota, "project"); err != nil {
		return db.Version{}, err
	}
	v, err := tx.InsertVersion(ctx, db.InsertVersionParams{ProjectID: projectID, Source: SourceCreated,
		Added: int32(len(next)), FileCount: int32(len(next)), TotalBytes: totalBytes(next)})
	if err != nil {
		return v, err
	}
	return v, storeFiles(ctx, tx, v, next, Diff(nil, next))
}

// Restore makes a new version whose files are version n's, or, with paths, the current files
// with those paths taken from version n (a path n does not have is removed). Restoring is
// itself undone by restoring again.
func (s *Service) Restore(ctx context.Context, owner, projectID uuid.UUID, n int32, paths []string) (Result, error) {
	if len(paths) > MaxFiles {
		// As for a delete list: no version holds more files, and checking every path of a
		// longer list would cost the server what the sender chose.
		return Result{}, apperr.Invalid(map[string]string{"paths": fmt.Sprintf(
			"A version holds at most %d files, so a restore lists at most %d paths; this one lists %d.", MaxFiles, MaxFiles, len(paths))})
	}
	for _, p := range paths {
		if err := CheckPath(p); err != nil {
			return Result{}, apperr.Invalid(map[string]string{"paths": fmt.Sprintf("%q: %s.", p, err)})
		}
	}
	var res Result
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		if _, err := lockProject(ctx, tx, owner, projectID); err != nil {
			return err
		}
		// A restore stores no new content (the quota has nothing to refuse), but retention may
		// collect some: the founder's storage is locked in the one order, project then storage.
		if _, err := LockStorage(ctx, tx, owner); err != nil {
			return err
		}
		from, err := getVersion(ctx, tx, projectID, n)
		if err != nil {
			return err
		}
		cur, err := tx.GetCurrentVersion(ctx, projectID)
		if err != nil {
			return err
		}
		old, err := entries(ctx, tx, from)
		if err != nil {
			return err
		}
		base, err := entries(ctx, tx, cur)
		if err != nil {
			return err
		}
		next := old // the whole version
		if len(paths) > 0 {
			if next, err = restorePaths(base, old, paths, n); err != nil {
				return err
			}
			if err := checkSet(next); err != nil {
				return err
			}
		}
		d := Diff(base, next)
		if d.Empty() {
			res = Result{Version: cur, Unchanged: true}
			return nil
		}
		v, err := s.insert(ctx, tx, owner, db.InsertVersionParams{ProjectID: projectID, ParentNumber: &cur.Number, Source: SourceRestore,
			RestoredFrom: &n}, d, next)
		res = Result{Version: v}
		return err
	})
	return res, err
}

// restorePaths is base with paths taken from old: copied when old has them, removed when not.
func restorePaths(base, old []Entry, paths []string, n int32) ([]Entry, error) {
	byPath := make(map[string]Entry, len(base))
	for _, e := range base {
		byPath[e.Path] = e
	}
	inOld := make(map[string]Entry, len(old))
	for _, e := range old {
		inOld[e.Path] = e
	}
	for _, p := range paths {
		e, ok := inOld[p]
		_, now := byPath[p]
		switch {
		case ok:
			byPath[p] = e
		case now:
			delete(byPath, p)
		default:
			return nil, apperr.Invalid(map[string]string{"file:" + p: fmt.Sprintf("Neither version %d nor the current version has this file.", n)})
		}
	}
	return sortedEntries(byPath), nil
}

// insert stores the version with its counts, prunes what retention lets go and runs the hook.
func (s *Service) insert(ctx context.Context, tx db.Tx, owner uuid.UUID, p db.InsertVersionParams, d Changes, next []Entry) (db.Version, error) {
	p.Added, p.Changed, p.Removed = int32(len(d.Added)), int32(len(d.Changed)), int32(len(d.Removed))
	p.FileCount, p.TotalBytes = int32(len(next)), totalBytes(next)
	v, err := tx.InsertVersion(ctx, p)
	if err != nil {
		return v, err
	}
	if err := storeFiles(ctx, tx, v, next, d); err != nil {
		return v, err
	}
	if err := prune(ctx, tx, owner, p.ProjectID); err != nil {
		return v, err
	}
	if s.onMade != nil {
		err = s.onMade(ctx, tx, owner, v)
	}
	return v, err
}

// prune keeps a project's versions within MaxVersions (oldest first, never one in use) and
// deletes the files' rows and the content nothing uses any more.
func prune(ctx context.Context, tx db.Tx, owner, projectID uuid.UUID) error {
	n, err := tx.CountVersions(ctx, projectID)
	if err != nil || n <= MaxVersions {
		return err
	}
	if _, err := tx.PruneVersions(ctx, db.PruneVersionsParams{ProjectID: projectID, Excess: n - MaxVersions}); err != nil {
		return err
	}
	gone, err := tx.PruneVersionFiles(ctx, projectID)
	if err != nil || len(gone) == 0 {
		return err
	}
	if err := lockContent(ctx, tx, owner); err != nil {
		return err
	}
	return tx.DeleteUnusedBlobs(ctx, db.DeleteUnusedBlobsParams{OwnerID: owner, Sha256s: gone})
}

// DefaultQuota is the bytes of unique content a founder may store when the operator sets none:
// 1 GiB (README, "Limits").
const DefaultQuota int64 = 1 << 30

// LockStorage takes the founder's storage lock and returns the bytes they store now. Every
// transaction that stores or collects a founder's content takes it, after the project's lock
// and before anything else of theirs, so the quota's check (checkQuota) sees every other
// writer's content that committed: two versions that each fit but together do not are
// checked one after the other, never both against the sum from before either.
func LockStorage(ctx context.Context, tx db.Tx, owner uuid.UUID) (int64, error) {
	return tx.LockFounderStorage(ctx, owner)
}

// Usage is what a founder stores and may store, in bytes of unique content.
type Usage struct{ Stored, Quota int64 }

// Usage is the founder's storage, for the pages that show it.
func (s *Service) Usage(ctx context.Context, owner uuid.UUID) (Usage, error) {
	n, err := s.q.GetFounderStorage(ctx, owner)
	return Usage{Stored: n, Quota: s.quota}, err
}

// checkQuota refuses the transaction's new content (what, a version or a project) when it takes
// the founder's storage, stored before it under LockStorage, past quota. Content the founder
// already had costs nothing; a change that adds none passes, even over a lowered quota.
func checkQuota(ctx context.Context, tx db.Tx, owner uuid.UUID, stored, quota int64, what string) error {
	after, err := tx.GetFounderStorage(ctx, owner)
	if err != nil || after <= stored || after <= quota {
		return err
	}
	way := "send fewer or smaller new files, or restore an earlier version (a restore stores nothing new)"
	if what == "project" {
		way = "make a new version of a project you have instead, or use fewer or smaller files"
	}
	return apperr.New(apperr.KindTooLarge, CodeStorageQuota, fmt.Sprintf(
		"This %s would take your stored files to %s of your %s: nothing was stored. To fit, %s.",
		what, QuotaSize(after), QuotaSize(quota), way))
}

// QuotaSize writes a storage figure as people read it: 1 GiB, 312.4 MiB, 20 KiB.
func QuotaSize(n int64) string {
	unit, name := int64(1), "bytes"
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size {
			unit, name = u.size, u.name
			break
		}
	}
	if unit == 1 {
		return fmt.Sprintf("%d bytes", n)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/float64(unit)), ".0") + " " + name
}

// lockContent holds the founder's content lock until the transaction ends: storing content
// and collecting it take it, so a collection never deletes content that a transaction still
// open found already stored and points at (docs/architecture.md, "Versions"). A project's lock
// is always taken before it, never after.
func lockContent(ctx context.Context, tx db.Tx, owner uuid.UUID) error {
	return tx.LockFounderContent(ctx, owner.String())
}

// reader is what both a db.Tx and the pool's queries answer.
type reader interface {
	ListVersionFiles(ctx context.Context, arg db.ListVersionFilesParams) ([]db.ListVersionFilesRow, error)
	GetVersionByNumber(ctx context.Context, arg db.GetVersionByNumberParams) (db.Version, error)
}

func lockProject(ctx context.Context, tx db.Tx, owner, projectID uuid.UUID) (db.Project, error) {
	p, err := tx.LockProjectByOwner(ctx, db.LockProjectByOwnerParams{ID: projectID, OwnerID: owner})
	if db.IsNotFound(err) {
		return p, apperr.NotFound("Project")
	}
	return p, err
}

func getVersion(ctx context.Context, q reader, projectID uuid.UUID, n int32) (db.Version, error) {
	v, err := q.GetVersionByNumber(ctx, db.GetVersionByNumberParams{ProjectID: projectID, Number: n})
	if db.IsNotFound(err) {
		return v, apperr.NotFound(fmt.Sprintf("Version %d", n))
	}
	return v, err
}

// entries is version v's manifest.
func entries(ctx context.Context, q reader, v db.Version) ([]Entry, error) {
	rows, err := q.ListVersionFiles(ctx, db.ListVersionFilesParams{ProjectID: v.ProjectID, Number: v.Number})
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(rows))
	for i, r := range rows {
		out[i] = Entry{Path: r.Path, Size: r.Size, SHA256: r.Sha256, Executable: r.Executable}
	}
	return out, nil
}

// checkChange applies the rules that need no stored data: the message, the files' own rules,
// the paths to delete.
func checkChange(c *Change) error {
	errs := map[string]string{}
	if c.Message = strings.TrimSpace(c.Message); utf8.RuneCountInString(c.Message) > MaxMessage || !utf8.ValidString(c.Message) {
		errs["message"] = fmt.Sprintf("Keep the message to %d characters of valid UTF-8.", MaxMessage)
	}
	fileErrs := append(slices.Clone(c.ReadErrs), CheckFiles(c.Files)...)
	if !c.Replace && len(c.Files) == 0 && len(fileErrs) == 1 && fileErrs[0].Path == "" && len(c.Delete) > 0 {
		fileErrs = nil // deleting alone is a change: no file needs to be sent
	}
	writing := make(map[string]bool, len(c.Files))
	for _, f := range c.Files {
		writing[f.Path] = true
	}
	if len(c.Delete) > MaxFiles {
		// No version holds more files than this: a longer list cannot all be deleted, and
		// checking every path of it would cost the server what the sender chose.
		errs["delete"] = fmt.Sprintf("A version holds at most %d files, so delete lists at most %d paths; this one lists %d.",
			MaxFiles, MaxFiles, len(c.Delete))
		return invalid(errs, nil)
	}
	deleting := make(map[string]bool, len(c.Delete))
	for _, p := range c.Delete {
		switch err := CheckPath(p); {
		case err != nil:
			fileErrs = append(fileErrs, FileError{Path: p, Message: "Cannot delete it: " + err.Error() + "."})
		case deleting[p]:
			fileErrs = append(fileErrs, FileError{Path: p, Message: "This path is listed twice in delete."})
		case writing[p]:
			fileErrs = append(fileErrs, FileError{Path: p, Message: "This path is both written and deleted."})
		}
		deleting[p] = true
	}
	if c.Replace && len(c.Delete) > 0 {
		errs["delete"] = "A replacing version is the whole set of files: leave out delete."
	}
	return invalid(errs, fileErrs)
}

// MaxFileErrors is the most files one refusal names: past it, the answer counts the rest, so
// its size never grows with what was sent.
const MaxFileErrors = 20

// invalid is the one error of a refused change: a field per rule broken, "file:PATH" per file
// (the first MaxFileErrors of them; "files" counts the rest).
func invalid(errs map[string]string, fileErrs []FileError) error {
	if len(fileErrs) > 0 {
		named, listed := 0, 0
		for _, fe := range fileErrs {
			key := "file:" + fe.Path
			if prev, ok := errs[key]; ok {
				errs[key] = prev + " " + fe.Message
			} else if named < MaxFileErrors {
				errs[key] = fe.Message
				named++
			} else {
				continue
			}
			listed++
		}
		errs["files"] = fmt.Sprintf("%d problem(s) with the files; nothing was stored.", len(fileErrs))
		if more := len(fileErrs) - listed; more > 0 {
			errs["files"] = fmt.Sprintf("%d problems with the files: the first %d are listed, and %d more; nothing was stored.",
				len(fileErrs), listed, more)
		}
	}
	if len(errs) > 0 {
		return apperr.Invalid(errs)
	}
	return nil
}

// InvalidFiles is the error of a file set that breaks the rules (nil when fileErrs is empty),
// with errs' own fields: the new-project upload reports its settings with it.
func InvalidFiles(errs map[string]string, fileErrs []FileError) error { return invalid(errs, fileErrs) }

// apply is the base with the change written over it (or the change alone, when it replaces),
// checked as a whole.
func apply(base []Entry, c Change, baseNumber int32) ([]Entry, error) {
	byPath := make(map[string]Entry, len(base)+len(c.Files))
	if !c.Replace {
		for _, e := range base {
			byPath[e.Path] = e
		}
	}
	var fileErrs []FileError
	for _, p := range c.Delete {
		if _, ok := byPath[p]; !ok {
			fileErrs = append(fileErrs, FileError{Path: p, Message: fmt.Sprintf("Version %d has no such file to delete.", baseNumber)})
		}
		delete(byPath, p)
	}
	for _, f := range c.Files {
		byPath[f.Path] = entryOf(f)
	}
	if err := invalid(map[string]string{}, fileErrs); err != nil {
		return nil, err
	}
	next := sortedEntries(byPath)
	return next, checkSet(next)
}

// checkSet applies the rules of a whole set: at least one file, the limits, no path both a
// file and a folder.
func checkSet(set []Entry) error {
	var fileErrs []FileError
	if len(set) == 0 {
		fileErrs = append(fileErrs, FileError{Message: "A version holds at least one file."})
	}
	if len(set) > MaxFiles {
		fileErrs = append(fileErrs, FileError{Message: fmt.Sprintf("A version holds at most %d files; this one would have %d.", MaxFiles, len(set))})
	}
	if total := totalBytes(set); total > MaxTotalBytes {
		fileErrs = append(fileErrs, FileError{Message: fmt.Sprintf("The version would be %s; the limit is %s in all.", size(total), size(MaxTotalBytes))})
	}
	seen := make(map[string]bool, len(set))
	for _, e := range set {
		seen[e.Path] = true
	}
	for _, e := range set {
		for dir := path.Dir(e.Path); dir != "."; dir = path.Dir(dir) {
			if seen[dir] {
				fileErrs = append(fileErrs, FileError{Path: dir, Message: "This would be both a file and a folder (" + e.Path + ")."})
			}
		}
	}
	return invalid(map[string]string{}, fileErrs)
}

func entryOf(f File) Entry {
	sum := sha256.Sum256(f.Content) // the one SHA-256 of a file: stored, compared, never computed again
	return Entry{Path: f.Path, Size: int64(len(f.Content)), SHA256: sum[:], Executable: f.Executable}
}

func sortedEntries(byPath map[string]Entry) []Entry {
	out := make([]Entry, 0, len(byPath))
	for _, e := range byPath {
		out = append(out, e)
	}
	sortEntries(out)
	return out
}

func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
}

func totalBytes(es []Entry) int64 {
	var n int64
	for _, e := range es {
		n += e.Size
	}
	return n
}

func storeBlobs(ctx context.Context, tx db.Tx, owner uuid.UUID, files []File) error {
	if len(files) == 0 {
		return nil
	}
	if err := lockContent(ctx, tx, owner); err != nil {
		return err
	}
	// Each content once: a version of many equal files sends it once.
	sums, contents := make([][]byte, 0, len(files)), make([][]byte, 0, len(files))
	seen := make(map[[32]byte]bool, len(files))
	for _, f := range files {
		sum := sha256.Sum256(f.Content)
		if !seen[sum] {
			seen[sum] = true
			sums, contents = append(sums, sum[:]), append(contents, f.Content)
		}
	}
	return tx.InsertBlobs(ctx, db.InsertBlobsParams{OwnerID: owner, Sha256s: sums, Contents: contents})
}

// storeFiles records version v's files as the changes d made to its parent's: the changed and
// removed files of the parent end at v, the added and changed ones of next start at it.
func storeFiles(ctx context.Context, tx db.Tx, v db.Version, next []Entry, d Changes) error {
	if gone := slices.Concat(d.Changed, d.Removed); len(gone) > 0 {
		if err := tx.CloseVersionFiles(ctx, db.CloseVersionFilesParams{ProjectID: v.ProjectID, Paths: gone, UntilNumber: &v.Number}); err != nil {
			return err
		}
	}
	written := slices.Concat(d.Added, d.Changed)
	slices.Sort(written)
	p := db.InsertVersionFilesParams{ProjectID: v.ProjectID, FromNumber: v.Number}
	for _, e := range next {
		if _, ok := slices.BinarySearch(written, e.Path); ok {
			p.Paths, p.Sizes = append(p.Paths, e.Path), append(p.Sizes, e.Size)
			p.Sha256s, p.Executables = append(p.Sha256s, e.SHA256), append(p.Executables, e.Executable)
		}
	}
	if len(p.Paths) == 0 {
		return nil
	}
	return tx.InsertVersionFiles(ctx, p)
}

// Changes is what differs between two manifests, each list sorted by path.
type Changes struct {
	Added, Changed, Removed []string
}

// Empty reports no difference at all.
func (c Changes) Empty() bool { return len(c.Added)+len(c.Changed)+len(c.Removed) == 0 }

// Count is the number of files that differ.
func (c Changes) Count() int { return len(c.Added) + len(c.Changed) + len(c.Removed) }

// Paths are every path that differs, sorted.
func (c Changes) Paths() []string {
	out := slices.Concat(c.Added, c.Changed, c.Removed)
	slices.Sort(out)
	return out
}

// Diff compares two manifests (each sorted by path): a file is changed when its content or its
// executable bit differs.
func Diff(from, to []Entry) Changes {
	var c Changes
	i, j := 0, 0
	for i < len(from) || j < len(to) {
		switch {
		case j == len(to) || i < len(from) && from[i].Path < to[j].Path:
			c.Removed = append(c.Removed, from[i].Path)
			i++
		case i == len(from) || to[j].Path < from[i].Path:
			c.Added = append(c.Added, to[j].Path)
			j++
		default:
			if !bytes.Equal(from[i].SHA256, to[j].SHA256) || from[i].Executable != to[j].Executable {
				c.Changed = append(c.Changed, to[j].Path)
			}
			i++
			j++
		}
	}
	return c
}
