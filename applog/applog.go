// Package applog keeps what the app in a preview said and what broke: the output of the install
// and of every dev server run, line by line, and the problems found in it and in the preview's
// page, deduplicated (docs/architecture.md, "The app's health"). It is a leaf over db, like
// versions: the watch of running dev servers (package watch) and the browser's reports feed it,
// the handlers read it.
package applog

import (
	"time"

	"github.com/google/uuid"
)

// Source says which program a line or problem came from.
type Source string

const (
	SourceInstall Source = "install" // the install command of a build
	SourceApp     Source = "app"     // a dev server run
	SourceBrowser Source = "browser" // the preview's page, as a viewer's browser reported it
)

// Stream is the output stream a line was written to.
type Stream string

const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Run names one run of a program in a preview: its project, sandbox and the version whose files
// it runs. ID tells one run from the next of the same version (a restart, a wake that started
// the server again), so a problem's detail holds its own run's lines and never an earlier one's.
type Run struct {
	ProjectID uuid.UUID
	SandboxID uuid.UUID
	Version   int32
	Source    Source
	ID        uuid.UUID
}

// Line is one line of a run's output, without its line break.
type Line struct {
	Run    Run
	Stream Stream
	At     time.Time
	Text   string
}
