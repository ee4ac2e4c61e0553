package handlers

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"sandman/db"
	"sandman/lifecycle"
	"sandman/live"
	"sandman/ops"
	"sandman/sandbox"
	"sandman/views"
)

// opsPrefix is where the operator's console lives; its JSON is under /api/ops.
const opsPrefix = "/ops"

// requireOperator lets operators through; anyone else, logged in or not, gets the answer of a
// page that does not exist: the console says nothing of itself to them.
func (h *Handlers) requireOperator(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := principal(c)
		if p == nil {
			return echo.ErrNotFound
		}
		ok, err := h.Operators.IsOperator(c.Request().Context(), p.Founder.ID)
		if err != nil {
			return err
		}
		if !ok {
			return echo.ErrNotFound
		}
		return next(c)
	}
}

// opsPage is the console.
func (h *Handlers) opsPage(c echo.Context) error {
	cv, err := consoleView(c.Request().Context(), h.Ops, time.Now())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.Ops(views.OpsPage{Layout: h.layout(c, "Operator's console"), Console: cv}))
}

// opsSummary is the console's figures as JSON (docs/api.md, "Operators").
func (h *Handlers) opsSummary(c echo.Context) error {
	s, err := h.Ops.Summary(c.Request().Context(), time.Now())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s)
}

// opsSandbox is the console's page of one preview; confirmKill asks before a kill (the page
// the Kill link opens without JavaScript).
func (h *Handlers) opsSandbox(confirmKill bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := h.sandboxID(c)
		if err != nil {
			return err
		}
		now := time.Now()
		p, err := h.Ops.Sandbox(c.Request().Context(), id, now)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.OpsSandbox(opsSandboxView(h.layout(c, p.ProjectName+" · operator"), p, confirmKill)))
	}
}

// opsAction runs an operator's pause or kill and goes back to the preview's page.
func (h *Handlers) opsAction(action db.OperatorAction) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := h.sandboxID(c)
		if err != nil {
			return err
		}
		u := principal(c).Founder
		if err := h.Lifecycle.Operate(c.Request().Context(), lifecycle.Operator{ID: u.ID, Email: u.Email}, action, id); err != nil {
			return err
		}
		return redirect(c, opsPrefix+"/sandboxes/"+id.String())
	}
}

// RenderOps renders the console's live fragment, for the operators' streams.
func RenderOps(o *ops.Service) func(context.Context) (live.Message, error) {
	return func(ctx context.Context) (live.Message, error) {
		cv, err := consoleView(ctx, o, time.Now())
		if err != nil {
			return live.Message{}, err
		}
		b, err := renderBytes(ctx, views.OpsConsoleView(cv))
		return live.Message{Parts: []live.Part{{Event: views.OpsConsoleID, Data: b}}}, err
	}
}

// consoleView reads the console and writes it as the page says it.
func consoleView(ctx context.Context, o *ops.Service, now time.Time) (views.OpsConsole, error) {
	c, err := o.Console(ctx, now)
	if err != nil {
		return views.OpsConsole{}, err
	}
	f, fig, cfg := c.Fleet, c.Figures, c.Config
	v := views.OpsConsole{
		Version: now.UnixMilli(), Now: now, FoundersRunning: f.Founders, Awake: fig.Awake,
		Fleet: []views.OpsCount{
			{Label: "running", TestID: "running", N: f.Running},
			{Label: "paused (memory)", TestID: "paused-memory", N: f.PausedMemory},
			{Label: "paused (files)", TestID: "paused-files", N: f.PausedFiles},
			{Label: "starting or resuming", TestID: "busy", N: f.Starting + f.Resuming},
			{Label: "resume failed", TestID: "failed", N: f.ResumeFailed},
			{Label: "connection issue", TestID: "unknown", N: f.Unknown},
			{Label: "gone (last 24 hours)", TestID: "gone", N: f.Gone},
		},
		CostPerHour: views.Money(fig.CostPerHour), CostPerDay: views.Money(fig.CostPerDay()),
		Rates: "Rates: " + views.Money(cfg.Rates.VCPUHour) + " per vCPU-hour, " + views.Money(cfg.Rates.GiBHour) + " per GiB-hour; " +
			itoa(int(cfg.Size.VCPUs)) + " vCPUs and " + itoa(int(cfg.Size.MemoryMiB)) + " MiB unless the provider reports a sandbox's own size.",
		Charts: []views.OpsChart{
			chartView("Running previews and cost, last 24 hours", "chart-day", c.Day, time.Hour),
			chartView("Running previews and cost, last 7 days", "chart-week", c.Week, 24*time.Hour),
		},
		Health: healthView(c.Health),
	}
	for _, p := range ops.Periods {
		v.Periods = append(v.Periods, views.OpsPeriod{Label: p.Label, TestID: p.Key, Spent: views.Money(fig.Spent[p.Key]),
			Saved: views.Money(fig.Saved[p.Key]), Share: views.Percent(fig.Share(p.Key))})
	}
	a := c.Attention
	v.Stuck, v.Lost, v.Healed = itemsView(a.Stuck), itemsView(a.Lost), itemsView(a.Healed)
	for _, g := range a.Failures {
		v.Failures = append(v.Failures, views.OpsGroup{Text: g.Text, Items: itemsView(g.Items)})
	}
	for _, o := range a.Orphans {
		v.Orphans = append(v.Orphans, views.OpsOrphan{ProviderID: o.ProviderID, Kills: o.Kills, At: o.LastAt})
	}
	return v, nil
}

func itemsView(items []ops.Item) []views.OpsItem {
	out := make([]views.OpsItem, len(items))
	for i, it := range items {
		out[i] = views.OpsItem{SandboxID: it.SandboxID.String(), ProjectName: it.ProjectName, Founder: it.Founder, Text: it.Text,
			Detail: it.Detail, At: it.At}
	}
	return out
}

// chartView draws a chart's hours; its table has a row per step (an hour, or a day).
func chartView(title, testID string, points []ops.ChartPoint, step time.Duration) views.OpsChart {
	ch := views.OpsChart{Title: title, TestID: testID}
	for _, p := range points {
		ch.Points = append(ch.Points, views.OpsPoint{Hour: p.Hour, Running: p.Running, Cost: p.Cost})
	}
	per := int(step / time.Hour)
	for i := 0; i < len(points); i += per {
		chunk := points[i:min(i+per, len(points))]
		var running, cost float64
		for _, p := range chunk {
			running, cost = running+p.Running, cost+p.Cost
		}
		label := chunk[0].Hour.UTC().Format("Jan 2 15:04")
		if per > 1 {
			label = "24 h from " + label
		}
		ch.Rows = append(ch.Rows, views.OpsRow{Label: label, Running: formatRunning(running / float64(len(chunk))), Cost: views.Money(cost)})
	}
	slices.Reverse(ch.Rows) // newest first, as every list of the console
	return ch
}

func formatRunning(n float64) string { return strconv.FormatFloat(n, 'f', 1, 64) }

func healthView(h ops.Health) views.OpsHealth {
	v := views.OpsHealth{LastWebhook: "none yet", Lag: "unknown", PerMinute: strconv.FormatFloat(h.DeliveriesPerMinute, 'f', 1, 64),
		SignatureFailures: h.SignatureFailures, CaughtUp: h.CaughtUp, Corrections: h.ReconcileCorrections, Circuit: h.Client.Circuit}
	if v.Circuit == "" {
		v.Circuit = "unknown"
	}
	if w := h.LastWebhook; w != nil {
		v.LastWebhook = w.EventType + " (" + string(w.Outcome) + ")"
		v.LastWebhookAt = &w.ReceivedAt
		if h.Lag != 0 {
			v.Lag = h.Lag.Round(time.Millisecond).String()
		}
	}
	for route, n := range h.Client.Errors {
		v.Errors = append(v.Errors, views.OpsRouteErrors{Route: route, N: n})
	}
	slices.SortFunc(v.Errors, func(a, b views.OpsRouteErrors) int { return strings.Compare(a.Route, b.Route) })
	return v
}

func opsSandboxView(l views.Layout, p ops.SandboxPage, confirmKill bool) views.OpsSandboxPage {
	sb := p.Sandbox
	v := views.OpsSandboxPage{Layout: l, SandboxID: sb.ID.String(), ProviderID: "none yet", Founder: p.Founder,
		ProjectName: p.ProjectName, Status: string(sb.Status),
		Spent: views.Money(p.Spent), Saved: views.Money(p.Saved), ConfirmKill: confirmKill,
		CanPause: sb.Status == sandbox.Running || sb.Status == sandbox.Unknown, CanKill: !sb.Status.Gone()}
	if sb.ProviderID != nil {
		v.ProviderID = *sb.ProviderID
	}
	for _, e := range p.Trail {
		ev := e.Event
		v.Trail = append(v.Trail, views.OpsTrailEntry{At: ev.CreatedAt, Move: string(ev.FromStatus) + " → " + string(ev.ToStatus),
			Source: string(ev.Source), Reason: string(ev.Reason), Detail: ev.Detail, Text: e.Text})
	}
	return v
}
