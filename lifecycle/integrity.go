package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/e2b"
)

// The integrity check (docs/states.md, "Integrity"): after every build's upload and every resume,
// before the move to running, the app directory is compared with the build's stored files
// (path, size, SHA-256) in one envd command; stored files that are missing or different are
// uploaded again from storage, and the resume restarts the dev server and waits for it. Files
// the app wrote itself are not judged: those it added are never asked about, and stored files
// it changed or removed are noted at Sandman's looks (when the build is ready, before each pause
// Sandman asks for) and left to it from then on.

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

// fileVerdict is what one check found: the stored files to upload again, and the stored files
// the app has changed or removed by now (which the next check leaves alone).
type fileVerdict struct {
	damaged    []string
	appChanged []string
}

// judge compares what the sandbox holds (found, in the order of stored) with the stored files.
// A stored file is judged unless the app changed it: appChanged lists the ones a look saw
// changed; when Sandman never looked (looked false: a sandbox from before the check), a file
// that is there but different counts as the app's, and only a missing one as damage. judgeAll
// judges every stored file: right after an upload, when nothing but the provider wrote them.
func judge(stored []db.ListBuildFileDigestsRow, found []e2b.FileDigest, appChanged []string, looked, judgeAll bool) fileVerdict {
	apps := make(map[string]bool, len(appChanged))
	for _, p := range appChanged {
		apps[p] = true
	}
	var v fileVerdict
	for i, want := range stored {
		got := found[i]
		same := got.Regular && got.Size == want.Size && bytes.Equal(got.SHA256[:], want.Sha256)
		if same {
			continue
		}
		if !judgeAll && (apps[want.Path] || !looked && got.Regular) {
			v.appChanged = append(v.appChanged, want.Path)
		} else {
			v.damaged = append(v.damaged, want.Path)
		}
	}
	return v
}

// digestStored reads the build's stored files and digests them in the sandbox, in one command.
func (s *Service) digestStored(ctx context.Context, h sandboxHandle, buildID uuid.UUID) ([]db.ListBuildFileDigestsRow, e2b.DirDigest, error) {
	stored, err := s.q.ListBuildFileDigests(ctx, buildID)
	if err != nil {
		return nil, e2b.DirDigest{}, err
	}
	paths := make([]string, len(stored))
	for i, f := range stored {
		paths[i] = f.Path
	}
	d, err := s.providerDigest(ctx, h, paths)
	return stored, d, err
}

// checkFiles digests the build's stored files in the sandbox and judges them (see judge).
func (s *Service) checkFiles(ctx context.Context, h sandboxHandle, sb db.Sandbox, judgeAll bool) (fileVerdict, []db.ListBuildFileDigestsRow, error) {
	stored, d, err := s.digestStored(ctx, h, sb.BuildID)
	switch {
	case isNotFound(err):
		return fileVerdict{}, nil, err
	case err != nil:
		return fileVerdict{}, nil, fmt.Errorf("%w: %w", errUnchecked, err)
	case !d.DirExists:
		return fileVerdict{}, nil, &filesLost{why: "the app directory " + appDir + " is gone"}
	}
	return judge(stored, d.Files, sb.AppChangedFiles, sb.FilesSeenAt != nil, judgeAll), stored, nil
}

// heal uploads the damaged files again from storage and checks them once more: every one must
// now be the stored file. uploaded reports whether the upload went through (the files were
// written, whatever the check after it said).
func (s *Service) heal(ctx context.Context, h sandboxHandle, sb db.Sandbox, stored []db.ListBuildFileDigestsRow, damaged []string) (uploaded bool, err error) {
	rows, err := s.q.ListBuildFilesByPath(ctx, db.ListBuildFilesByPathParams{BuildID: sb.BuildID, Paths: damaged})
	if err != nil {
		return false, err
	}
	files := make([]db.ListBuildFilesRow, len(rows))
	for i, r := range rows {
		files[i] = db.ListBuildFilesRow(r)
	}
	if err := s.providerUpload(ctx, h, files); err != nil {
		if isNotFound(err) {
			return false, err
		}
		return false, &filesLost{why: "uploading them again failed: " + err.Error()}
	}
	byPath := make(map[string]db.ListBuildFileDigestsRow, len(stored))
	for _, f := range stored {
		byPath[f.Path] = f
	}
	want := make([]db.ListBuildFileDigestsRow, len(damaged)) // in the order asked, as the digest answers
	for i, p := range damaged {
		want[i] = byPath[p]
	}
	d, err := s.providerDigest(ctx, h, damaged)
	if err != nil {
		return true, fmt.Errorf("check the restored files: %w", err)
	}
	if !d.DirExists {
		return true, &filesLost{why: "the app directory " + appDir + " is gone"}
	}
	if still := judge(want, d.Files, nil, true, true).damaged; len(still) > 0 {
		return true, &filesLost{why: "still different after uploading them again: " + strings.Join(still, ", ")}
	}
	return true, nil
}

// ensureIntact is the check and heal of a resume: it returns the files it restored (nil when
// the sandbox was whole), records what it saw as Sandman's latest look, and fails with
// *filesLost when the files cannot be restored. A check that cannot be made at all is
// errUnchecked, which the resume does not hold against the sandbox. On another error the files
// it returns were uploaded again all the same (the check after the upload failed), so the dev
// server must still be restarted on them.
func (s *Service) ensureIntact(ctx context.Context, h sandboxHandle, sb db.Sandbox) ([]string, error) {
	v, stored, err := s.checkFiles(ctx, h, sb, false)
	if err != nil {
		return nil, err
	}
	if len(v.damaged) > 0 {
		slices.Sort(v.damaged)
		s.log.Warn("the provider lost files of a paused sandbox: restoring them", "sandbox_id", sb.ID,
			"provider_id", deref(sb.ProviderID), "files", v.damaged)
		if uploaded, err := s.heal(ctx, h, sb, stored, v.damaged); err != nil {
			if uploaded && !isFilesLost(err) {
				return v.damaged, err
			}
			return nil, err
		}
	}
	if err := s.q.SetSandboxFilesSeen(ctx, db.SetSandboxFilesSeenParams{ID: sb.ID, AppChangedFiles: nonNilStrings(v.appChanged)}); err != nil {
		return nil, err
	}
	return v.damaged, nil
}

// healUpload is the check of a build, right after its upload: every stored file must have
// arrived whole (judged all: nothing else has written them). Files that did not are uploaded
// again once; a build whose upload still does not land fails like any other step, and River
// tries it again. A check that cannot be made is logged and the build goes on, as a resume does.
func (s *Service) healUpload(ctx context.Context, h sandboxHandle, sb db.Sandbox) ([]string, error) {
	v, stored, err := s.checkFiles(ctx, h, sb, true)
	if errors.Is(err, errUnchecked) {
		s.log.Error("build: the integrity check could not be made, building unchecked", "sandbox_id", sb.ID, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(v.damaged) == 0 {
		return nil, nil
	}
	slices.Sort(v.damaged)
	s.log.Warn("uploaded files did not all arrive: uploading them again", "sandbox_id", sb.ID, "files", v.damaged)
	if _, err := s.heal(ctx, h, sb, stored, v.damaged); err != nil {
		return nil, err
	}
	return v.damaged, nil
}

// lookAtFiles records which stored files the app itself has changed or removed by now, so that
// the next check leaves them alone: once a build is ready (its install and start commands have
// run), and before each pause Sandman asks for. A look that cannot be made is logged and leaves
// the last one in force.
func (s *Service) lookAtFiles(ctx context.Context, h sandboxHandle, sb db.Sandbox) {
	lctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	stored, d, err := s.digestStored(lctx, h, sb.BuildID)
	if err == nil && !d.DirExists {
		err = errors.New("the app directory is gone")
	}
	if err == nil {
		// Everything that differs from the stored files now is the app's doing.
		differ := judge(stored, d.Files, nil, true, true).damaged
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
func recordRestored(ctx context.Context, tx db.Tx, sb db.Sandbox, source db.EventSource, files []string) error {
	return record(ctx, tx, db.InsertSandboxEventParams{SandboxID: sb.ID, FromStatus: sb.Status, ToStatus: sb.Status,
		Source: source, Reason: reasonRestored, Files: files}, sb.OwnerID)
}
