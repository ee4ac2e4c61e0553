package ops

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/apperr"
	"sandman/db"
	"sandman/sandbox"
)

// Options are what the console needs beyond the database: the rules and clocks of other
// packages, passed in by the assembly so this package imports none of them.
type Options struct {
	Pool   *pgxpool.Pool
	Config Config
	// Describe is the history's sentence of an event (lifecycle's).
	Describe func(db.SandboxEvent, sandbox.BuildKind) string
	// StuckAfter is how long a sandbox may stay starting, and resuming, before the sweep ends it.
	StuckAfter func() (starting, resuming time.Duration)
	// Provider is this instance's view of the provider's client: its circuit breaker's state
	// and its failed calls by route since the instance started.
	Provider func() ProviderClient
}

// ProviderClient is what this instance's provider client reports.
type ProviderClient struct {
	Circuit string
	Errors  map[string]int64
}

// Service reads the console's figures.
type Service struct {
	q    *db.Queries
	opts Options
}

// New returns the console's service.
func New(opts Options) *Service {
	if opts.Config.Size == (Size{}) {
		opts.Config.Size = DefaultConfig().Size
	}
	return &Service{q: db.New(opts.Pool), opts: opts}
}

// Periods are what the console measures over: a day is the last 24 hours.
var Periods = []Period{{"day", "Last 24 hours", 24 * time.Hour}, {"week", "Last 7 days", 7 * 24 * time.Hour}, {"month", "Last 30 days", 30 * 24 * time.Hour}}

// Period is one span the console sums over, ending now.
type Period struct {
	Key, Label string
	Length     time.Duration
}

// Fleet is the previews by state now.
type Fleet struct {
	Starting, Running, PausedMemory, PausedFiles, Resuming, ResumeFailed, Unknown int64
	// Gone is the sandboxes that ended in the last 24 hours, not by a rebuild.
	Gone int64
	// Founders is how many founders have a preview running.
	Founders int64
}

// Paused is every sleeping preview, whatever its snapshot.
func (f Fleet) Paused() int64 { return f.PausedMemory + f.PausedFiles }

// Figures are the console's money: what is awake now and what it costs, and per period what
// was spent and what sleeping saved.
type Figures struct {
	Awake       int64 // sandboxes awake now (billed)
	AwakeVCPUs  int64
	AwakeMiB    int64
	CostPerHour float64
	Spent       map[string]float64 // by Period.Key
	Saved       map[string]float64
}

// CostPerDay is a day at the current rate.
func (f Figures) CostPerDay() float64 { return f.CostPerHour * 24 }

// Share is the part of what would have been spent that sleeping saved over a period.
func (f Figures) Share(period string) float64 {
	total := f.Spent[period] + f.Saved[period]
	if total == 0 {
		return 0
	}
	return f.Saved[period] / total
}

// Fleet counts the previews by state.
func (s *Service) Fleet(ctx context.Context, now time.Time) (Fleet, error) {
	var f Fleet
	rows, err := s.q.CountSandboxesByState(ctx)
	if err != nil {
		return f, err
	}
	for _, r := range rows {
		switch r.Status {
		case sandbox.Starting:
			f.Starting += r.N
		case sandbox.Running:
			f.Running += r.N
		case sandbox.Paused:
			if r.SnapshotKind != nil && *r.SnapshotKind == sandbox.PauseFilesystem {
				f.PausedFiles += r.N
			} else {
				f.PausedMemory += r.N
			}
		case sandbox.Resuming:
			f.Resuming += r.N
		case sandbox.ResumeFailed:
			f.ResumeFailed += r.N
		case sandbox.Unknown:
			f.Unknown += r.N
		}
	}
	if f.Gone, err = s.q.CountGoneSince(ctx, now.Add(-24*time.Hour)); err != nil {
		return f, err
	}
	f.Founders, err = s.q.CountFoundersRunning(ctx)
	return f, err
}

// Figures sums cost and savings: the closed stretches from the hourly rollup, the open ones
// live (docs/operations.md, "How the figures are kept").
func (s *Service) Figures(ctx context.Context, now time.Time) (Figures, error) {
	r := s.opts.Config.Rates
	f := Figures{Spent: map[string]float64{}, Saved: map[string]float64{}}
	awake, err := s.q.SumAwakeNow(ctx)
	if err != nil {
		return f, err
	}
	f.Awake, f.AwakeVCPUs, f.AwakeMiB = awake.Sandboxes, awake.Vcpus, awake.MemoryMib
	f.CostPerHour = r.PerHour(float64(awake.Vcpus), float64(awake.MemoryMib))
	since := make([]time.Time, len(Periods))
	for i, p := range Periods {
		since[i] = now.Add(-p.Length)
	}
	usage, err := s.usageSince(ctx, since, now)
	if err != nil {
		return f, err
	}
	for i, p := range Periods {
		f.Spent[p.Key], f.Saved[p.Key] = r.Spent(usage[i]), r.Saved(usage[i])
	}
	return f, nil
}

// usageSince is the fleet's usage from each instant until now.
func (s *Service) usageSince(ctx context.Context, since []time.Time, now time.Time) ([]Usage, error) {
	// Rows name their instant by its place in the list (from 1): the database keeps
	// microseconds, so an instant read back is not always the one sent.
	out := make([]Usage, len(since))
	at := func(i int32) *Usage {
		if i < 1 || int(i) > len(out) {
			return &Usage{}
		}
		return &out[i-1]
	}
	closed, err := s.q.SumUsageHours(ctx, since)
	if err != nil {
		return nil, err
	}
	for _, c := range closed {
		u := at(c.I)
		*u = u.Add(Usage{AwakeVCPUSeconds: c.AwakeVcpuSeconds, AwakeGiBSeconds: c.AwakeGibSeconds,
			SavedVCPUSeconds: c.SavedVcpuSeconds, SavedGiBSeconds: c.SavedGibSeconds})
	}
	open, err := s.q.SumOpenUsage(ctx, db.SumOpenUsageParams{Since: since, Now: now})
	if err != nil {
		return nil, err
	}
	for _, o := range open {
		u := at(o.I)
		if o.Kind == db.UsageKindAwake {
			*u = u.Add(Usage{AwakeVCPUSeconds: o.VcpuSeconds, AwakeGiBSeconds: o.GibSeconds})
		} else {
			*u = u.Add(Usage{SavedVCPUSeconds: o.VcpuSeconds, SavedGiBSeconds: o.GibSeconds})
		}
	}
	return out, nil
}

// SavedTotal is everything sleeping has saved since the figures were first kept, at the
// current rates (the sandman_saved_dollars_total counter).
func (s *Service) SavedTotal(ctx context.Context, now time.Time) (float64, error) {
	u, err := s.usageSince(ctx, []time.Time{time.Unix(0, 0)}, now)
	if err != nil {
		return 0, err
	}
	return s.opts.Config.Rates.Saved(u[0]), nil
}

// Summary is GET /api/ops/summary's answer (docs/api.md, "Operators").
type Summary struct {
	// States counts sandboxes by state (gone: ended in the last 24 hours, not by a rebuild);
	// PausedBy splits the paused ones by their snapshot.
	States      map[string]int64   `json:"states"`
	PausedBy    map[string]int64   `json:"pausedBy"`
	Founders    int64              `json:"foundersRunning"`
	CostPerHour float64            `json:"costPerHour"`
	CostPerDay  float64            `json:"costPerDay"`
	Spent       map[string]float64 `json:"spent"`
	Saved       map[string]float64 `json:"saved"`
	Rates       SummaryRates       `json:"rates"`
}

// SummaryRates are the rates and size the figures use.
type SummaryRates struct {
	VCPUHour  float64 `json:"vcpuHour"`
	GiBHour   float64 `json:"gibHour"`
	VCPUs     int32   `json:"vcpus"`
	MemoryGiB float64 `json:"memoryGiB"`
}

// Summary is the fleet and its money in one answer.
func (s *Service) Summary(ctx context.Context, now time.Time) (Summary, error) {
	fleet, err := s.Fleet(ctx, now)
	if err != nil {
		return Summary{}, err
	}
	fig, err := s.Figures(ctx, now)
	if err != nil {
		return Summary{}, err
	}
	return summaryOf(s.opts.Config, fleet, fig), nil
}

func summaryOf(c Config, fleet Fleet, fig Figures) Summary {
	return Summary{
		States: map[string]int64{"starting": fleet.Starting, "running": fleet.Running, "paused": fleet.Paused(),
			"resuming": fleet.Resuming, "resume_failed": fleet.ResumeFailed, "unknown": fleet.Unknown, "gone": fleet.Gone},
		PausedBy: map[string]int64{"memory": fleet.PausedMemory, "filesystem": fleet.PausedFiles},
		Founders: fleet.Founders, CostPerHour: fig.CostPerHour, CostPerDay: fig.CostPerDay(), Spent: fig.Spent, Saved: fig.Saved,
		Rates: SummaryRates{VCPUHour: c.Rates.VCPUHour, GiBHour: c.Rates.GiBHour, VCPUs: c.Size.VCPUs, MemoryGiB: float64(c.Size.MemoryMiB) / 1024},
	}
}

// ChartPoint is one hour of the chart: how many previews were awake on average, and what they
// cost that hour.
type ChartPoint struct {
	Hour    time.Time
	Running float64
	Cost    float64
}

// Chart is the last hours of the fleet, one point per clock hour, oldest first; the newest is
// the hour under way.
func (s *Service) Chart(ctx context.Context, now time.Time, hours int) ([]ChartPoint, error) {
	start := now.UTC().Truncate(time.Hour).Add(-time.Duration(hours-1) * time.Hour)
	byHour := map[time.Time]*Usage{}
	points := make([]ChartPoint, hours)
	for i := range points {
		points[i].Hour = start.Add(time.Duration(i) * time.Hour)
		byHour[points[i].Hour] = &Usage{}
	}
	add := func(h time.Time, u Usage) {
		if p := byHour[h.UTC()]; p != nil {
			*p = p.Add(u)
		}
	}
	closed, err := s.q.ListUsageByHour(ctx, start)
	if err != nil {
		return nil, err
	}
	for _, c := range closed {
		add(c.Hour, Usage{AwakeSeconds: c.AwakeSeconds, AwakeVCPUSeconds: c.AwakeVcpuSeconds, AwakeGiBSeconds: c.AwakeGibSeconds})
	}
	open, err := s.q.ListOpenAwakeByHour(ctx, db.ListOpenAwakeByHourParams{Since: start, Now: now})
	if err != nil {
		return nil, err
	}
	for _, o := range open {
		add(o.Hour, Usage{AwakeSeconds: o.AwakeSeconds, AwakeVCPUSeconds: o.AwakeVcpuSeconds, AwakeGiBSeconds: o.AwakeGibSeconds})
	}
	for i := range points {
		u := byHour[points[i].Hour]
		// The hour under way counts as far as it has gone.
		span := min(time.Hour, now.Sub(points[i].Hour)).Seconds()
		if span > 0 {
			points[i].Running = u.AwakeSeconds / span
		}
		points[i].Cost = s.opts.Config.Rates.Spent(*u)
	}
	return points, nil
}

// Item is one preview in a "needs a hand" list.
type Item struct {
	SandboxID   uuid.UUID
	ProjectID   uuid.UUID
	ProjectName string
	Founder     string
	At          time.Time
	Text        string // the history's sentence, or the state
	Detail      string // the free-form part of why (an error's text), for the operator
}

// Group is the failures of one cause.
type Group struct {
	Reason sandbox.Reason
	Text   string
	Items  []Item
}

// Attention is what needs a hand: previews stuck past their deadline, resumes and builds that
// failed in the last 24 hours by cause, previews the provider lost, files the integrity check
// healed, orphans the reconcile killed.
type Attention struct {
	Stuck    []Item
	Failures []Group
	Lost     []Item
	Healed   []Item
	Orphans  []db.ListOrphanKillsSinceRow
}

// failureReasons are the failed resumes and builds, in the order the console groups them. With
// lost and restored they are what ListEventsByReasonSince reads.
var failureReasons = []sandbox.Reason{sandbox.ReasonResumeNotFound, sandbox.ReasonResumeUnreachable, sandbox.ReasonResumeTimedOut,
	sandbox.ReasonResumeFilesLost, sandbox.ReasonBuildFailed, sandbox.ReasonBuildFailedRefunded}

// maxListed caps each list: a console is read by a person.
const maxListed = 200

// Attention lists what needs a hand.
func (s *Service) Attention(ctx context.Context, now time.Time) (Attention, error) {
	var a Attention
	starting, resuming := s.opts.StuckAfter()
	stuck, err := s.q.ListStuckWithOwners(ctx, db.ListStuckWithOwnersParams{StartingBefore: now.Add(-starting), ResumingBefore: now.Add(-resuming)})
	if err != nil {
		return a, err
	}
	for _, r := range stuck {
		a.Stuck = append(a.Stuck, Item{SandboxID: r.ID, ProjectID: r.ProjectID, ProjectName: r.ProjectName, Founder: r.Founder,
			At: r.StateChangedAt, Text: "Still " + string(r.Status) + ", past its deadline"})
	}
	since := now.Add(-24 * time.Hour)
	evs, err := s.q.ListEventsByReasonSince(ctx, db.ListEventsByReasonSinceParams{Since: since, MaxRows: maxListed * 4})
	if err != nil {
		return a, err
	}
	groups := map[sandbox.Reason]*Group{}
	for _, e := range evs {
		ev := db.SandboxEvent{ID: e.ID, SandboxID: e.SandboxID, FromStatus: e.FromStatus, ToStatus: e.ToStatus, Source: e.Source,
			Reason: e.Reason, Detail: e.Detail, CreatedAt: e.CreatedAt, Files: make([]string, e.Files)}
		it := Item{SandboxID: e.SandboxID, ProjectID: e.ProjectID, ProjectName: e.ProjectName, Founder: e.Founder, At: e.CreatedAt,
			Text: s.opts.Describe(ev, sandbox.BuildInitial), Detail: e.Detail}
		switch e.Reason {
		case sandbox.ReasonLost:
			a.Lost = appendCapped(a.Lost, it)
		case sandbox.ReasonRestored:
			a.Healed = appendCapped(a.Healed, it)
		default:
			g := groups[e.Reason]
			if g == nil {
				g = &Group{Reason: e.Reason, Text: it.Text}
				groups[e.Reason] = g
			}
			g.Items = appendCapped(g.Items, it)
		}
	}
	for _, r := range failureReasons {
		if g := groups[r]; g != nil {
			a.Failures = append(a.Failures, *g)
		}
	}
	a.Orphans, err = s.q.ListOrphanKillsSince(ctx, since)
	return a, err
}

func appendCapped(items []Item, it Item) []Item {
	if len(items) >= maxListed {
		return items
	}
	return append(items, it)
}

// Health is how the provider's feeds are doing. The last two fields are this instance's own
// client's (ProviderClient); the rest every instance shares through the database.
type Health struct {
	LastWebhook *db.GetLatestWebhookDeliveryRow
	// Lag is the last webhook's provider time to its application (0 when unknown).
	Lag                  time.Duration
	DeliveriesPerMinute  float64 // over the last 10 minutes
	SignatureFailures    int64   // in the last hour
	CaughtUp             int64   // changes the events API's catch-up made in the last hour
	ReconcileCorrections int64   // changes the reconcile and verification made in the last hour
	Client               ProviderClient
}

// Health reads the provider's health.
func (s *Service) Health(ctx context.Context, now time.Time) (Health, error) {
	var h Health
	last, err := s.q.GetLatestWebhookDelivery(ctx)
	switch {
	case err == nil:
		h.LastWebhook = &last
		if last.EventAt != nil && last.ProcessedAt != nil {
			h.Lag = last.ProcessedAt.Sub(*last.EventAt)
		}
	case !db.IsNotFound(err):
		return h, err
	}
	n, err := s.q.CountWebhookDeliveriesSince(ctx, now.Add(-10*time.Minute))
	if err != nil {
		return h, err
	}
	h.DeliveriesPerMinute = float64(n) / 10
	if h.SignatureFailures, err = s.q.SumWebhookRejectionsSince(ctx, now.Add(-time.Hour).Truncate(time.Minute)); err != nil {
		return h, err
	}
	hourAgo := now.Add(-time.Hour)
	if h.CaughtUp, err = s.q.CountEventsBySourceSince(ctx, db.CountEventsBySourceSinceParams{Source: sandbox.SourceEventsAPI, Since: hourAgo}); err != nil {
		return h, err
	}
	if h.ReconcileCorrections, err = s.q.CountEventsBySourceSince(ctx, db.CountEventsBySourceSinceParams{Source: sandbox.SourceReconciler, Since: hourAgo}); err != nil {
		return h, err
	}
	if s.opts.Provider != nil {
		h.Client = s.opts.Provider()
	}
	return h, nil
}

// Console is everything /ops shows, read at one instant.
type Console struct {
	Now       time.Time
	Config    Config
	Fleet     Fleet
	Figures   Figures
	Day, Week []ChartPoint
	Attention Attention
	Health    Health
}

// Console reads the whole console.
func (s *Service) Console(ctx context.Context, now time.Time) (Console, error) {
	c := Console{Now: now, Config: s.opts.Config}
	var err error
	if c.Fleet, err = s.Fleet(ctx, now); err != nil {
		return c, err
	}
	if c.Figures, err = s.Figures(ctx, now); err != nil {
		return c, err
	}
	if c.Week, err = s.Chart(ctx, now, 7*24); err != nil {
		return c, err
	}
	c.Day = c.Week[len(c.Week)-24:]
	if c.Attention, err = s.Attention(ctx, now); err != nil {
		return c, err
	}
	c.Health, err = s.Health(ctx, now)
	return c, err
}

// SandboxPage is the console's page of one preview: whose it is, its whole trail and what it
// cost and saved so far.
type SandboxPage struct {
	Sandbox     db.Sandbox
	Founder     string
	ProjectName string
	Trail       []TrailEntry
	Spent       float64
	Saved       float64
}

// TrailEntry is one recorded event with its sentence.
type TrailEntry struct {
	Event db.SandboxEvent
	Text  string
}

// Sandbox reads one preview for the console.
func (s *Service) Sandbox(ctx context.Context, id uuid.UUID, now time.Time) (SandboxPage, error) {
	row, err := s.q.GetSandboxForOps(ctx, id)
	if db.IsNotFound(err) {
		return SandboxPage{}, apperr.NotFound("Sandbox")
	}
	if err != nil {
		return SandboxPage{}, err
	}
	p := SandboxPage{Sandbox: row.Sandbox, Founder: row.Founder, ProjectName: row.ProjectName}
	build, err := s.q.GetBuild(ctx, row.Sandbox.BuildID)
	if err != nil {
		return p, err
	}
	evs, err := s.q.ListSandboxEvents(ctx, id)
	if err != nil {
		return p, err
	}
	for i := len(evs) - 1; i >= 0; i-- { // newest first, as the history reads
		p.Trail = append(p.Trail, TrailEntry{Event: evs[i], Text: s.opts.Describe(evs[i], build.Kind)})
	}
	ivs, err := s.q.ListSandboxUsage(ctx, id)
	if err != nil {
		return p, err
	}
	var u Usage
	for _, iv := range ivs {
		u = u.Add(IntervalOf(iv).Within(iv.StartedAt, now))
	}
	p.Spent, p.Saved = s.opts.Config.Rates.Spent(u), s.opts.Config.Rates.Saved(u)
	return p, nil
}
