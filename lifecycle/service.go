package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sandman/envvars"
	"sandman/overview"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"sandman/apperr"
	"sandman/credits"
	"sandman/db"
	"sandman/e2b"
	"sandman/ops"
	"sandman/outbox"
	"sandman/sandbox"
	"sandman/watch"
)

// Config holds the lifecycle's timings and choices (README lists their variables).
type Config struct {
	Template        string        // E2B_TEMPLATE
	IdleTimeout     time.Duration // SANDMAN_IDLE_TIMEOUT
	SandboxTimeout  time.Duration // SANDMAN_SANDBOX_TIMEOUT: lifetime given at create and each connect
	PauseAfterReady string        // SANDMAN_PAUSE_AFTER_READY: "idle" or "immediate"
	ReconcileEvery  time.Duration // the list-based sweep (0: off)
	EventsEvery     time.Duration // the events API catch-up reader (0: off)
	SweepEvery      time.Duration // the idle and stuck safety net (0: off)
	Workers         int           // concurrent jobs per instance
	WebhookSecret   string        // E2B_WEBHOOK_SECRET: deliveries must be signed with it
	VerifyStaleness time.Duration // pages older than this queue a verify
	ResumeRetryWait time.Duration // between the two resume attempts
	BuildRetryWait  time.Duration // a failed build attempt is tried again after this × attempt²
	OrphanAge       time.Duration // a provider sandbox no row wants is killed once this old
	// Deadlines for each build step and for a resume; past them the worker gives up.
	CreateTimeout, UploadTimeout, InstallTimeout, ReadyTimeout, ResumeTimeout time.Duration
	// HTTPClient checks previews for readiness.
	HTTPClient *http.Client
	// WatchScanEvery is how often an instance looks for running previews whose dev server no
	// instance watches (a dead instance's): 0, 2 s.
	WatchScanEvery time.Duration
	// WatchSilence is how long a dev server's stream may bring nothing, not even envd's
	// keepalive, before the watch breaks it and connects to the process again: 0, 2 min.
	WatchSilence time.Duration
	// AnswerProbeEvery is how often the watch's holder asks a dev server that runs without
	// answering (not_answering) whether it answers now: 0, 10 s.
	AnswerProbeEvery time.Duration
	// Size is a new sandbox's size (SANDMAN_SANDBOX_VCPUS, SANDMAN_SANDBOX_MEMORY) until the
	// provider reports its own; zero: ops.DefaultConfig's.
	Size ops.Size
	// PreviewProxy is the preview proxy's Linux binary (SANDMAN_PREVIEW_PROXY), uploaded into
	// each sandbox and run in front of the app; "": none, the preview URL is the app's port.
	PreviewProxy string
}

// Service is the lifecycle's entry point for handlers and workers.
type Service struct {
	pool     *pgxpool.Pool
	q        *db.Queries
	ledger   *credits.Ledger
	provider *e2b.Client
	river    *river.Client[pgx.Tx]
	cfg      Config
	log      *slog.Logger
	metrics  *metrics
	work     bool
	// hooks commits the webhooks' deliveries in groups (lifecycle/webhooks.go).
	hooks groupCommit
	// ghosts: the listed sandboxes whose orphan kill found nothing (lifecycle/verify.go).
	ghosts orphanGhosts
	// watch follows the running previews' dev servers this instance holds (package watch),
	// and sink is where their output and the installs' goes.
	watch *watch.Watcher
	sink  watch.Sink
	// overview reads the states the actions answer with (a visit's).
	overview *overview.Reader
	// proxy is the preview proxy's binary (nil: no proxy, lifecycle/proxy.go).
	proxy *proxyBinary
	// env opens the projects' variables for their installs and dev servers (lifecycle/env.go).
	env *envvars.Store
	// stopIdle ends the idle queue's loop (lifecycle/idle.go), and idleDone is closed once it
	// has ended.
	stopIdle context.CancelFunc
	idleDone chan struct{}
}

// BuildResult says what a build or rebuild request started.
type BuildResult struct {
	Build   db.Build
	Sandbox db.Sandbox
	// Replayed is true when the idempotency key had already been used: nothing new was charged.
	Replayed bool
}

// Actor is who asks for a change: a founder, and the name of the API token they came through
// ("" from their browser), which the history names (docs/states.md, "History").
type Actor struct {
	Founder uuid.UUID
	Token   string
}

// StartBuild charges one credit and starts a build of the project's current version: the first
// build, or a rebuild that replaces the current sandbox. The debit, the new build and the old sandbox's end happen in one transaction keyed
// by key, so repeating the request (a double click, a retry) charges once.
func (s *Service) StartBuild(ctx context.Context, by Actor, projectID uuid.UUID, key string, rebuild bool) (BuildResult, error) {
	owner := by.Founder
	if key == "" || len(key) > 200 {
		return BuildResult{}, apperr.Invalid(map[string]string{"idempotencyKey": "Send an idempotency key of 1 to 200 characters."})
	}
	var res BuildResult
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		res = BuildResult{}
		project, err := tx.LockProjectByOwner(ctx, db.LockProjectByOwnerParams{ID: projectID, OwnerID: owner})
		if err != nil {
			if db.IsNotFound(err) {
				return apperr.NotFound("Project")
			}
			return err
		}
		debit, earlier, err := credits.Claim(ctx, tx, owner, key, buildReason(rebuild))
		if err != nil {
			return err
		}
		if earlier != nil {
			return s.replay(ctx, tx, *earlier, project.ID, rebuild, &res)
		}
		_, err = tx.GetLatestBuild(ctx, project.ID)
		hasBuild := err == nil
		if err != nil && !db.IsNotFound(err) {
			return err
		}
		switch {
		case rebuild && !hasBuild:
			return apperr.New(apperr.KindConflict, codeNotBuilt, "This project has not been built yet: build it first.")
		case !rebuild && hasBuild:
			return apperr.New(apperr.KindConflict, codeAlreadyBuilt, "This project already has a build: use Rebuild to start a fresh one.")
		}
		if err := debit.Take(ctx, tx); errors.Is(err, credits.ErrNoCredit) {
			return &apperr.Error{Kind: apperr.KindNoCredits, Code: codeNoCredits,
				Message: "You have no build credits left, so nothing was charged and the preview was not rebuilt."}
		} else if err != nil {
			return err
		}
		kind := sandbox.BuildInitial
		if rebuild {
			kind = sandbox.BuildRebuild
		}
		// Every build, the first and each rebuild, builds the project's current version.
		cur, err := tx.GetCurrentVersion(ctx, project.ID)
		if err != nil {
			return err
		}
		build, err := tx.InsertBuild(ctx, db.InsertBuildParams{ProjectID: project.ID, Kind: kind, FilesVersionID: cur.ID})
		if err != nil {
			return err
		}
		if rebuild {
			if err := s.replaceCurrent(ctx, tx, project.ID); err != nil {
				return err
			}
		}
		if err := debit.PaysFor(ctx, tx, build.ID); err != nil {
			return err
		}
		sb, err := s.createSandboxRow(ctx, tx, by, project.ID, build.ID, rebuild)
		if err != nil {
			return err
		}
		if _, err := s.river.InsertTx(ctx, tx.Pgx(), BuildArgs{SandboxID: sb.ID}, nil); err != nil {
			return err
		}
		res = BuildResult{Build: build, Sandbox: sb}
		return nil
	})
	return res, err
}

// errKeyUsed refuses an idempotency key already spent on another project's build, or on the
// other kind of request.
var errKeyUsed = apperr.New(apperr.KindConflict, codeKeyUsed,
	"This idempotency key was already used for another build (of another project, or a build instead of a rebuild). "+
		"Nothing was charged: send a new key for this request.")

func buildReason(rebuild bool) db.LedgerReason {
	if rebuild {
		return db.LedgerReasonRebuild
	}
	return db.LedgerReasonBuild
}

// replay answers a repeated idempotency key with what the first request started. A key belongs
// to one project and one kind of request (build or rebuild): used for anything else, it is a
// conflict, and nothing is charged.
func (s *Service) replay(ctx context.Context, tx db.Tx, ledger db.CreditLedger, projectID uuid.UUID, rebuild bool, res *BuildResult) error {
	if ledger.BuildID == nil {
		return errKeyUsed
	}
	build, err := tx.GetBuild(ctx, *ledger.BuildID)
	if err != nil {
		return err
	}
	if build.ProjectID != projectID || ledger.Reason != buildReason(rebuild) {
		return errKeyUsed
	}
	sb, err := tx.GetSandboxByBuild(ctx, build.ID)
	if err != nil {
		return err
	}
	*res = BuildResult{Build: build, Sandbox: sb, Replayed: true}
	return nil
}

// replaceCurrent ends the project's current sandbox as "replaced" and queues the provider-side
// kill, unless it is already gone.
func (s *Service) replaceCurrent(ctx context.Context, tx db.Tx, projectID uuid.UUID) error {
	cur, err := tx.GetCurrentSandboxByProject(ctx, projectID)
	if db.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// A build still under way is finished too: it will never be (its worker finds its sandbox
	// ended), and the founder chose to replace it, so its credit stays spent.
	if err := s.finishFailed(ctx, tx, cur, replacedBuild); err != nil {
		return err
	}
	if cur.Status.Gone() {
		return nil
	}
	if err := tx.SetSandboxKillRequested(ctx, cur.ID); err != nil {
		return err
	}
	if _, err := apply(ctx, tx, cur, Change{To: sandbox.Terminated, Source: sandbox.SourceUser, Reason: reasonReplaced, KilledReason: ptr(reasonReplaced)}); err != nil {
		return err
	}
	if cur.ProviderID != nil {
		if _, err := s.river.InsertTx(ctx, tx.Pgx(), KillArgs{ProviderID: *cur.ProviderID}, nil); err != nil {
			return err
		}
	}
	return nil
}

// createSandboxRow inserts the new sandbox in `starting` with its creation event, which names
// the API token the founder came through, if any, and opens its first stretch awake.
func (s *Service) createSandboxRow(ctx context.Context, tx db.Tx, by Actor, projectID, buildID uuid.UUID, recreated bool) (db.Sandbox, error) {
	sb, err := tx.InsertSandbox(ctx, db.InsertSandboxParams{OwnerID: by.Founder, ProjectID: projectID, BuildID: buildID, Recreated: recreated,
		Vcpus: s.cfg.Size.VCPUs, MemoryMib: s.cfg.Size.MemoryMiB, LifetimeSeconds: int32(s.cfg.SandboxTimeout / time.Second)})
	if err != nil {
		return sb, err
	}
	if err := ops.Record(ctx, tx, nil, sb, time.Now()); err != nil {
		return sb, err
	}
	started := outbox.OfSandbox(outbox.BuildStarted, sb, string(reasonCreated))
	started.State = string(sandbox.BuildBuilding)
	if err := outbox.Record(ctx, tx, started); err != nil {
		return sb, err
	}
	return sb, announce(ctx, tx, sb, sandbox.SourceUser, reasonCreated, by.Token)
}

func ptr[T any](v T) *T { return &v }

// RegisterWebhook creates or updates Sandman's webhook with the provider (E2B_WEBHOOK_URL).
func (s *Service) RegisterWebhook(ctx context.Context, url, secret string) error {
	_, err := s.provider.EnsureWebhook(ctx, url, secret, []string{EventCreated, EventPaused, EventResumed, EventUpdated, EventKilled})
	return err
}
