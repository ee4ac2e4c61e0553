package envvars_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/apperr"
	"sandman/db"
	"sandman/db/dbtest"
	"sandman/envvars"
	"sandman/keyring"
	"sandman/versions"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

const (
	keyA = "0101010101010101010101010101010101010101010101010101010101010101"
	keyB = "0202020202020202020202020202020202020202020202020202020202020202"
)

func keys(t testing.TB, current, previous string) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(current, previous)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// project makes a founder and a project whose version 1 is files, in the database.
func project(t testing.TB, pool *pgxpool.Pool, files map[string]string) (owner, projectID uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	if err := pool.QueryRow(ctx, `WITH u AS (INSERT INTO users (email, password_hash, credits) VALUES ($1, 'x', 1) RETURNING id)
		INSERT INTO projects (owner_id, name, start_command, port) SELECT id, 'p', 'node server.js', 3000 FROM u RETURNING owner_id, id`,
		uuid.NewString()[:8]+"@example.com").Scan(&owner, &projectID); err != nil {
		t.Fatal(err)
	}
	var fs []versions.File
	for p, c := range files {
		fs = append(fs, versions.File{Path: p, Content: []byte(c)})
	}
	if err := db.InTx(ctx, pool, func(tx db.Tx) error {
		_, err := versions.CreateFirst(ctx, tx, owner, projectID, fs, versions.DefaultQuota)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return owner, projectID
}

func secret(name, value string) envvars.Input {
	yes := true
	return envvars.Input{Name: name, Value: value, Secret: &yes}
}

func plain(name, value string) envvars.Input { return envvars.Input{Name: name, Value: value} }

// A batch with any variable that breaks a rule is refused whole, with a 422 naming that
// variable, and stores nothing: not the good variables beside it, not a change of revision.
func TestARefusedVariableRefusesTheBatchAndNamesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner, pid := project(t, pool, map[string]string{"server.js": "x"})
	s := envvars.New(pool, keys(t, keyA, ""), nil)
	many := make([]envvars.Input, 0, envvars.MaxVars+1)
	for i := range envvars.MaxVars + 1 {
		many = append(many, plain("V"+strings.Repeat("X", i), "1"))
	}
	big := strings.Repeat("x", envvars.MaxValueBytes)
	tests := []struct {
		name  string
		vars  []envvars.Input
		field string
	}{
		{"PORT is Sandman's", []envvars.Input{plain("OK", "1"), plain("PORT", "1")}, "PORT"},
		{"HOST is Sandman's", []envvars.Input{plain("HOST", "1")}, "HOST"},
		{"PATH is the system's", []envvars.Input{plain("PATH", "/x")}, "PATH"},
		{"HOME", []envvars.Input{plain("HOME", "/x")}, "HOME"},
		{"NODE_OPTIONS", []envvars.Input{plain("NODE_OPTIONS", "--x")}, "NODE_OPTIONS"},
		{"the dynamic linker's", []envvars.Input{plain("LD_PRELOAD", "/x.so")}, "LD_PRELOAD"},
		{"Sandman's family", []envvars.Input{plain("SANDMAN_START_COMMAND", "x")}, "SANDMAN_START_COMMAND"},
		{"the provider's family, any case", []envvars.Input{plain("e2b_api_key", "x")}, "e2b_api_key"},
		{"a digit first", []envvars.Input{plain("1X", "1")}, "1X"},
		{"a dash", []envvars.Input{plain("A-B", "1")}, "A-B"},
		{"too long a name", []envvars.Input{plain(strings.Repeat("N", envvars.MaxNameLen+1), "1")}, strings.Repeat("N", envvars.MaxNameLen+1)},
		{"too long a value", []envvars.Input{plain("BIG", big+"x")}, "BIG"},
		{"a NUL byte", []envvars.Input{plain("NUL", "a\x00b")}, "NUL"},
		{"a name twice", []envvars.Input{plain("TWICE", "1"), plain("TWICE", "2")}, "TWICE"},
		{"too many", many, "V"},
		{"too many bytes", []envvars.Input{plain("B1", big), plain("B2", big), plain("B3", big), plain("B4", big), plain("B5", "x")}, "B5"},
	}
	for _, tt := range tests {
		err := s.Set(ctx, owner, pid, tt.vars, nil)
		e, ok := apperr.As(err)
		if !ok || e.Kind != apperr.KindInvalid || e.Fields[tt.field] == "" {
			t.Errorf("%s: %v (fields %q), want a 422 naming %s", tt.name, err, fieldsOf(e), tt.field)
		}
	}
	vars, err := s.List(ctx, owner, pid)
	if err != nil || len(vars) != 0 {
		t.Fatalf("stored after refusals: %v, %v", vars, err)
	}
	if env, err := s.Open(ctx, db.New(pool), pid); err != nil || env.Revision != 0 {
		t.Fatalf("revision %d after refusals (%v), want 0", env.Revision, err)
	}
}

func fieldsOf(e *apperr.Error) []string {
	if e == nil {
		return nil
	}
	var out []string
	for k := range e.Fields {
		out = append(out, k)
	}
	return out
}

// A secret is never returned once set, and is stored only sealed: neither the row nor a
// pg_dump of the database holds its value, and a sealed value moved to another project's row
// does not open there.
func TestASecretIsStoredSealedAndOpensOnlyInItsOwnRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewDatabase(t)
	pool, err := db.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	owner, pid := project(t, pool, map[string]string{"server.js": "process.env.OPENAI_API_KEY"})
	_, other := project(t, pool, map[string]string{"server.js": "x"})
	s := envvars.New(pool, keys(t, keyA, ""), nil)
	const value = "sk-live-4f9a8b7c6d5e"
	if err := s.Set(ctx, owner, pid, []envvars.Input{secret("OPENAI_API_KEY", value), plain("DEBUG", "1")}, nil); err != nil {
		t.Fatal(err)
	}
	vars, err := s.List(ctx, owner, pid)
	if err != nil {
		t.Fatal(err)
	}
	want := []envvars.Var{{Name: "DEBUG", Value: "1"}, {Name: "OPENAI_API_KEY", Secret: true, Used: true}}
	for i := range vars {
		vars[i].UpdatedAt = want[i].UpdatedAt
	}
	if !slices.Equal(vars, want) {
		t.Fatalf("listed %+v, want %+v", vars, want)
	}
	env, err := s.Open(ctx, db.New(pool), pid)
	if err != nil || env.Map()["OPENAI_API_KEY"] != value || env.Revision != 1 {
		t.Fatalf("opened %v at %d (%v), want the secret at revision 1", env.Map(), env.Revision, err)
	}

	dump, err := exec.Command("/usr/lib/postgresql/15/bin/pg_dump", "--data-only", url).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, dump)
	}
	if !strings.Contains(string(dump), "OPENAI_API_KEY") || strings.Contains(string(dump), value) {
		t.Fatal("the dump does not hold the variable's row, or holds its value in plain text")
	}

	// The sealed value copied into another project's row does not open there.
	if _, err := pool.Exec(ctx, `INSERT INTO project_env (project_id, name, secret, sealed, key_id)
		SELECT $1, name, secret, sealed, key_id FROM project_env WHERE project_id = $2 AND name = 'OPENAI_API_KEY'`, other, pid); err != nil {
		t.Fatal(err)
	}
	moved, err := s.Open(ctx, db.New(pool), other)
	if !errors.Is(err, keyring.ErrOpen) || len(moved.Vars) != 0 {
		t.Fatalf("a moved secret opened: %v, %v", moved.Vars, err)
	}
}

// A secret never turns plain: asking for it is a 422, and the secret stays as it was. A
// variable set again without saying whether it is secret stays what it is.
func TestASecretNeverTurnsPlain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner, pid := project(t, pool, map[string]string{"a": "b"})
	s := envvars.New(pool, keys(t, keyA, ""), nil)
	if err := s.Set(ctx, owner, pid, []envvars.Input{secret("TOKEN", "first-value")}, nil); err != nil {
		t.Fatal(err)
	}
	no := false
	err := s.Set(ctx, owner, pid, []envvars.Input{{Name: "TOKEN", Value: "shown", Secret: &no}}, nil)
	if e, ok := apperr.As(err); !ok || e.Fields["TOKEN"] == "" {
		t.Fatalf("turned plain: %v", err)
	}
	if err := s.Set(ctx, owner, pid, []envvars.Input{plain("TOKEN", "second-value")}, nil); err != nil {
		t.Fatal(err)
	}
	env, err := s.Open(ctx, db.New(pool), pid)
	if err != nil || len(env.Vars) != 1 || !env.Vars[0].Secret || env.Vars[0].Value != "second-value" {
		t.Fatalf("%+v, %v: want TOKEN still secret, replaced", env.Vars, err)
	}
}

// Without a key, a secret is refused with a 503 that says why, and plain variables still work.
func TestWithoutAKeySecretsAreRefusedAndPlainVariablesWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner, pid := project(t, pool, map[string]string{"a": "b"})
	s := envvars.New(pool, nil, nil)
	err := s.Set(ctx, owner, pid, []envvars.Input{plain("DEBUG", "1"), secret("TOKEN", "abcdefgh")}, nil)
	if e, ok := apperr.As(err); !ok || e.Kind != apperr.KindUnavailable || e.Code != envvars.CodeSecretsOff {
		t.Fatalf("a secret without a key: %v, want a 503 %s", err, envvars.CodeSecretsOff)
	}
	if vars, _ := s.List(ctx, owner, pid); len(vars) != 0 {
		t.Fatalf("the batch's plain variable was stored: %v", vars)
	}
	if err := s.Set(ctx, owner, pid, []envvars.Input{plain("DEBUG", "1")}, nil); err != nil {
		t.Fatalf("a plain variable without a key: %v", err)
	}
}

// Rotation: with the new key current and the old one previous, secrets sealed under the old
// key still open, Reseal seals them again under the new one, and then the old key can go.
func TestRotationResealsUnderTheNewKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner, pid := project(t, pool, map[string]string{"a": "b"})
	if err := envvars.New(pool, keys(t, keyA, ""), nil).Set(ctx, owner, pid,
		[]envvars.Input{secret("ONE", "value-one"), secret("TWO", "value-two"), plain("THREE", "3")}, nil); err != nil {
		t.Fatal(err)
	}
	rotating := envvars.New(pool, keys(t, keyB, keyA), nil)
	if env, err := rotating.Open(ctx, db.New(pool), pid); err != nil || env.Map()["ONE"] != "value-one" {
		t.Fatalf("under the previous key: %v, %v", env.Map(), err)
	}
	n, err := rotating.Reseal(ctx)
	if err != nil || n != 2 {
		t.Fatalf("resealed %d (%v), want 2", n, err)
	}
	if n, err := rotating.Reseal(ctx); err != nil || n != 0 {
		t.Fatalf("a second reseal sealed %d (%v), want 0", n, err)
	}
	env, err := envvars.New(pool, keys(t, keyB, ""), nil).Open(ctx, db.New(pool), pid)
	if err != nil || env.Map()["TWO"] != "value-two" || env.Map()["THREE"] != "3" {
		t.Fatalf("under the new key alone: %v, %v", env.Map(), err)
	}
}

// Another founder's project is not found, for every call.
func TestAnotherFoundersProjectIsNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner, pid := project(t, pool, map[string]string{"a": "b"})
	stranger, _ := project(t, pool, map[string]string{"a": "b"})
	s := envvars.New(pool, keys(t, keyA, ""), nil)
	if err := s.Set(ctx, owner, pid, []envvars.Input{plain("DEBUG", "1")}, nil); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"set":    s.Set(ctx, stranger, pid, []envvars.Input{plain("DEBUG", "2")}, nil),
		"delete": s.Delete(ctx, stranger, pid, "DEBUG"),
		"list": func() error {
			_, err := s.List(ctx, stranger, pid)
			return err
		}(),
	} {
		if e, ok := apperr.As(err); !ok || e.Kind != apperr.KindNotFound {
			t.Errorf("%s by another founder: %v, want not found", name, err)
		}
	}
}

// A name CheckName accepts is one the database's own rule accepts too, so a refusal is always
// the clear 422, never the database's error.
func FuzzCheckNameAgreesWithTheDatabase(f *testing.F) {
	for _, s := range []string{"OPENAI_API_KEY", "_", "a1", "1a", "PORT", "ld_x", "É", "A B", "A-B", strings.Repeat("A", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if envvars.CheckName(name) != "" {
			return
		}
		if len(name) > envvars.MaxNameLen || name == "" {
			t.Fatalf("%q accepted", name)
		}
		for i, c := range name {
			if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
				t.Fatalf("%q accepted", name)
			}
		}
	})
}

// A founder's account deleted takes its projects' variables with it (the foreign keys cascade),
// secrets included.
func TestAnAccountDeletedTakesItsVariables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner, pid := project(t, pool, map[string]string{"a": "b"})
	if err := envvars.New(pool, keys(t, keyA, ""), nil).Set(ctx, owner, pid, []envvars.Input{secret("TOKEN", "value-one"), plain("DEBUG", "1")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, owner); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM project_env`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d variables left (%v)", left, err)
	}
}
