package projects

import (
	"embed"
	"io/fs"
	"sort"

	"sandman/versions"
)

//go:embed all:starters
var starterFiles embed.FS

// Starter is a bundled app a founder can start a project from.
type Starter struct {
	Name           string
	Title          string
	Description    string
	InstallCommand string
	StartCommand   string
	Port           int32
	// ReloadsItself: its dev server serves changed files without a restart.
	ReloadsItself bool
}

var starters = []Starter{
	{
		Name:           "counter",
		Title:          "Visit counter",
		Description:    "A Node.js server on port 3000 that counts visits in memory.",
		InstallCommand: "npm install --offline --no-audit --no-fund",
		StartCommand:   "node server.js",
		Port:           3000,
	},
	{
		Name:          "static",
		Title:         "Static site",
		Description:   "A small landing page served by a dev server on port 5173.",
		StartCommand:  "node dev-server.js",
		Port:          5173,
		ReloadsItself: true,
	},
}

// Starters lists the bundled starters.
func Starters() []Starter { return starters }

// StarterByName finds a starter.
func StarterByName(name string) (Starter, bool) {
	for _, s := range starters {
		if s.Name == name {
			return s, true
		}
	}
	return Starter{}, false
}

// StarterFiles returns a starter's files sorted by path.
func StarterFiles(name string) ([]versions.File, error) {
	root, err := fs.Sub(starterFiles, "starters/"+name)
	if err != nil {
		return nil, err
	}
	var files []versions.File
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		files = append(files, versions.File{Path: p, Content: b})
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, err
}
