package views

import (
	"strconv"
	"time"

	"sandman/sandbox"
)

// The visitor's page of a share link (docs/states.md, "What a visitor of a share link sees").

// ShareStateID is the id of the visitor's page's one live element, which is also the name of
// the event of the link's stream that replaces it.
const ShareStateID = "share-state"

// ShareClosedEvent is the event that ends a visitor's stream: its link stopped working.
const ShareClosedEvent = "share-closed"

// ShareState is what a visitor sees of a shared project's preview: nothing of the founder but
// the project's name. It holds no token: the same fragment goes to every visitor of the link.
type ShareState struct {
	ProjectName string
	// State is the visitor's state; VisitorEnded when the link stopped working.
	State      sandbox.VisitorState
	PreviewURL string // while live
	ColdStart  bool   // waking from a files-only snapshot starts the app again
	EventID    int64
}

// SharePage is the visitor's page: the state, and the link's own addresses (its stream and its
// activity reports), which only this page knows.
type SharePage struct {
	State ShareState
	// Path is the link's path, /s/{token}: the page's forms post to it, its stream and its
	// activity reports hang under it.
	Path string
	// ActivityEvery is how often the page reports activity while visible (at most once a
	// minute; more often when the idle timeout is shorter than three minutes).
	ActivityEvery time.Duration
	Now           time.Time
}

// ShareMessage is a visitor's page with no preview state: a link that does not work, a request
// over its limit, an error.
type ShareMessage struct {
	Status  int
	Heading string
	Message string
	// Back is the link's page, when there is one to go back to ("" for none).
	Back string
	Now  time.Time
}

// shareCopy is the visitor's text of each state.
type shareCopy struct {
	Heading  string // with JavaScript
	NoScript string // the heading without JavaScript, when it differs (nothing wakes by itself)
	Line     string
	Icon     string
	Class    string
	Busy     bool // a spinner
	Refresh  bool // without JavaScript the page reloads itself until the state changes
	Wake     bool // the Wake preview form, sent by the page's script (or a click without it)
	TryAgain bool // the Try again form
}

// copy is the text of the state for the project.
func (s ShareState) copy() shareCopy {
	name := s.ProjectName
	asleep := "It was asleep to save resources and will be here in a moment."
	if s.ColdStart {
		asleep = "It was saved without its memory, so the app is starting again. This may take a little longer."
	}
	switch s.State {
	case sandbox.VisitorLive:
		return shareCopy{Class: "ok"}
	case sandbox.VisitorSleeping:
		if !s.ColdStart {
			asleep = "It sleeps while nobody looks at it, to save resources. Waking it takes a moment."
		}
		return shareCopy{Heading: "Waking up " + name + "…", NoScript: name + " is asleep", Line: asleep, Icon: "wake",
			Class: "busy", Busy: true, Wake: true}
	case sandbox.VisitorWaking:
		return shareCopy{Heading: "Waking up " + name + "…", Line: asleep, Icon: "wake", Class: "busy", Busy: true, Refresh: true}
	case sandbox.VisitorStarting:
		return shareCopy{Heading: "Getting " + name + " ready…", Line: "It is being built. This can take a minute or two.", Icon: "build",
			Class: "busy", Busy: true, Refresh: true}
	case sandbox.VisitorTrouble:
		return shareCopy{Heading: "We can't reach this preview right now.", Line: "Its host isn't answering. Try again in a moment.",
			Icon: "warn", Class: "warn", TryAgain: true}
	case sandbox.VisitorBroken:
		// Nothing of why: no provider id, no output, no file name (those are the founder's).
		return shareCopy{Heading: "This preview isn't working right now.", Line: "Its maker can see why.", Icon: "broken", Class: "warn"}
	case sandbox.VisitorUpdating:
		return shareCopy{Heading: "Starting the latest version…", Line: "The new version of " + name + " will be here in a moment.", Icon: "build",
			Class: "busy", Busy: true, Refresh: true}
	case sandbox.VisitorEnded:
		return shareCopy{Heading: "This link doesn't work anymore.", Line: "Ask the person who shared it for a new link.", Icon: "stopped", Class: "gone"}
	}
	return shareCopy{Heading: "This preview isn't available right now.", Line: "Ask the person who shared it to rebuild it.", Icon: "gone", Class: "gone"}
}

// Live reports whether the preview runs: the page is the preview.
func (s ShareState) Live() bool { return s.State == sandbox.VisitorLive }

// Refresh reports whether the page, without JavaScript, reloads itself to follow the state.
func (s ShareState) Refresh() bool { return s.copy().Refresh }

func (s ShareState) frameID() string { return "share-frame-" + strconv.FormatInt(s.EventID, 10) }

// ShareBox is the build page's share section for the founder.
type ShareBox struct {
	ProjectID string
	// On: the project has a link. URL is it, when it can be shown (empty: made with another
	// SANDMAN_SHARE_KEY, or none is set now).
	On        bool
	URL       string
	CreatedAt time.Time
	// Enabled: the operator set SANDMAN_SHARE_KEY, so links can be made.
	Enabled bool
	CSRF    string
	Now     time.Time
}

// ShareBoxID is the id of a project's share section on its build page.
func ShareBoxID(projectID string) string { return "share-" + projectID }
