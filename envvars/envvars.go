// Package envvars keeps a project's environment variables (docs/architecture.md, "Environment
// variables"): the keys an app needs (an API key, a database URL), given to its install and dev
// server and never part of its files. A plain variable's value is stored and shown as it is; a
// secret's is sealed by package keyring, bound to its project and name, and never returned by
// any route, page or export once set: only the lifecycle opens it, to start the app, and the
// app log's writer, to replace it in what the app prints.
package envvars

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/apperr"
	"sandman/db"
	"sandman/keyring"
)

// The limits of a project's variables (docs/api.md, "Environment variables").
const (
	MaxNameLen    = 128
	MaxValueBytes = 32 << 10
	MaxVars       = 100
	MaxTotalBytes = 128 << 10
)

// CodeSecretsOff: a secret sent to an instance that has no key to seal it with (503).
const CodeSecretsOff apperr.Code = "secrets_unavailable"

// ErrSecretsOff is a secret that cannot be sealed: no SANDMAN_SECRETS_KEY.
var ErrSecretsOff = apperr.New(apperr.KindUnavailable, CodeSecretsOff,
	"Secrets are turned off on this Sandman: its operator has not set SANDMAN_SECRETS_KEY. Plain variables still work.")

// Hook runs in the transaction that changes a project's variables, after they are stored: the
// lifecycle records the change in the preview's history and queues its apply, so the change
// and its apply commit together. set and removed are names, never values.
type Hook func(ctx context.Context, tx db.Tx, owner, projectID uuid.UUID, set, removed []string) error

// Store reads and changes projects' variables. Every founder's call takes the owner: another
// founder's project is not found.
type Store struct {
	pool     *pgxpool.Pool
	q        *db.Queries
	keys     *keyring.Keyring
	onChange Hook
}

// New returns a Store sealing secrets with keys (nil: secrets refused); onChange may be nil.
func New(pool *pgxpool.Pool, keys *keyring.Keyring, onChange Hook) *Store {
	return &Store{pool: pool, q: db.New(pool), keys: keys, onChange: onChange}
}

// SecretsOn says whether secrets can be set here (SANDMAN_SECRETS_KEY is set).
func (s *Store) SecretsOn() bool { return s.keys.Enabled() }

// Var is a variable as its founder sees it: a secret's value is never in it.
type Var struct {
	Name      string
	Secret    bool
	Value     string // plain variables only
	UpdatedAt time.Time
	// Used says whether a file of the project's current version mentions the name.
	Used bool
}

// Input is one variable to set. Secret nil keeps what an existing variable is (plain for a new
// one); a secret never turns plain.
type Input struct {
	Name   string
	Value  string
	Secret *bool
}

var nameRule = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reserved are the names Sandman or the system set: a project's variable would break its dev
// server's start (PORT, HOST) or the sandbox's tools.
var reserved = []string{"PORT", "HOST", "PATH", "HOME", "NODE_OPTIONS"}

// reservedPrefixes are whole families of names that are Sandman's, the provider's or the
// dynamic linker's.
var reservedPrefixes = []string{"SANDMAN_", "E2B_", "LD_"}

// CheckName says what is wrong with a variable's name, "" when nothing.
func CheckName(name string) string {
	switch {
	case name == "":
		return "A variable needs a name."
	case len(name) > MaxNameLen:
		return fmt.Sprintf("A name is at most %d characters.", MaxNameLen)
	case !nameRule.MatchString(name):
		return "A name is letters, digits and underscores, and does not start with a digit."
	}
	up := strings.ToUpper(name)
	if slices.Contains(reserved, up) {
		return fmt.Sprintf("%s is set by Sandman or the system; choose another name.", name)
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(up, p) {
			return fmt.Sprintf("Names starting with %s are Sandman's or the system's; choose another name.", p)
		}
	}
	return ""
}

// checkValue says what is wrong with a value, "" when nothing.
func checkValue(v string) string {
	switch {
	case len(v) > MaxValueBytes:
		return fmt.Sprintf("A value is at most %d KiB.", MaxValueBytes>>10)
	case strings.IndexByte(v, 0) >= 0:
		return "A value cannot hold a NUL byte."
	}
	return ""
}

func (s *Store) owned(ctx context.Context, q *db.Queries, owner, projectID uuid.UUID) error {
	_, err := q.GetProjectByOwner(ctx, db.GetProjectByOwnerParams{ID: projectID, OwnerID: owner})
	if db.IsNotFound(err) {
		return apperr.NotFound("Project")
	}
	return err
}

// List returns the owner's project's variables by name, each with whether the current
// version's files mention it.
func (s *Store) List(ctx context.Context, owner, projectID uuid.UUID) ([]Var, error) {
	if err := s.owned(ctx, s.q, owner, projectID); err != nil {
		return nil, err
	}
	rows, err := s.q.ListProjectEnv(ctx, projectID)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Name
	}
	used, err := s.q.ListUsedEnvNames(ctx, db.ListUsedEnvNamesParams{Names: names, ProjectID: projectID, OwnerID: owner})
	if err != nil {
		return nil, err
	}
	out := make([]Var, len(rows))
	for i, r := range rows {
		out[i] = Var{Name: r.Name, Secret: r.Secret, UpdatedAt: r.UpdatedAt, Used: slices.Contains(used, r.Name)}
		if !r.Secret && r.Value != nil {
			out[i].Value = *r.Value
		}
	}
	return out, nil
}

// Set sets vars and deletes the names in del, all or nothing: any variable that breaks a rule
// refuses the whole batch (a 422 naming each), and nothing is stored. It tells the lifecycle
// (the Hook) in the same transaction.
func (s *Store) Set(ctx context.Context, owner, projectID uuid.UUID, vars []Input, del []string) error {
	if bad := checkBatch(vars, del); len(bad) > 0 {
		return apperr.Invalid(bad)
	}
	return db.InTx(ctx, s.pool, func(tx db.Tx) error {
		if _, err := tx.LockProjectByOwner(ctx, db.LockProjectByOwnerParams{ID: projectID, OwnerID: owner}); db.IsNotFound(err) {
			return apperr.NotFound("Project")
		} else if err != nil {
			return err
		}
		rows, err := tx.ListProjectEnv(ctx, projectID)
		if err != nil {
			return err
		}
		have := map[string]db.ProjectEnv{}
		for _, r := range rows {
			have[r.Name] = r
		}
		bad := map[string]string{}
		for _, v := range vars {
			old, ok := have[v.Name]
			if ok && old.Secret && v.Secret != nil && !*v.Secret {
				bad[v.Name] = fmt.Sprintf("%s is a secret: a secret never turns plain. Delete it and add it again as a plain variable.", v.Name)
			}
		}
		if len(bad) > 0 {
			return apperr.Invalid(bad)
		}
		// The limits hold for the project as it would be after the batch.
		after := map[string]int{}
		for _, r := range rows {
			after[r.Name] = storedLen(r)
		}
		for _, n := range del {
			delete(after, n)
		}
		for _, v := range vars {
			after[v.Name] = len(v.Value)
		}
		total := 0
		for _, n := range after {
			total += n
		}
		if len(after) > MaxVars || total > MaxTotalBytes {
			msg := fmt.Sprintf("A project has at most %d variables and %d KiB of values; this would make %d and %d KiB.",
				MaxVars, MaxTotalBytes>>10, len(after), (total+1023)>>10)
			for _, v := range vars {
				bad[v.Name] = msg
			}
			return apperr.Invalid(bad)
		}
		var set []string
		for _, v := range vars {
			secret := v.Secret != nil && *v.Secret || have[v.Name].Secret
			p := db.UpsertProjectEnvParams{ProjectID: projectID, Name: v.Name, Secret: secret}
			if secret {
				keyID, sealed, err := s.keys.Seal([]byte(v.Value), associated(projectID, v.Name))
				if errors.Is(err, keyring.ErrNoKey) {
					return ErrSecretsOff
				}
				if err != nil {
					return err
				}
				p.Sealed, p.KeyID = sealed, &keyID
			} else {
				p.Value = &v.Value
			}
			if err := tx.UpsertProjectEnv(ctx, p); err != nil {
				return err
			}
			set = append(set, v.Name)
		}
		removed, err := tx.DeleteProjectEnv(ctx, db.DeleteProjectEnvParams{ProjectID: projectID, Names: nonNil(del)})
		if err != nil {
			return err
		}
		if len(set) == 0 && len(removed) == 0 {
			return nil
		}
		slices.Sort(set)
		slices.Sort(removed)
		if _, err := tx.BumpProjectEnvRevision(ctx, projectID); err != nil {
			return err
		}
		if s.onChange != nil {
			return s.onChange(ctx, tx, owner, projectID, set, removed)
		}
		return nil
	})
}

// Delete deletes one variable; one that does not exist is not found.
func (s *Store) Delete(ctx context.Context, owner, projectID uuid.UUID, name string) error {
	vars, err := s.List(ctx, owner, projectID)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(vars, func(v Var) bool { return v.Name == name }) {
		return apperr.NotFound(fmt.Sprintf("Variable %q", name))
	}
	return s.Set(ctx, owner, projectID, nil, []string{name})
}

// checkBatch checks each variable on its own and the batch's names (each once).
func checkBatch(vars []Input, del []string) map[string]string {
	bad := map[string]string{}
	seen := map[string]bool{}
	for _, v := range vars {
		key := v.Name
		if key == "" {
			key = "name"
		}
		if msg := CheckName(v.Name); msg != "" {
			bad[key] = msg
			continue
		}
		if msg := checkValue(v.Value); msg != "" {
			bad[key] = v.Name + ": " + msg
			continue
		}
		if seen[v.Name] {
			bad[key] = fmt.Sprintf("%s is given twice.", v.Name)
		}
		seen[v.Name] = true
	}
	for _, n := range del {
		if seen[n] {
			bad[n] = fmt.Sprintf("%s is both set and deleted.", n)
		}
	}
	return bad
}

// storedLen is a stored variable's value's length.
func storedLen(r db.ProjectEnv) int {
	if r.Secret {
		return max(len(r.Sealed)-keyring.Overhead, 0)
	}
	if r.Value == nil {
		return 0
	}
	return len(*r.Value)
}

// associated binds a sealed value to its project and name: copied to another row, it does not
// open.
func associated(projectID uuid.UUID, name string) []byte {
	return []byte("sandman env\x00" + projectID.String() + "\x00" + name)
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// Opened is a variable with its value, a secret's opened: for the app's environment and the
// log's redaction only, never for a founder's answer.
type Opened struct {
	Name, Value string
	Secret      bool
}

// Env is a project's variables as its app is given them, at a revision of them.
type Env struct {
	Vars     []Opened
	Revision int64
}

// Map is the variables as a process's environment.
func (e Env) Map() map[string]string {
	m := make(map[string]string, len(e.Vars))
	for _, v := range e.Vars {
		m[v.Name] = v.Value
	}
	return m
}

// Open reads the project's variables with their values. A secret that does not open (no key, a
// key this instance lacks, or a sealed value moved from another row) is left out, and the error
// names it: the caller starts the app without it and says so in its log.
func (s *Store) Open(ctx context.Context, q *db.Queries, projectID uuid.UUID) (Env, error) {
	rev, err := q.GetProjectEnvRevision(ctx, projectID)
	if err != nil {
		return Env{}, err
	}
	rows, err := q.ListProjectEnv(ctx, projectID)
	if err != nil {
		return Env{}, err
	}
	env := Env{Revision: rev, Vars: make([]Opened, 0, len(rows))}
	var errs []error
	for _, r := range rows {
		if !r.Secret {
			env.Vars = append(env.Vars, Opened{Name: r.Name, Value: deref(r.Value)})
			continue
		}
		plain, err := s.keys.Open(deref(r.KeyID), r.Sealed, associated(projectID, r.Name))
		if err != nil {
			errs = append(errs, fmt.Errorf("secret %s: %w", r.Name, err))
			continue
		}
		env.Vars = append(env.Vars, Opened{Name: r.Name, Value: string(plain), Secret: true})
	}
	return env, errors.Join(errs...)
}

// Reseal seals again under the current key every secret sealed under another (the previous
// key, during a rotation: `sandman secrets rotate`), and returns how many it sealed again. A
// secret that does not open under any key this instance has is left as it is and named in the
// error; the others are still sealed again.
func (s *Store) Reseal(ctx context.Context) (int, error) {
	if !s.keys.Enabled() {
		return 0, keyring.ErrNoKey
	}
	n := 0
	var errs []error
	cur := s.keys.CurrentID()
	after := db.ListStaleSealedEnvParams{CurrentKeyID: &cur, MaxRows: 500}
	for {
		rows, err := s.q.ListStaleSealedEnv(ctx, after)
		if err != nil {
			return n, err
		}
		for _, r := range rows {
			ad := associated(r.ProjectID, r.Name)
			plain, err := s.keys.Open(deref(r.KeyID), r.Sealed, ad)
			if err != nil {
				errs = append(errs, fmt.Errorf("project %s, secret %s: %w", r.ProjectID, r.Name, err))
				continue
			}
			keyID, sealed, err := s.keys.Seal(plain, ad)
			if err != nil {
				return n, err
			}
			done, err := s.q.ResealProjectEnv(ctx, db.ResealProjectEnvParams{ProjectID: r.ProjectID, Name: r.Name,
				Sealed: sealed, KeyID: &keyID, OldKeyID: r.KeyID})
			if err != nil {
				return n, err
			}
			n += int(done)
		}
		if len(rows) < int(after.MaxRows) {
			return n, errors.Join(errs...)
		}
		last := rows[len(rows)-1]
		after.AfterProject, after.AfterName = last.ProjectID, last.Name
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// SecretsOf opens the secrets of the projects, name to value by project: what the app log's
// writer replaces in their output. One that does not open is not in any app's environment
// either (Open), so it is left out.
func (s *Store) SecretsOf(ctx context.Context, projectIDs []uuid.UUID) (map[uuid.UUID]map[string]string, error) {
	out := map[uuid.UUID]map[string]string{}
	if !s.keys.Enabled() || len(projectIDs) == 0 {
		return out, nil
	}
	rows, err := s.q.ListSealedEnvByProjects(ctx, projectIDs)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		plain, err := s.keys.Open(deref(r.KeyID), r.Sealed, associated(r.ProjectID, r.Name))
		if err != nil {
			continue
		}
		if out[r.ProjectID] == nil {
			out[r.ProjectID] = map[string]string{}
		}
		out[r.ProjectID][r.Name] = string(plain)
	}
	return out, nil
}
