package applog

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/apperr"
	"sandman/db"
	"sandman/outbox"
)

// MaxPage is the most lines one read returns.
const MaxPage = 1000

// DetailLines is how many of a run's last lines an exit's problem keeps as its detail.
const DetailLines = 50

// MaxProblems is how many problems a project keeps (the newest seen).
const MaxProblems = 200

// Service reads and writes a project's lines and problems. Every read takes the owner: another
// founder's project is not found.
type Service struct {
	pool   *pgxpool.Pool
	q      *db.Queries
	Writer *Writer
	Feed   *Feed
	limits *limiter
}

// New returns a Service around w (which its owner runs) and f, with the browsers' reports
// bounded by limits.
func New(pool *pgxpool.Pool, w *Writer, f *Feed, limits ReportLimits) *Service {
	return &Service{pool: pool, q: db.New(pool), Writer: w, Feed: f, limits: newLimiter(limits)}
}

// LogLine is a stored line.
type LogLine struct {
	Seq       int64
	At        time.Time
	SandboxID uuid.UUID
	Version   int32
	Source    Source
	Stream    Stream
	Text      string
}

var errNoProject = apperr.NotFound("Project")

// Lines is the owner's project's lines after the cursor, oldest first, at most limit (capped at
// MaxPage).
func (s *Service) Lines(ctx context.Context, owner, project uuid.UUID, after int64, limit int) ([]LogLine, error) {
	if err := s.owns(ctx, owner, project); err != nil {
		return nil, err
	}
	return s.LinesAfter(ctx, project, after, limit)
}

// LinesAfter is Lines for a caller that checked the owner already (a stream, at its start).
func (s *Service) LinesAfter(ctx context.Context, project uuid.UUID, after int64, limit int) ([]LogLine, error) {
	limit = max(1, min(limit, MaxPage))
	rows, err := s.q.ListAppLogLines(ctx, db.ListAppLogLinesParams{ProjectID: project, After: after, MaxLines: int32(limit)})
	if err != nil {
		return nil, err
	}
	out := make([]LogLine, len(rows))
	for i, r := range rows {
		out[i] = LogLine{Seq: r.Seq, At: r.At, SandboxID: r.SandboxID, Version: r.Version,
			Source: Source(r.Source), Stream: Stream(r.Stream), Text: r.Text}
	}
	return out, nil
}

// Owns checks the project is the owner's: a not-found error otherwise.
func (s *Service) Owns(ctx context.Context, owner, project uuid.UUID) error {
	return s.owns(ctx, owner, project)
}

func (s *Service) owns(ctx context.Context, owner, project uuid.UUID) error {
	ok, err := s.q.OwnsProject(ctx, db.OwnsProjectParams{ID: project, OwnerID: owner})
	if err != nil {
		return err
	}
	if !ok {
		return errNoProject
	}
	return nil
}

// Problem is what broke, deduplicated.
type Problem struct {
	ID        uuid.UUID
	Source    Source
	Message   string
	Detail    string
	Version   int32
	Count     int64
	FirstSeen time.Time
	LastSeen  time.Time
	Open      bool
}

func problemOf(p db.AppProblem) Problem {
	return Problem{ID: p.ID, Source: Source(p.Source), Message: p.Message, Detail: p.Detail, Version: p.Version,
		Count: p.Count, FirstSeen: p.FirstSeen, LastSeen: p.LastSeen, Open: p.ClosedAt == nil}
}

// Problems is the owner's project's problems, the last seen first.
func (s *Service) Problems(ctx context.Context, owner, project uuid.UUID) ([]Problem, error) {
	if err := s.owns(ctx, owner, project); err != nil {
		return nil, err
	}
	rows, err := s.q.ListAppProblems(ctx, project)
	if err != nil {
		return nil, err
	}
	out := make([]Problem, len(rows))
	for i, r := range rows {
		out[i] = problemOf(r)
	}
	return out, nil
}

// OpenExitProblem records that a run's program exited: the message is the run's last line that
// looks like an error (its last line otherwise; "exited with code N" when it printed nothing),
// the detail its last DetailLines lines. Only this run's lines are read (by its id), never an
// earlier run's. It runs in the caller's transaction (the lifecycle's app writer records the
// exit in the same); the run's lines must be stored first (the Writer flushed).
func OpenExitProblem(ctx context.Context, tx db.Tx, run Run, exitCode int) (Problem, error) {
	rows, err := tx.ListRunLastLines(ctx, db.ListRunLastLinesParams{ProjectID: run.ProjectID, RunID: run.ID, MaxLines: DetailLines})
	if err != nil {
		return Problem{}, err
	}
	message := ""
	for _, r := range rows { // newest first
		if strings.TrimSpace(r.Text) != "" && errorLooking.MatchString(r.Text) {
			message = r.Text
			break
		}
	}
	if message == "" {
		for _, r := range rows {
			if strings.TrimSpace(r.Text) != "" {
				message = r.Text
				break
			}
		}
	}
	what := "The dev server"
	if run.Source == SourceInstall {
		what = "The install"
	}
	if message == "" {
		message = fmt.Sprintf("%s exited with code %d.", what, exitCode)
	}
	var detail strings.Builder
	for i := len(rows) - 1; i >= 0; i-- {
		detail.WriteString(rows[i].Text)
		detail.WriteByte('\n')
	}
	fmt.Fprintf(&detail, "%s exited with code %d.", what, exitCode)
	d := detail.String()
	if len(d) > MaxDetailBytes { // keep the end: the last lines tell how it died
		d = "… " + strings.ToValidUTF8(d[len(d)-MaxDetailBytes+4:], "")
	}
	return upsert(ctx, tx, run.ProjectID, run.SandboxID, run.Source, run.Version, strings.TrimSpace(message), d)
}

// upsert stores a problem seen, deduplicated by its fingerprint, and keeps the project's newest
// MaxProblems.
func upsert(ctx context.Context, tx db.Tx, project, sandbox uuid.UUID, source Source, version int32, message, detail string) (Problem, error) {
	message, detail = clip(message, MaxMessageBytes), clip(detail, MaxDetailBytes)
	row, err := tx.UpsertAppProblem(ctx, db.UpsertAppProblemParams{ProjectID: project, Source: string(source),
		Version: version, Fingerprint: fingerprint(source, version, message), Message: message, Detail: detail,
		SandboxID: sandbox})
	if err != nil {
		return Problem{}, err
	}
	if row.Created {
		e := problemEvent(outbox.ProblemOpened, project, row.ID, version)
		e.SandboxID, e.Reason = &sandbox, string(source)
		if err := outbox.Record(ctx, tx, e); err != nil {
			return Problem{}, err
		}
		if err := tx.TrimAppProblems(ctx, db.TrimAppProblemsParams{ProjectID: project, MaxProblems: MaxProblems}); err != nil {
			return Problem{}, err
		}
	}
	return problemOf(db.AppProblem{ID: row.ID, ProjectID: row.ProjectID, Source: row.Source, Version: row.Version,
		Message: row.Message, Detail: row.Detail, Count: row.Count, FirstSeen: row.FirstSeen, LastSeen: row.LastSeen,
		ClosedAt: row.ClosedAt}), nil
}

// OpenExitProblem stores the run's lines taken so far, then records its exit (the function of
// the same name) in a transaction of its own.
func (s *Service) OpenExitProblem(ctx context.Context, run Run, exitCode int) (Problem, error) {
	if s.Writer != nil {
		if err := s.Writer.Flush(ctx); err != nil {
			return Problem{}, err
		}
	}
	var p Problem
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		var err error
		p, err = OpenExitProblem(ctx, tx, run, exitCode)
		return err
	})
	return p, err
}

// CloseProblems closes the project's open problems of versions older than upVersion, which is
// up: what broke in them is not what runs now. It returns how many it closed.
func CloseProblems(ctx context.Context, tx db.Tx, project uuid.UUID, upVersion int32) (int64, error) {
	closed, err := tx.CloseAppProblems(ctx, db.CloseAppProblemsParams{ProjectID: project, UpVersion: upVersion})
	if err != nil {
		return 0, err
	}
	for _, p := range closed {
		if err := outbox.Record(ctx, tx, problemEvent(outbox.ProblemClosed, project, p.ID, p.Version)); err != nil {
			return 0, err
		}
	}
	return int64(len(closed)), nil
}

// problemEvent is the webhook event of a problem opened or closed (docs/api.md, "Webhooks").
func problemEvent(t outbox.Type, project uuid.UUID, id uuid.UUID, version int32) outbox.Event {
	return outbox.Event{Type: t, ProjectID: project, Version: version, Extra: map[string]any{"problemId": id}}
}

// CloseProblems is the function of the same name in a transaction of its own.
func (s *Service) CloseProblems(ctx context.Context, project uuid.UUID, upVersion int32) (int64, error) {
	var n int64
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		var err error
		n, err = CloseProblems(ctx, tx, project, upVersion)
		return err
	})
	return n, err
}

// ErrNoPreview is a report for a preview the viewer may not see, or that does not exist.
var ErrNoPreview = apperr.NotFound("Preview")

// ReportBrowser records a report, as sent by a founder's browser, about one of their previews:
// another founder's preview (or none) is not found before the body is read, a body that is not a
// report is ErrNotAReport (ErrReportTooLarge past its size), a report past the limits (the
// founder is the viewer) is refused, and one taken becomes a browser problem of the version the
// preview runs.
func (s *Service) ReportBrowser(ctx context.Context, owner, sandbox uuid.UUID, body []byte) (Problem, error) {
	t, err := s.q.GetReportTarget(ctx, db.GetReportTargetParams{SandboxID: sandbox, OwnerID: owner})
	if db.IsNotFound(err) {
		return Problem{}, ErrNoPreview
	}
	if err != nil {
		return Problem{}, err
	}
	return s.report(ctx, t.ProjectID, sandbox, t.Version, "founder:"+owner.String(), body)
}

// ReportShared is ReportBrowser for a share link's visitor, about the project's preview (its
// current sandbox: the one the link shows); the visitor's address is the viewer.
func (s *Service) ReportShared(ctx context.Context, project uuid.UUID, addr string, body []byte) (Problem, error) {
	t, err := s.q.GetProjectReportTarget(ctx, project)
	if db.IsNotFound(err) {
		return Problem{}, ErrNoPreview
	}
	if err != nil {
		return Problem{}, err
	}
	return s.report(ctx, project, t.SandboxID, t.Version, "addr:"+addr, body)
}

func (s *Service) report(ctx context.Context, project, sandbox uuid.UUID, version int32, viewer string, body []byte) (Problem, error) {
	r, err := ParseReport(body)
	if err != nil {
		return Problem{}, err
	}
	if err := s.limits.allow(sandbox, viewer); err != nil {
		return Problem{}, err
	}
	// A page's error may quote a secret the app put in it, as its output may.
	red, err := s.Writer.redactor(ctx, project)
	if err != nil {
		return Problem{}, err
	}
	var p Problem
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		var err error
		p, err = upsert(ctx, tx, project, sandbox, SourceBrowser, version, red.Redact(r.problemMessage()), red.Redact(r.problemDetail()))
		return err
	})
	return p, err
}

// Counts is a project's stored lines and their bytes (for tests and the operator).
func (s *Service) Counts(ctx context.Context, project uuid.UUID) (lines, bytes int64, err error) {
	c, err := s.q.CountAppLogLines(ctx, project)
	return c.Lines, c.Bytes, err
}

// Newest is the owner's project's newest lines, at most limit, oldest first: the build page's
// Logs panel as drawn on the server (its script then follows the stream after the last).
func (s *Service) Newest(ctx context.Context, owner, project uuid.UUID, limit int) ([]LogLine, error) {
	if err := s.owns(ctx, owner, project); err != nil {
		return nil, err
	}
	rows, err := s.q.ListNewestAppLogLines(ctx, db.ListNewestAppLogLinesParams{ProjectID: project, MaxLines: int32(max(1, min(limit, MaxPage)))})
	if err != nil {
		return nil, err
	}
	out := make([]LogLine, len(rows))
	for i, r := range rows {
		out[len(rows)-1-i] = LogLine{Seq: r.Seq, At: r.At, SandboxID: r.SandboxID, Version: r.Version,
			Source: Source(r.Source), Stream: Stream(r.Stream), Text: r.Text}
	}
	return out, nil
}
