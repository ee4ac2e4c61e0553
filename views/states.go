package views

import (
	"fmt"
	"strconv"
	"time"

	"sandman/sandbox"
)

// Preview is one project's current build and sandbox as the card and the pane show them.
type Preview struct {
	ProjectID   string
	ProjectName string
	Source      string
	FileCount   int
	// SandboxID and BuildID are empty before the first build.
	SandboxID    string
	BuildID      string
	Status       sandbox.Status
	Stage        string              // build stage while starting
	BuildStatus  sandbox.BuildStatus // empty before the first build
	BuildError   string
	PreviewURL   string
	FailureCause string
	SnapshotKind sandbox.PauseKind // while paused
	Recreated    bool
	// Why is the sentence of the sandbox's newest event (why it is in its state), and WhyAt
	// when it happened.
	Why   string
	WhyAt time.Time
	// SleepsAt is when a running preview is paused unless someone looks at it; IdleFor is the
	// configured idle timeout as text ("3 min").
	SleepsAt time.Time
	IdleFor  string
	// EventID is the sandbox event this state follows from (the live stream's message id).
	EventID int64
	// Now is the render's clock (relative times and countdowns).
	Now time.Time
	// CSRF is the session's token for the forms' hidden field, which only a browser without
	// JavaScript needs. Fragments for the live feed leave it empty: htmx sends the header.
	CSRF string
	// Shared: the project's share link is on (the card says so).
	Shared bool
	// Version is the project's version the preview runs, Waiting a newer one not yet applied
	// (0: none), Applying the one being applied now (0: none). FailedVersion is a version whose
	// dev server did not start (its Why says what it printed), RestoreTo the one before it.
	Version, Waiting, Applying, FailedVersion, RestoreTo int32
	// AppDown: the sandbox runs but its app does not (exited, or not answering): the preview
	// is not live, whatever the sandbox says (docs/states.md, "The app"). ProblemMessage and
	// ProblemDetail are its problem (the detail keeps its lines).
	AppDown                       bool
	DownVersion                   int32 // the version whose app does not start
	ProblemMessage, ProblemDetail string
	// OpenProblems is how many of the project's problems are open (the card shows it).
	OpenProblems int64
}

// doesNotStart is the sentence of a version whose app does not start.
func (p Preview) doesNotStart() string {
	n := p.DownVersion
	if n == 0 {
		n = p.Version
	}
	return "Version " + itoa32(n) + " doesn't start"
}

// problemsText is the card's count of open problems.
func (p Preview) problemsText() string {
	if p.OpenProblems == 1 {
		return "1 open problem"
	}
	return strconv.FormatInt(p.OpenProblems, 10) + " open problems"
}

// versionTag is the card's "v8".
func (p Preview) versionTag() string {
	if p.Version == 0 {
		return ""
	}
	return "v" + strconv.Itoa(int(p.Version))
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

// CreditsEvent names the stream's event that carries the founder's balance (Credits).
const CreditsEvent = "credits"

// HistoryID is the id of a project's history on its build page, which the pane's message
// replaces out of band.
func HistoryID(projectID string) string { return "history-" + projectID }

// ReturnPath is the page a fragment's forms go back to without JavaScript.
func ReturnPath(f Fragment, projectID string) string {
	if f == Card {
		return "/"
	}
	return "/projects/" + projectID
}

// Built reports whether the project has a sandbox (a first build was started).
func (p Preview) Built() bool { return p.SandboxID != "" }

// BuildFailed reports whether the current build failed: its error is what the founder sees.
func (p Preview) BuildFailed() bool { return p.BuildStatus == sandbox.BuildFailed }

// Building reports whether the build is under way (the build stage is shown).
func (p Preview) Building() bool { return p.Status == sandbox.Starting && !p.BuildFailed() }

// Live reports whether the preview runs and its app with it: only then is the iframe shown.
func (p Preview) Live() bool { return p.Status == sandbox.Running && !p.BuildFailed() && !p.AppDown }

// Broken reports whether the sandbox runs an app that does not start.
func (p Preview) Broken() bool { return p.Status == sandbox.Running && !p.BuildFailed() && p.AppDown }

// Resuming reports whether a resume is under way.
func (p Preview) Resuming() bool { return p.Status == sandbox.Resuming }

// ResumeFailed reports whether the last resume failed: its cause is shown.
func (p Preview) ResumeFailed() bool { return p.Status == sandbox.ResumeFailed && !p.BuildFailed() }

// Busy reports whether something is in progress, which the spinner shows.
func (p Preview) Busy() bool { return p.Building() || p.Resuming() }

// IdempotencyKey is the key the Build or Rebuild form sends. It names what the request is
// about (the project's first build, or replacing this build), so a double submit of one form,
// or the same question answered in two tabs, charges once, while the next rebuild (of the
// build this one makes) is a new key.
func (p Preview) IdempotencyKey() string {
	if !p.Built() {
		return "build-" + p.ProjectID
	}
	return "rebuild-" + p.BuildID
}

// stateCopy is the founder-facing text of each state (docs/states.md, exact copy).
type stateCopy struct {
	Heading string // build page
	Line    string // one line of explanation under the heading
	Card    string // dashboard card status
	CardSub string // card's second line
	Class   string // "ok", "sleep", "busy", "gone", "warn": the colour, never the only signal
	Icon    string // the state's icon (icons.templ)
}

var states = map[sandbox.Status]stateCopy{
	sandbox.Starting:     {Heading: "Preparing sandbox…", Card: "Building", Class: "busy", Icon: "build"},
	sandbox.Running:      {Heading: "Live preview ready", Card: "Ready", CardSub: "Live preview ready", Class: "ok", Icon: "live"},
	sandbox.Paused:       {Heading: "Your preview is sleeping.", Card: "Ready", CardSub: "Your preview is sleeping.", Class: "sleep", Icon: "sleep"},
	sandbox.Resuming:     {Heading: "Resuming preview...", Line: "Waking the sandbox and checking the dev server.", Card: "Ready", CardSub: "Resuming preview...", Class: "busy", Icon: "wake"},
	sandbox.ResumeFailed: {Heading: "Resume failed", Card: "Ready", CardSub: "Resume failed", Class: "gone", Icon: "failed"},
	sandbox.Killed:       {Heading: "Sandbox not found", Line: "The sandbox is gone. Rebuild the preview from your saved files.", Card: "Preview gone", Class: "gone", Icon: "gone"},
	sandbox.Expired:      {Heading: "Sandbox expired", Line: "Every sandbox has a time limit. Rebuild the preview from your saved files.", Card: "Preview expired", Class: "gone", Icon: "expired"},
	sandbox.Terminated:   {Heading: "Sandbox stopped", Line: "This sandbox was stopped. Rebuild the preview from your saved files.", Card: "Preview stopped", Class: "gone", Icon: "stopped"},
	sandbox.Unknown:      {Heading: "Connection issue", Line: "We can't reach the sandbox provider right now to check this preview.", Card: "Ready", CardSub: "Connection issue", Class: "warn", Icon: "warn"},
}

var (
	notBuilt    = stateCopy{Heading: "Not built yet", Line: "Build the project to get a live preview.", Card: "Not built yet", CardSub: "No preview yet", Class: "sleep", Icon: "new"}
	buildFailed = stateCopy{Heading: "Build failed", Card: "Failed", Class: "gone", Icon: "broken"}
)

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
		return notBuilt
	}
	if p.BuildFailed() {
		// The build's error is its line (the failed command and its output, or why the credit
		// was refunded), on the card too.
		c := buildFailed
		c.Line, c.CardSub = p.BuildError, p.BuildError
		return c
	}
	if p.Broken() {
		// Never "ready" or "Live": the sandbox runs, the founder's code does not.
		return stateCopy{Heading: p.doesNotStart(), Line: p.ProblemMessage, Card: "Doesn't start", CardSub: p.doesNotStart(),
			Class: "gone", Icon: "broken"}
	}
	return states[p.Status]
}

// line is the pane's explanation under the heading: the build stage while building, the cause
// of a failed resume, else the state's own line.
func (p Preview) line() string {
	switch {
	case p.Building():
		return p.stage()
	case p.ResumeFailed():
		return p.FailureCause
	}
	return p.copy().Line
}

// cardSub is the card's second line: the build stage while building, else the state's.
func (p Preview) cardSub() string {
	if p.Building() {
		return p.stage()
	}
	return p.copy().CardSub
}

// showWhy reports whether the newest event's sentence is shown: for a sleeping or gone preview,
// whose cause varies (idle, the founder, the provider…); other states say theirs already.
func (p Preview) showWhy() bool {
	if p.Why == "" || !p.Built() || p.BuildFailed() {
		return false
	}
	switch p.Status {
	case sandbox.Paused, sandbox.Killed, sandbox.Expired, sandbox.Terminated:
		return true
	}
	return false
}

func (p Preview) stage() string { return stageText[p.Stage] }

// Costs shown beside the actions.
const (
	costCredit       = "1 credit"
	costResumeMemory = "Free · about a second"
	costResumeFiles  = "Free · restarts the dev server"
)

// control is one action of a fragment: a form that posts (htmx enhances it, a browser without
// JavaScript posts it and is sent back), the rebuild's question, or a link.
type control struct {
	Kind    string // "post", "restore", "rebuild", "open", "copy", "waiting"
	Path    string // what the form posts to, or the link
	Label   string
	TestID  string
	Cost    string
	Key     string // the idempotency key a build form sends
	Primary bool
}

// controls are the fragment's actions, in order (docs/states.md: the one action of each state).
func (p Preview) controls() []control {
	rebuild := control{Kind: "rebuild", Path: "/projects/" + p.ProjectID + "/rebuild", Label: "Rebuild", TestID: "rebuild", Cost: costCredit, Primary: true}
	sb := "/sandboxes/" + p.SandboxID
	switch {
	case !p.Built():
		return []control{{Kind: "post", Path: "/projects/" + p.ProjectID + "/build", Label: "Build", TestID: "build",
			Cost: costCredit, Key: p.IdempotencyKey(), Primary: true}}
	case p.BuildFailed():
		return []control{rebuild}
	}
	switch p.Status {
	case sandbox.Paused:
		return []control{{Kind: "post", Path: sb + "/resume", Label: "Resume preview", TestID: "resume", Cost: p.resumeCost(), Primary: true}}
	case sandbox.Resuming:
		return []control{{Kind: "waiting", Label: "Resume preview", TestID: "resume", Primary: true}}
	case sandbox.ResumeFailed, sandbox.Killed, sandbox.Expired, sandbox.Terminated:
		return []control{rebuild}
	case sandbox.Unknown:
		return []control{{Kind: "post", Path: sb + "/verify", Label: "Retry", TestID: "retry"}, rebuild}
	case sandbox.Running:
		if p.AppDown {
			// The founder's code does not start: the way out is the last good version (free),
			// never a rebuild, which builds the same files.
			var out []control
			if p.RestoreTo != 0 {
				out = append(out, control{Kind: "restore", Path: versionPath(p.ProjectID, p.RestoreTo) + "/restore",
					Label: "Restore version " + itoa32(p.RestoreTo), TestID: "restore-previous", Cost: "Free", Primary: true})
			}
			return append(out, control{Kind: "post", Path: sb + "/pause", Label: "Pause", TestID: "pause"})
		}
		return []control{
			{Kind: "open", Path: p.PreviewURL, Label: "Open", TestID: "open"},
			{Kind: "copy", Path: p.PreviewURL, Label: "Copy URL", TestID: "copy-url"},
			{Kind: "post", Path: sb + "/pause", Label: "Pause", TestID: "pause"},
		}
	}
	return nil
}

// keepAwake is the running card's action beside its countdown.
func (p Preview) keepAwake() control {
	return control{Kind: "post", Path: "/sandboxes/" + p.SandboxID + "/keep-awake", Label: "Keep awake", TestID: "keep-awake"}
}

// resumeCost is what resuming costs: nothing, and a memory snapshot is back at once while a
// files-only snapshot boots and starts the dev server again.
func (p Preview) resumeCost() string {
	if p.SnapshotKind == sandbox.PauseFilesystem {
		return costResumeFiles
	}
	return costResumeMemory
}

// agoText is how long ago at was, as the history and the card say it ("2 min ago").
// static/js/app.js keeps it current with the same rule.
func agoText(at, now time.Time) string {
	d := now.Sub(at)
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", d/time.Minute)
	case d < 24*time.Hour:
		return fmt.Sprintf("%d h ago", d/time.Hour)
	}
	return fmt.Sprintf("%d d ago", d/(24*time.Hour))
}

// sleepsInText is the running card's countdown to its idle pause, in whole minutes left
// (rounded down: it never sleeps sooner than it says). static/js/app.js counts it down with the
// same rule.
func sleepsInText(at, now time.Time) string {
	d := at.Sub(now)
	if d < time.Minute {
		return "Sleeping in less than a minute"
	}
	return fmt.Sprintf("Sleeping in %d min", d/time.Minute)
}

// exactTime is an instant for the datetime attribute; exactText is how the page writes it
// before its script rewrites it in the browser's time zone.
func exactTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }
func exactText(t time.Time) string { return t.UTC().Format("2 Jan 2006, 15:04:05 UTC") }

// exactDay is a day as the pages write it ("24 Nov 2026").
func exactDay(t time.Time) string { return t.UTC().Format("2 Jan 2006") }

// expiryText says when a token that has not expired will.
func (t APIToken) expiryText() string {
	if t.ExpiresAt == nil {
		return "Never expires."
	}
	return "Expires " + exactDay(*t.ExpiresAt) + "."
}
