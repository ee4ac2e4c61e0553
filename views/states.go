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

// stateCopy is the founder-facing text of each state (design §2, exact copy).
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
	if p.SandboxID == "" {
		return stateCopy{Heading: "Not built yet", Line: "Build the project to get a live preview.", Card: "Not built yet", CardSub: "No preview yet", Class: "sleep"}
	}
	if p.BuildStatus == "failed" {
		return stateCopy{Heading: "Build failed", Line: p.BuildError, Card: "Failed", CardSub: p.BuildError, Class: "gone"}
	}
	return states[p.Status]
}

// action names the one primary action a state offers.
func (p Preview) action() string {
	switch {
	case p.SandboxID == "":
		return "build"
	case p.BuildStatus == "failed":
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
