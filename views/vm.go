// Package views renders Sandman's pages and fragments with templ. Components take typed view
// models built by the handlers and never query anything themselves.
package views

// Layout is what every full page needs.
type Layout struct {
	Title string
	CSRF  string
	User  *User // nil when logged out
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
}

// ProjectPage shows one project: its preview pane, settings and files.
type ProjectPage struct {
	Layout
	Preview        Preview
	InstallCommand string
	StartCommand   string
	Port           int32
	PauseKind      string
	Files          []File
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
	PauseKind      string
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
