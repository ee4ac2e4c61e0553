package views

// Preview is one project's current build and sandbox as the card and the pane show them.
type Preview struct {
	ProjectID   string
	ProjectName string
	Source      string
	FileCount   int
	// SandboxID is empty before the first build.
	SandboxID    string
	Status       string // the sandbox status enum value
	Stage        string // build stage while starting
	BuildStatus  string // queued, building, ready, failed; empty before the first build
	BuildError   string
	PreviewURL   string
	FailureCause string
	Recreated    bool
	// Key is a fresh idempotency key for the Build button rendered with this fragment.
	Key string
	// EventID is the sandbox event this state follows from (the live stream's message id).
	EventID int64
}

// Fragment names one of the two places a project's preview is shown.
type Fragment string

// The fragments: one component each, rendered for the page, for htmx actions and for the live
// feed alike.
const (
	Card Fragment = "card" // the dashboard card
	Pane Fragment = "pane" // the build page's preview pane
)

// DOMID is the id of a project's fragment in the page. The same string names the SSE event that
// carries the fragment's new state (htmx-ext-sse swaps by it) and is the htmx target of the
// fragment's buttons, so views, handlers and live all take it from here.
func DOMID(f Fragment, projectID string) string { return string(f) + "-" + projectID }

// Built reports whether the project has a sandbox (a first build was started).
func (p Preview) Built() bool { return p.SandboxID != "" }

// BuildFailed reports whether the current build failed: its error is what the founder sees.
func (p Preview) BuildFailed() bool { return p.BuildStatus == "failed" }

// Building reports whether the build is under way (the build stage is shown).
func (p Preview) Building() bool { return p.Status == "starting" && !p.BuildFailed() }

// Live reports whether the preview runs: only then is the iframe shown.
func (p Preview) Live() bool { return p.Status == "running" && !p.BuildFailed() }

// Resuming reports whether a resume is under way.
func (p Preview) Resuming() bool { return p.Status == "resuming" }

// ResumeFailed reports whether the last resume failed: its cause is shown.
func (p Preview) ResumeFailed() bool { return p.Status == "resume_failed" }

// Busy reports whether something is in progress, which the spinner shows.
func (p Preview) Busy() bool { return p.Building() || p.Resuming() }

// stateCopy is the founder-facing text of each state (docs/states.md, exact copy).
type stateCopy struct {
	Heading string // build page
	Line    string // one line of explanation under the heading
	Card    string // dashboard card status
	CardSub string // card's second line
	Class   string // "ok", "sleep", "busy", "gone", "warn"
}

var states = map[string]stateCopy{
	"starting":      {Heading: "Preparing sandbox…", Line: "Creating the sandbox and starting your dev server.", Card: "Building", Class: "busy"},
	"running":       {Heading: "Live preview ready", Card: "Ready", CardSub: "Live preview ready", Class: "ok"},
	"paused":        {Heading: "Your preview is sleeping.", Line: "It was paused to save resources. Resuming takes a moment.", Card: "Ready", CardSub: "Your preview is sleeping.", Class: "sleep"},
	"resuming":      {Heading: "Resuming preview...", Line: "Waking the sandbox and checking the dev server.", Card: "Ready", CardSub: "Resuming preview...", Class: "busy"},
	"resume_failed": {Heading: "Resume failed", Card: "Ready", CardSub: "Resume failed", Class: "gone"},
	"killed":        {Heading: "Sandbox not found", Line: "The sandbox is gone. Rebuild the preview from your saved files.", Card: "Preview gone", Class: "gone"},
	"expired":       {Heading: "Sandbox expired", Line: "Its time ran out. Rebuild the preview from your saved files.", Card: "Preview expired", Class: "gone"},
	"terminated":    {Heading: "Sandbox stopped", Line: "This sandbox was stopped. Rebuild the preview from your saved files.", Card: "Preview stopped", Class: "gone"},
	"unknown":       {Heading: "Connection issue", Line: "We can't reach the sandbox provider right now to check this preview.", Card: "Ready", CardSub: "Connection issue", Class: "warn"},
}

var stageText = map[string]string{
	"":           "Queued",
	"creating":   "Creating the sandbox",
	"uploading":  "Uploading your files",
	"installing": "Installing dependencies",
	"starting":   "Starting the dev server",
	"waiting":    "Waiting for the dev server to answer",
}

func (p Preview) copy() stateCopy {
	if !p.Built() {
		return stateCopy{Heading: "Not built yet", Line: "Build the project to get a live preview.", Card: "Not built yet", CardSub: "No preview yet", Class: "sleep"}
	}
	if p.BuildFailed() {
		return stateCopy{Heading: "Build failed", Line: p.BuildError, Card: "Failed", CardSub: p.BuildError, Class: "gone"}
	}
	return states[p.Status]
}

// action names the one primary action a state offers.
func (p Preview) action() string {
	switch {
	case !p.Built():
		return "build"
	case p.BuildFailed():
		return "rebuild"
	}
	switch p.Status {
	case "paused":
		return "resume"
	case "resume_failed", "killed", "expired", "terminated":
		return "rebuild"
	case "unknown":
		return "retry"
	case "running":
		return "open"
	}
	return ""
}

func (p Preview) stage() string { return stageText[p.Stage] }
