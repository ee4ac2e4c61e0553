// Package views renders Sandman's pages and fragments with templ. Components take typed view
// models built by the handlers and never query anything themselves. A view model holds every
// value its markup shows, the render's clock included, so one model always renders the same.
package views

import (
	"time"

	"sandman/sandbox"
)

// Layout is what every full page needs.
type Layout struct {
	Title string
	CSRF  string
	User  *User // nil when logged out
	// Now is the server's clock at render: the page's scripts count relative times and
	// countdowns from it, whatever the browser's clock says.
	Now time.Time
}

// User is the logged-in founder as the header shows them.
type User struct {
	ID      string
	Email   string
	Credits int32
}

// AuthPage is the log-in or sign-up form.
type AuthPage struct {
	Layout
	SignUp bool
	Email  string
	Errors map[string]string
	// Message is a form-level error (bad credentials, rate limit).
	Message string
}

// DashboardPage lists the founder's projects.
type DashboardPage struct {
	Layout
	Projects []Preview
	Usage    Usage
}

// Usage is what a founder stores and may store (README, "Limits"): the bytes of their unique
// content against the storage quota, and their projects against the project limit.
type Usage struct {
	Stored, Quota      string // sizes as people read them ("12.3 MiB", "1 GiB")
	Percent            int    // of the quota, 0 to 100
	Projects, MaxProjs int
}

// ProjectPage shows one project: its preview pane, history, settings and files.
type ProjectPage struct {
	Layout
	Preview        Preview
	Share          ShareBox
	History        History
	InstallCommand string
	StartCommand   string
	Port           int32
	PauseKind      sandbox.PauseKind
	// ReloadsItself is the reload choice: the dev server reloads changed files itself, or is
	// restarted on each new version.
	ReloadsItself bool
	// PreviewReporter is the switch of the preview's error reporter: on, the page's errors
	// become the app's browser problems.
	PreviewReporter bool
	Files           []File
	Versions        Versions
	Health          AppHealth
	Env             EnvVars
}

// AppHealth is the build page's Logs panel and Problems list (docs/states.md, "The app").
type AppHealth struct {
	ProjectID string
	// Lines are the newest lines, oldest first; the page's script follows the log stream after
	// the last (its Seq).
	Lines    []LogLine
	Problems []ProblemRow
	Now      time.Time
}

// LogLine is one line the app or its install printed. Its text is data, drawn as text.
type LogLine struct {
	Seq            int64
	At             time.Time
	Version        int32
	Source, Stream string
	Text           string
}

// ProblemRow is one problem with its text for the builder's AI.
type ProblemRow struct {
	ID, Source, Message, Detail string
	Version                     int32
	Count                       int64
	LastSeen                    time.Time
	Open                        bool
	AIText                      string
}

// Versions is the build page's Versions section: newest first.
type Versions struct {
	ProjectID string
	CSRF      string
	Now       time.Time
	// Live is the version the preview runs (0 without a preview), Current the newest.
	Live, Current int32
	// DoesNotStart: the app of the Live version does not start (it is never marked live).
	DoesNotStart bool
	Rows         []VersionRow
	// More: older versions exist than the rows shown.
	More bool
}

// VersionRow is one version as the founder reads it.
type VersionRow struct {
	Number                  int32
	At                      time.Time
	Source                  string // "Created", "Uploaded by you", "From the API", "Restored from version 3"
	Message                 string
	Added, Changed, Removed int32
}

// VersionPage is a version's changes against its parent, file by file.
type VersionPage struct {
	Layout
	ProjectID, ProjectName string
	Version                VersionRow
	Current                int32
	Files                  []FileChange
	// More is how many changed files are past the page's bounds, not listed.
	More int
}

// FileChange is one file a version changed: its unified diff for text, or Binary. Folded: the
// change, or the rest of it after Lines, is too large to show on the page.
type FileChange struct {
	Path   string
	Kind   string // added, changed, removed
	Binary bool
	Folded bool
	Lines  []DiffLine
}

// DiffLine is one line of a unified diff: Kind is add, del, hunk or ctx.
type DiffLine struct {
	Kind, Text string
}

// UploadVersionPage is the form that makes a version from the browser, and its errors.
type UploadVersionPage struct {
	Layout
	ProjectID, ProjectName string
	Current                int32
	Message                string
	Errors                 map[string]string
	FileErrors             []FileError
}

// File is one stored file of a project.
type File struct {
	Path string
	Size string
}

// NewProjectPage offers the starters and the upload form.
type NewProjectPage struct {
	Layout
	Starters []Starter
	Form     NewProjectForm
	Errors   map[string]string
	// FileErrors are the per-file messages of a rejected upload.
	FileErrors []FileError
}

// Starter is a bundled starter as the form offers it.
type Starter struct {
	Name, Title, Description string
}

// NewProjectForm echoes what the founder typed after a rejected submission.
type NewProjectForm struct {
	Name           string
	InstallCommand string
	StartCommand   string
	Port           string
	PauseKind      sandbox.PauseKind
}

// FileError is one rejected file of an upload.
type FileError struct {
	Path    string
	Message string
}

// ErrorPage explains a failed request.
type ErrorPage struct {
	Layout
	Status  int
	Heading string
	Message string
}

// History is a project's recent changes, newest first, on its build page.
type History struct {
	ProjectID string
	Entries   []HistoryEntry
	Now       time.Time // the render's clock, for "2 min ago"
}

// HistoryEntry is one change: when, and the sentence that names its cause.
type HistoryEntry struct {
	At   time.Time
	Text string
	// Files are the files the change names (a heal's restored files), listed under the
	// sentence in a details element.
	Files []string
}

// RebuildQuestion asks before a rebuild spends a credit: in the dialog (JavaScript) or on a
// page of its own (without).
type RebuildQuestion struct {
	ProjectID string
	// Target is the fragment the answer replaces (DOMID of the card or the pane).
	Target string
	// Return is where a form without JavaScript goes back to (a path of Sandman's).
	Return  string
	Key     string // the rebuild's idempotency key (Preview.IdempotencyKey)
	CSRF    string
	Credits int32
	// NotStarting is the version whose app does not start (0: it starts): a rebuild builds the
	// same files, so the question warns, and names RestoreTo (the last good version, 0: none).
	NotStarting, RestoreTo int32
}

// RebuildPage is the rebuild's confirmation without JavaScript.
type RebuildPage struct {
	Layout
	ProjectName string
	Question    RebuildQuestion
}

// TokensPage is the founder's API tokens: the form that makes one, the one just made (shown this
// once), and the list.
type TokensPage struct {
	Layout
	Form   TokenForm
	Errors map[string]string
	// Made is the token just made, with its secret; nil on any other view of the page.
	Made   *MadeToken
	Tokens []APIToken
	// Revoked says a token was just revoked.
	Revoked bool
}

// TokenForm is what the form was sent with, to show it again with its errors.
type TokenForm struct {
	Name string
	// Expiry is the chosen option: "30", "90", "365" or "never".
	Expiry string
}

// MadeToken is a token just made: the only time its secret is shown.
type MadeToken struct {
	Name, Secret string
}

// APIToken is one of the founder's tokens as the list shows it: never its secret.
type APIToken struct {
	ID, Name, Prefix string
	CreatedAt        time.Time
	ExpiresAt        *time.Time
	Expired          bool
	LastUsedAt       *time.Time
	LastUsedFrom     string
}

// EnvVars is the build page's section of environment variables.
type EnvVars struct {
	ProjectID string
	CSRF      string
	SecretsOn bool
	Vars      []EnvVar
	// Form and Errors are a refused form's (its value is never sent back).
	Form   EnvForm
	Errors map[string]string
}

// EnvVar is one variable: a secret's Value is always empty.
type EnvVar struct {
	Name, Value string
	Secret      bool
	SetAgo      string
	Used        bool
}

// EnvForm is what the add form was sent with.
type EnvForm struct {
	Name   string
	Secret bool
}

// EnvPage is the variables alone, a refused form's answer.
type EnvPage struct {
	Layout
	ProjectName string
	Env         EnvVars
}

// WebhooksPage is the founder's outgoing webhooks: the form that adds an endpoint, the secret
// just made or rotated (shown this once), and each endpoint with its recent deliveries.
type WebhooksPage struct {
	Layout
	Form   WebhookForm
	Errors map[string]string
	// Secret is an endpoint's secret just made or rotated; nil on any other view of the page.
	Secret    *WebhookSecret
	Endpoints []WebhookEndpoint
	// Types are the event types the form offers; Max the most endpoints one may have.
	Types []string
	Max   int
	// Done names the action just done ("test", "enabled", "deleted", "retried"), for its note.
	Done string
}

// WebhookForm is what the form was sent with, to show it again with its errors.
type WebhookForm struct {
	URL, Description string
	Events           []string
}

// WebhookSecret is an endpoint's signing secret, the only time it is shown.
type WebhookSecret struct {
	URL, Secret string
	Rotated     bool
}

// WebhookEndpoint is one endpoint as the page shows it: never its secret.
type WebhookEndpoint struct {
	ID, URL, Description string
	Events               []string
	Enabled              bool
	// Failing: Sandman turned it off after 3 days of failed deliveries.
	Failing    bool
	CreatedAt  time.Time
	Deliveries []WebhookDelivery
}

// WebhookDelivery is one event sent to an endpoint, with its last attempt.
type WebhookDelivery struct {
	ID, EventType, State string
	Attempts             int32
	StatusCode           int32
	Error                string
	AttemptedAt          *time.Time
	CreatedAt            time.Time
}
