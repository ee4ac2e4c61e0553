package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"sandman/db"
	"sandman/e2b"
	"sandman/sandbox"
	"sandman/versions"
)

// The integrity check (docs/states.md, "Integrity"): after every build's upload and every resume,
// before the move to running, the app directory is compared with the version the sandbox should
// hold (path, size, SHA-256) in one envd command; files that are missing or different are
// uploaded again from storage, and the resume restarts the dev server and waits for it. A resume
// compares with the project's current version, so waking applies a version made while it slept
// (converge, lifecycle/deploy.go). Files the app wrote itself are not judged: those it added are
// never asked about, and stored files it changed or removed are noted at Sandman's looks (when
// the build is ready, before each pause Sandman asks for) and left to it from then on, unless a
// new version changes them: a file a version changes is the version's.

// filesLost is a check whose heal could not work: the app directory is gone, the upload failed,
// the files still differ after it, or the dev server did not come back on the restored files.
// A resume that meets it fails at once with CauseFilesLost: no second attempt brings files back.
type filesLost struct{ why string }

func (e *filesLost) Error() string {
	return "the preview's files were lost and could not be restored: " + e.why
}

// errUnchecked wraps a failure of the check itself (the command could not run or its output
// could not be read), which says nothing about the files.
var errUnchecked = errors.New("the integrity check could not be made")

// fileVerdict is what one check found: the files to upload (again), and the stored files
// the app has changed or removed by now (which the next check leaves alone).
type fileVerdict struct {
	damaged    []string
	appChanged []string
}

// judgement is which of a version's files a check holds against the sandbox.
type judgement int

const (
	// judgeSlept judges every file but those the app changed (a resume: the provider may have
	// lost any of them while it slept).
	judgeSlept judgement = iota
	// judgeAll judges every file: right after an upload, when nothing but the provider wrote them.
	judgeAll
	// judgeVersion judges only the files the version changes: a running sandbox lost nothing,
	// and the app may have changed any other file since Sandman's last look.
	judgeVersion
)

// judge compares what the sandbox holds (found, in the order of want) with the version's
// files. ours are the files the new version changes: they are always the version's. Another
// file is judged as j says; under judgeSlept, appChanged lists the ones a look saw changed, and
// when Sandman never looked (looked false: a sandbox from before the check), a file that is there
// but different counts as the app's, and only a missing one as damage.
func judge(want []versions.Entry, found []e2b.FileDigest, ours map[string]bool, appChanged []string, looked bool, j judgement) fileVerdict {
	apps := make(map[string]bool, len(appChanged))
	for _, p := range appChanged {
		apps[p] = true
	}
	var v fileVerdict
	for i, w := range want {
		got := found[i]
		if got.Regular && got.Size == w.Size && bytes.Equal(got.SHA256[:], w.SHA256) {
			continue
		}
		switch {
		case ours[w.Path] || j == judgeAll:
			v.damaged = append(v.damaged, w.Path)
		case j == judgeVersion:
		case apps[w.Path] || !looked && got.Regular:
			v.appChanged = append(v.appChanged, w.Path)
		default:
			v.damaged = append(v.damaged, w.Path)
		}
	}
	return v
}

// convergence is what one converge did.
type convergence struct {
	to wanted
	// changes are what the version changed since the files the sandbox had.
	changes versions.Changes
	// written are the files uploaded: the version's changes that were not there yet, and the
	// ones restored; restored are those of them that were not the version's changes (the
	// provider lost or damaged them).
	written, restored []string
	// appChanged are the version's files the app has changed by now (the next check leaves them).
	appChanged []string
}

// dependencies reports a version that changed what the install command reads.
func (c convergence) dependencies() bool {
	for _, p := range c.changes.Paths() {
		switch path.Base(p) {
		case "package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb", "bun.lock":
			return true
		}
	}
	return false
}

// touched reports a convergence that wrote or removed anything.
func (c convergence) touched() bool { return len(c.written)+len(c.changes.Removed) > 0 }

// converge makes the sandbox's app directory hold to's files, coming from from (the version
// its files were): one digest of to's files, one upload of what differs (judged as j says), one
// command that removes what to no longer has and marks its executables, and one digest that
// proves the upload. The app's own changes to files the version does not touch stay as they
// are. On *filesLost, or any error after the upload went through, the answer's written holds
// what was uploaded.
func (s *Service) converge(ctx context.Context, h sandboxHandle, sb db.Sandbox, from, to wanted, j judgement) (convergence, error) {
	c := convergence{to: to, changes: versions.Diff(from.files, to.files)}
	ours := make(map[string]bool, c.changes.Count())
	for _, p := range c.changes.Paths() {
		ours[p] = true
	}
	d, err := s.providerDigest(ctx, h, to.paths())
	switch {
	case isNotFound(err):
		return c, err
	case err != nil:
		return c, fmt.Errorf("%w: %w", errUnchecked, err)
	case !d.DirExists:
		return c, &filesLost{why: "the app directory " + appDir + " is gone"}
	}
	// A file the version changes is the version's, whatever the app did to it.
	apps := slices.DeleteFunc(slices.Clone(sb.AppChangedFiles), func(p string) bool { return ours[p] })
	v := judge(to.files, d.Files, ours, apps, sb.FilesSeenAt != nil, j)
	c.appChanged = v.appChanged
	if j == judgeVersion {
		c.appChanged = apps
	}
	for _, p := range v.damaged {
		if !ours[p] {
			c.restored = append(c.restored, p)
		}
	}
	slices.Sort(v.damaged)
	executable := to.executables(v.damaged)
	if len(c.changes.Removed) > 0 {
		// Removed first: a folder the version removed may be a file's name now.
		if err := s.providerRemove(ctx, h, c.changes.Removed, nil); err != nil {
			return c, wrapProvider(err, "removing the files the version removed failed")
		}
	}
	if len(v.damaged) == 0 {
		return c, nil
	}
	files, err := s.contents(ctx, sb.OwnerID, to, v.damaged)
	if err != nil {
		return c, err
	}
	if err := s.providerUpload(ctx, h, files); err != nil {
		return c, wrapProvider(err, "uploading them failed")
	}
	c.written = v.damaged
	if len(executable) > 0 {
		if err := s.providerRemove(ctx, h, nil, executable); err != nil {
			return c, wrapProvider(err, "marking the executables failed")
		}
	}
	return c, s.proveWritten(ctx, h, to, v.damaged)
}

// wrapProvider is a provider's failure to write the files: not found stays itself (the sandbox
// is gone), anything else means the files cannot be made whole.
func wrapProvider(err error, what string) error {
	if isNotFound(err) {
		return err
	}
	return &filesLost{why: what + ": " + err.Error()}
}

// proveWritten digests the files just uploaded: every one must now be the version's.
func (s *Service) proveWritten(ctx context.Context, h sandboxHandle, to wanted, paths []string) error {
	want := make([]versions.Entry, len(paths)) // in the order asked, as the digest answers
	for i, p := range paths {
		want[i] = to.entry(p)
	}
	d, err := s.providerDigest(ctx, h, paths)
	if err != nil {
		return fmt.Errorf("check the written files: %w", err)
	}
	if !d.DirExists {
		return &filesLost{why: "the app directory " + appDir + " is gone"}
	}
	if still := judge(want, d.Files, nil, nil, true, judgeAll).damaged; len(still) > 0 {
		return &filesLost{why: "still different after uploading them again: " + strings.Join(still, ", ")}
	}
	return nil
}

// ensureIntact is the check and heal of a resume, against the project's current version: it
// returns what it wrote (nothing when the sandbox was whole and its version current), records
// what it saw as Sandman's latest look, and fails with *filesLost when the files cannot be made
// whole. A check that cannot be made at all is errUnchecked, which the resume does not hold
// against the sandbox. On another error the files it returns were written all the same, so the
// dev server must still be restarted on them.
func (s *Service) ensureIntact(ctx context.Context, h sandboxHandle, sb db.Sandbox) (convergence, error) {
	from, err := s.versionFiles(ctx, sb.DeployedVersionID)
	if err != nil {
		return convergence{}, err
	}
	to, err := s.currentFiles(ctx, sb.ProjectID)
	if err != nil {
		return convergence{}, err
	}
	c, err := s.converge(ctx, h, sb, from, to, judgeSlept)
	if len(c.restored) > 0 {
		s.log.Warn("the provider lost files of a paused sandbox: restoring them", "sandbox_id", sb.ID,
			"provider_id", deref(sb.ProviderID), "files", c.restored)
	}
	if err != nil {
		return c, err
	}
	if err := s.q.SetSandboxFilesSeen(ctx, db.SetSandboxFilesSeenParams{ID: sb.ID, AppChangedFiles: nonNilStrings(c.appChanged)}); err != nil {
		return c, err
	}
	return c, nil
}

// healUpload is the check of a build, right after its upload: every file of its version must
// have arrived whole (judged all: nothing else has written them). Files that did not are
// uploaded again once; a build whose upload still does not land fails like any other step, and
// River tries it again. A check that cannot be made is logged and the build goes on, as a resume
// does.
func (s *Service) healUpload(ctx context.Context, h sandboxHandle, sb db.Sandbox, w wanted) ([]string, error) {
	c, err := s.converge(ctx, h, sb, w, w, judgeAll)
	if errors.Is(err, errUnchecked) {
		s.log.Error("build: the integrity check could not be made, building unchecked", "sandbox_id", sb.ID, "err", err)
		return nil, nil
	}
	if len(c.restored) > 0 {
		s.log.Warn("uploaded files did not all arrive: uploading them again", "sandbox_id", sb.ID, "files", c.restored)
	}
	return c.restored, err
}

// lookAtFiles records which of its version's files the app itself has changed or removed by
// now, so that the next check leaves them alone: once a build is ready (its install and start
// commands have run), and before each pause Sandman asks for. A look that cannot be made is
// logged and leaves the last one in force.
func (s *Service) lookAtFiles(ctx context.Context, h sandboxHandle, sb db.Sandbox) {
	lctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	w, err := s.versionFiles(lctx, sb.DeployedVersionID)
	var d e2b.DirDigest
	if err == nil {
		d, err = s.providerDigest(lctx, h, w.paths())
	}
	if err == nil && !d.DirExists {
		err = errors.New("the app directory is gone")
	}
	if err == nil {
		// Everything that differs from the version now is the app's doing.
		differ := judge(w.files, d.Files, nil, nil, true, judgeAll).damaged
		err = s.q.SetSandboxFilesSeen(lctx, db.SetSandboxFilesSeenParams{ID: sb.ID, AppChangedFiles: nonNilStrings(differ)})
	}
	if err != nil {
		s.log.Warn("look at the app's files", "sandbox_id", sb.ID, "err", err)
	}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// recordRestored adds "Restored N files the provider lost" to the sandbox's history, naming
// them, in the caller's transaction (before the move to running it precedes).
func recordRestored(ctx context.Context, tx db.Tx, sb db.Sandbox, source sandbox.Source, files []string) error {
	return record(ctx, tx, db.InsertSandboxEventParams{SandboxID: sb.ID, FromStatus: sb.Status, ToStatus: sb.Status,
		Source: source, Reason: reasonRestored, Files: files}, sb.OwnerID)
}
