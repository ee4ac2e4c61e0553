// Package projects owns founders' projects: their settings, the bundled starters and reading
// uploaded zip archives. A project's files are its versions' (package versions).
package projects

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/apperr"
	"sandman/db"
	"sandman/sandbox"
	"sandman/versions"
)

// Service creates and reads projects. Every read takes the owner, so another founder's project
// is not found.
type Service struct {
	pool  *pgxpool.Pool
	q     *db.Queries
	limit int   // projects per founder
	quota int64 // bytes of unique content per founder (versions.DefaultQuota)
}

// DefaultLimit is how many projects a founder may have when the operator sets no limit
// (README, "Limits").
const DefaultLimit = 100

// New returns a Service with the default project limit and storage quota.
func New(pool *pgxpool.Pool) *Service {
	return &Service{pool: pool, q: db.New(pool), limit: DefaultLimit, quota: versions.DefaultQuota}
}

// WithLimits sets how many projects a founder may have (SANDMAN_PROJECT_LIMIT) and the bytes of
// unique content they may store (SANDMAN_STORAGE_QUOTA); a zero keeps its default.
func (s *Service) WithLimits(projects int, quota int64) *Service {
	if projects > 0 {
		s.limit = projects
	}
	if quota > 0 {
		s.quota = quota
	}
	return s
}

// Limit is how many projects one founder may have.
func (s *Service) Limit() int { return s.limit }

// Settings are what a founder chooses for a project.
type Settings struct {
	Name           string
	InstallCommand string
	StartCommand   string
	Port           int32
	PauseKind      sandbox.PauseKind
	// ReloadsItself: the dev server reloads changed files itself, so a new version is not
	// restarted (docs/states.md, "Versions").
	ReloadsItself bool
}

// Validate returns a message per field that breaks a rule.
func (s *Settings) Validate() map[string]string {
	errs := map[string]string{}
	s.Name = strings.TrimSpace(s.Name)
	s.InstallCommand = strings.TrimSpace(s.InstallCommand)
	s.StartCommand = strings.TrimSpace(s.StartCommand)
	if s.PauseKind == "" {
		s.PauseKind = sandbox.PauseMemory
	}
	if n := utf8.RuneCountInString(s.Name); n == 0 || n > 100 || len(s.Name) > 100 {
		errs["name"] = "Give the project a name of 1 to 100 characters."
	}
	if s.StartCommand == "" {
		errs["start_command"] = "Enter the command that starts the dev server, like \"npm run dev\"."
	} else if len(s.StartCommand) > 1000 {
		errs["start_command"] = "Keep the command under 1000 characters."
	}
	if len(s.InstallCommand) > 1000 {
		errs["install_command"] = "Keep the command under 1000 characters."
	}
	if s.Port < 1 || s.Port > 65535 || s.Port == 49983 {
		errs["port"] = "Enter the dev server's port, a number from 1 to 65535 (49983 is reserved)."
	}
	if !s.PauseKind.Valid() {
		errs["pause_kind"] = "Choose memory or filesystem."
	}
	return errs
}

// CreateFromStarter copies a bundled starter into a new project.
func (s *Service) CreateFromStarter(ctx context.Context, owner uuid.UUID, name, starter string) (db.Project, error) {
	st, ok := StarterByName(starter)
	if !ok {
		return db.Project{}, apperr.Invalid(map[string]string{"starter": fmt.Sprintf("Unknown starter %q; choose one of the listed starters.", starter)})
	}
	if strings.TrimSpace(name) == "" {
		name = st.Title
	}
	files, err := StarterFiles(st.Name)
	if err != nil {
		return db.Project{}, err
	}
	set := Settings{Name: name, InstallCommand: st.InstallCommand, StartCommand: st.StartCommand, Port: st.Port, ReloadsItself: st.ReloadsItself}
	return s.create(ctx, owner, &st.Name, set, files, nil)
}

// CreateFromFiles stores uploaded files as a new project. Errors found while reading the
// upload (readErrs) are reported with the rule checks, and nothing is stored if there are any.
func (s *Service) CreateFromFiles(ctx context.Context, owner uuid.UUID, set Settings, files []versions.File, readErrs []versions.FileError) (db.Project, error) {
	return s.create(ctx, owner, nil, set, files, readErrs)
}

func (s *Service) create(ctx context.Context, owner uuid.UUID, starter *string, set Settings, files []versions.File, readErrs []versions.FileError) (db.Project, error) {
	if err := versions.InvalidFiles(set.Validate(), append(readErrs, versions.CheckFiles(files)...)); err != nil {
		return db.Project{}, err
	}
	var p db.Project
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		// The founder's storage lock serialises their new projects too, so the count holds
		// when two are made at once.
		if _, err := versions.LockStorage(ctx, tx, owner); err != nil {
			return err
		}
		n, err := tx.CountProjectsByOwner(ctx, owner)
		if err != nil {
			return err
		}
		if int(n) >= s.limit {
			return apperr.New(apperr.KindConflict, codeProjectLimit, fmt.Sprintf(
				"You have %d projects, the most one account may have: nothing was created. Make a new version of a project you have instead.", n))
		}
		p, err = tx.InsertProject(ctx, db.InsertProjectParams{
			OwnerID: owner, Name: set.Name, Starter: starter, InstallCommand: set.InstallCommand,
			StartCommand: set.StartCommand, Port: set.Port, PauseKind: set.PauseKind, ReloadsItself: set.ReloadsItself,
		})
		if err != nil {
			return err
		}
		_, err = versions.CreateFirst(ctx, tx, owner, p.ID, files, s.quota)
		return err
	})
	return p, err
}

// Get returns the owner's project, or a not-found error.
func (s *Service) Get(ctx context.Context, owner, id uuid.UUID) (db.Project, error) {
	p, err := s.q.GetProjectByOwner(ctx, db.GetProjectByOwnerParams{ID: id, OwnerID: owner})
	if err != nil {
		if db.IsNotFound(err) {
			return db.Project{}, apperr.NotFound("Project")
		}
		return db.Project{}, err
	}
	return p, nil
}

// List returns the owner's projects, newest first.
func (s *Service) List(ctx context.Context, owner uuid.UUID) ([]db.ListProjectsByOwnerRow, error) {
	return s.q.ListProjectsByOwner(ctx, owner)
}

// SetReloadsItself records the project's reload choice: whether its dev server reloads changed
// files itself, or is restarted on each new version.
func (s *Service) SetReloadsItself(ctx context.Context, owner, id uuid.UUID, reloads bool) (db.Project, error) {
	p, err := s.q.SetProjectReloadsItself(ctx, db.SetProjectReloadsItselfParams{ID: id, OwnerID: owner, ReloadsItself: reloads})
	if db.IsNotFound(err) {
		return p, apperr.NotFound("Project")
	}
	return p, err
}

// EnsureStarterProjects gives a founder one project per starter they do not have yet; `make run`
// seeds the demo founder with it.
func (s *Service) EnsureStarterProjects(ctx context.Context, owner uuid.UUID) error {
	for _, st := range starters {
		n, err := s.q.CountProjectsByOwnerAndStarter(ctx, db.CountProjectsByOwnerAndStarterParams{OwnerID: owner, Starter: &st.Name})
		if err != nil {
			return err
		}
		if n == 0 {
			if _, err := s.CreateFromStarter(ctx, owner, st.Title, st.Name); err != nil {
				return err
			}
		}
	}
	return nil
}
