package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sandman/envvars"
	"sandman/keyring"
	"sandman/overview"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"sandman/credits"
	"sandman/db"
	"sandman/e2b"
	"sandman/ops"
	"sandman/watch"
)

// DefaultConfig is the production configuration (README lists the variables that change it).
func DefaultConfig() Config {
	return Config{
		Template:        "base",
		IdleTimeout:     3 * time.Minute,
		SandboxTimeout:  time.Hour,
		PauseAfterReady: "idle",
		ReconcileEvery:  15 * time.Second,
		EventsEvery:     5 * time.Second,
		SweepEvery:      10 * time.Second,
		VerifyStaleness: 30 * time.Second,
		ResumeRetryWait: 5 * time.Second,
		BuildRetryWait:  4 * time.Second,
		OrphanAge:       5 * time.Minute,
		CreateTimeout:   90 * time.Second,
		UploadTimeout:   time.Minute,
		InstallTimeout:  5 * time.Minute,
		ReadyTimeout:    2 * time.Minute,
		ResumeTimeout:   time.Minute,
		Workers:         20,
	}
}

// Options assemble a Service.
type Options struct {
	Pool     *pgxpool.Pool
	Provider *e2b.Client
	Config   Config
	Logger   *slog.Logger
	// Registerer receives the lifecycle's metrics; nil: none are registered.
	Registerer prometheus.Registerer
	// Work runs the River workers and periodic jobs here; without it the Service only inserts
	// jobs (a web-only instance).
	Work bool
	// Sink receives the output of the installs and dev servers, and how their runs failed (the
	// log store's writer); nil: nowhere.
	Sink watch.Sink
	// Overview reads what a visitor sees (a visit's and a wake's answer); nil: one of its own
	// with Config's IdleDeadline.
	Overview *overview.Reader
	// Name tells the instance's watch connection in pg_stat_activity.
	Name string
	// Secrets opens the projects' secret variables for their apps (SANDMAN_SECRETS_KEY); nil:
	// apps get their plain variables only.
	Secrets *keyring.Keyring
}

// New assembles the Service and its River client.
func New(opts Options) (*Service, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Config.Size == (ops.Size{}) {
		opts.Config.Size = ops.DefaultConfig().Size
	}
	if opts.Config.AnswerProbeEvery <= 0 {
		opts.Config.AnswerProbeEvery = 10 * time.Second
	}
	if opts.Config.SandboxTimeout <= 0 {
		opts.Config.SandboxTimeout = time.Hour
	}
	if opts.Config.HTTPClient == nil {
		// The provider transport also reaches *.localhost previews (sandboxd) on loopback.
		opts.Config.HTTPClient = &http.Client{Transport: e2b.NewHTTPTransport(), Timeout: 5 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if opts.Sink == nil {
		opts.Sink = watch.Discard
	}
	s := &Service{pool: opts.Pool, q: db.New(opts.Pool), ledger: credits.New(opts.Pool), provider: opts.Provider, cfg: opts.Config, log: opts.Logger,
		metrics: newMetrics(opts.Registerer), work: opts.Work, sink: opts.Sink, overview: opts.Overview,
		env: envvars.New(opts.Pool, opts.Secrets, nil)}
	if s.overview == nil {
		s.overview = overview.New(s.q, opts.Config.IdleDeadline)
	}
	if opts.Config.PreviewProxy != "" {
		s.proxy = &proxyBinary{path: opts.Config.PreviewProxy}
	}
	s.watch = watch.New(watch.Options{Pool: opts.Pool, Provider: opts.Provider, Sink: opts.Sink, OnExit: s.appEnded,
		Answers: s.answers, Logger: opts.Logger, ScanEvery: opts.Config.WatchScanEvery,
		Silence: opts.Config.WatchSilence, Name: opts.Name})
	rc := &river.Config{Logger: quietRiver(opts.Logger), JobTimeout: -1}
	if opts.Work {
		workers := river.NewWorkers()
		river.AddWorker(workers, &buildWorker{s: s})
		river.AddWorker(workers, &pauseWorker{s: s})
		river.AddWorker(workers, &resumeWorker{s: s})
		river.AddWorker(workers, &deployWorker{s: s})
		river.AddWorker(workers, &killWorker{s: s})
		river.AddWorker(workers, &verifyWorker{s: s})
		river.AddWorker(workers, &reconcileWorker{s: s})
		river.AddWorker(workers, &eventsWorker{s: s})
		river.AddWorker(workers, &sweepWorker{s: s})
		river.AddWorker(workers, &webhookWorker{s: s})
		rc.Workers = workers
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: max(opts.Config.Workers, 1)}}
		// A webhook's job is the path from the provider to the founder's screen (BENCHMARKS.md:
		// webhook → SSE p99 ≤ 50 ms). River wakes on insert notifications but misses a few of them under load, and
		// then only the poll finds the job: BenchmarkWebhookToSSE's p99 follows this interval.
		rc.FetchPollInterval = 25 * time.Millisecond
		rc.FetchCooldown = 5 * time.Millisecond
		c := opts.Config
		// A job whose worker died is retried once it has been "running" longer than any
		// worker may take (the build, the longest).
		rc.RescueStuckJobsAfter = c.buildStuckAfter()
		periodic := func(every time.Duration, args river.JobArgs) *river.PeriodicJob {
			return river.NewPeriodicJob(river.PeriodicInterval(every),
				func() (river.JobArgs, *river.InsertOpts) { return args, nil },
				&river.PeriodicJobOpts{RunOnStart: true})
		}
		for _, p := range []struct {
			every time.Duration
			args  river.JobArgs
		}{{c.ReconcileEvery, ReconcileArgs{}}, {c.EventsEvery, EventsArgs{}}, {c.SweepEvery, SweepArgs{}}} {
			if p.every > 0 { // zero turns the job off (tests that drive states by hand)
				rc.PeriodicJobs = append(rc.PeriodicJobs, periodic(p.every, p.args))
			}
		}
	}
	client, err := river.NewClient(riverpgxv5.New(opts.Pool), rc)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	s.river = client
	return s, nil
}

// Start runs the workers and the idle queue's loop (when configured to).
func (s *Service) Start(ctx context.Context) error {
	if !s.work {
		return nil
	}
	if err := s.river.Start(ctx); err != nil {
		return err
	}
	s.watch.Start(ctx)
	ictx, cancel := context.WithCancel(ctx)
	s.stopIdle, s.idleDone = cancel, make(chan struct{})
	go func() {
		defer close(s.idleDone)
		var wg sync.WaitGroup
		wg.Go(func() { s.probeNotAnswering(ictx) })
		s.runIdleQueue(ictx)
		wg.Wait()
	}()
	return nil
}

// Stop lets running jobs finish (until ctx ends) and stops fetching new ones; the idle queue
// stops at once, letting go of its lock for another instance.
func (s *Service) Stop(ctx context.Context) error {
	if !s.work {
		return nil
	}
	if s.stopIdle != nil {
		s.stopIdle()
		<-s.idleDone
	}
	err := s.river.Stop(ctx)
	// After the jobs: a job that ends hands its dev server over to the watch.
	s.watch.Stop()
	return err
}

type killWorker struct {
	river.WorkerDefaults[KillArgs]
	s *Service
}

func (w *killWorker) Timeout(*river.Job[KillArgs]) time.Duration { return time.Minute }

func (w *killWorker) Work(ctx context.Context, job *river.Job[KillArgs]) error {
	err := w.s.providerKill(ctx, job.Args.ProviderID)
	if err != nil && !isNotFound(err) {
		return err
	}
	return nil
}
