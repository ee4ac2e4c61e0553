package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// OpsConsoleID is the console's fragment: its id and the name of the stream's event that
// replaces it (docs/operations.md).
const OpsConsoleID = "ops-console"

// OpsPage is the operator's console.
type OpsPage struct {
	Layout
	Console OpsConsole
}

// OpsConsole is everything the console shows, as text: the fragment the stream redraws.
type OpsConsole struct {
	// Version orders the fragments (a render's time in milliseconds): an older one never
	// replaces a newer one (data-event-id).
	Version         int64
	Now             time.Time
	Fleet           []OpsCount
	FoundersRunning int64
	Awake           int64
	CostPerHour     string
	CostPerDay      string
	Rates           string
	Periods         []OpsPeriod
	Charts          []OpsChart
	Stuck           []OpsItem
	Failures        []OpsGroup
	Lost            []OpsItem
	Healed          []OpsItem
	Orphans         []OpsOrphan
	Health          OpsHealth
}

// NothingNeedsAHand reports whether every list of the "needs a hand" section is empty.
func (c OpsConsole) NothingNeedsAHand() bool {
	return len(c.Stuck)+len(c.Failures)+len(c.Lost)+len(c.Healed)+len(c.Orphans) == 0
}

// OpsCount is one state of the fleet.
type OpsCount struct {
	Label  string
	TestID string
	N      int64
}

// OpsPeriod is one period's money.
type OpsPeriod struct {
	Label, TestID       string
	Spent, Saved, Share string
}

// OpsItem is one preview that needs a hand.
type OpsItem struct {
	SandboxID   string
	ProjectName string
	Founder     string
	Text        string
	Detail      string
	At          time.Time
}

// OpsGroup is the failures of one cause.
type OpsGroup struct {
	Text  string
	Items []OpsItem
}

// OpsOrphan is a provider sandbox the reconcile killed: how many times in the window, and the last.
type OpsOrphan struct {
	ProviderID string
	Kills      int64
	At         time.Time
}

// OpsHealth is the provider's health as the console says it.
type OpsHealth struct {
	LastWebhook       string // "none yet" or its type and time
	LastWebhookAt     *time.Time
	Lag               string
	PerMinute         string
	SignatureFailures int64
	CaughtUp          int64
	Corrections       int64
	Circuit           string
	Errors            []OpsRouteErrors
}

// OpsRouteErrors is the provider calls that failed on one route.
type OpsRouteErrors struct {
	Route string
	N     int64
}

// OpsChart is a chart of running previews and cost per hour, with its table.
type OpsChart struct {
	Title, TestID string
	Points        []OpsPoint
	// Rows is the text table beside the chart (an hour each, or a day each for a week).
	Rows []OpsRow
}

// OpsPoint is one hour of a chart.
type OpsPoint struct {
	Hour    time.Time
	Running float64
	Cost    float64
}

// OpsRow is one line of a chart's table.
type OpsRow struct {
	Label, Running, Cost string
}

// The chart's drawing box, in SVG units.
const (
	chartW, chartH = 720.0, 200.0
	chartPad       = 24.0
)

func (c OpsChart) maxes() (running, cost float64) {
	for _, p := range c.Points {
		running, cost = max(running, p.Running), max(cost, p.Cost)
	}
	return max(running, 1), max(cost, 0.0001)
}

// Bar is one hour's cost bar.
type Bar struct{ X, Y, W, H string }

// CostBars are the bars of cost per hour.
func (c OpsChart) CostBars() []Bar {
	_, maxCost := c.maxes()
	w := (chartW - 2*chartPad) / float64(max(len(c.Points), 1))
	out := make([]Bar, len(c.Points))
	for i, p := range c.Points {
		h := p.Cost / maxCost * (chartH - 2*chartPad)
		out[i] = Bar{X: num(chartPad + float64(i)*w), Y: num(chartH - chartPad - h), W: num(max(w-1, 0.5)), H: num(h)}
	}
	return out
}

// RunningLine is the polyline of running previews.
func (c OpsChart) RunningLine() string {
	maxRunning, _ := c.maxes()
	w := (chartW - 2*chartPad) / float64(max(len(c.Points), 1))
	var b strings.Builder
	for i, p := range c.Points {
		if i > 0 {
			b.WriteByte(' ')
		}
		y := chartH - chartPad - p.Running/maxRunning*(chartH-2*chartPad)
		b.WriteString(num(chartPad+(float64(i)+0.5)*w) + "," + num(y))
	}
	return b.String()
}

// Scale says what the chart's top stands for.
func (c OpsChart) Scale() string {
	maxRunning, maxCost := c.maxes()
	return fmt.Sprintf("Top of the chart: %s running previews, %s per hour.", strconv.FormatFloat(maxRunning, 'f', 1, 64), Money(maxCost))
}

// ViewBox is the chart's SVG viewBox.
func (OpsChart) ViewBox() string { return "0 0 " + num(chartW) + " " + num(chartH) }

// Baseline is the y of the chart's axis.
func (OpsChart) Baseline() string { return num(chartH - chartPad) }

// AxisEnd is the x where the axis ends.
func (OpsChart) AxisEnd() string { return num(chartW - chartPad) }

// PadText is the x where the axis starts.
func (OpsChart) PadText() string { return num(chartPad) }

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// Money writes US dollars as the console shows them: cents for amounts of a dollar or more,
// tenths of a cent below (one preview's hour costs about $0.11).
func Money(v float64) string {
	switch {
	case v >= 1000:
		return "$" + strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 1:
		return "$" + strconv.FormatFloat(v, 'f', 2, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 4, 64)
}

// countText is n with the word for one or for many.
func countText(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

// Percent writes a share as the console shows it.
func Percent(share float64) string { return strconv.FormatFloat(share*100, 'f', 0, 64) + " %" }

// OpsSandboxPage is the console's page of one preview.
type OpsSandboxPage struct {
	Layout
	SandboxID   string
	ProviderID  string
	Founder     string
	ProjectName string
	Status      string
	Spent       string
	Saved       string
	Trail       []OpsTrailEntry
	// CanPause and CanKill offer the actions the state allows.
	CanPause, CanKill bool
	// ConfirmKill is the page that asks before a kill (without JavaScript; with it, the same
	// question in a dialog).
	ConfirmKill bool
}

// KillQuestion is what the kill's confirmation asks, naming the founder and the project.
func (p OpsSandboxPage) KillQuestion() string {
	return fmt.Sprintf("Kill %s's preview of %s? The sandbox is stopped at once and its snapshot is lost; the founder sees \"Stopped by an operator\" and can rebuild it.",
		p.Founder, p.ProjectName)
}

// OpsTrailEntry is one event of the preview's trail.
type OpsTrailEntry struct {
	At     time.Time
	Move   string // from → to
	Source string
	Reason string
	Detail string
	Text   string
}
