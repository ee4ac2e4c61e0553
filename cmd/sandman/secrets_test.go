package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"sandman/db"
	"sandman/db/dbtest"
	"sandman/envvars"
	"sandman/keyring"
	"sandman/outbox"
	"sandman/versions"
)

// `sandman secrets rotate` seals every secret sealed under the previous key again under the new
// one, so the previous key can then be removed; without a key it says what to set.
func TestSecretsRotateCommandLetsThePreviousKeyGo(t *testing.T) {
	t.Parallel()
	const oldKey, newKey = "0303030303030303030303030303030303030303030303030303030303030303",
		"0404040404040404040404040404040404040404040404040404040404040404"
	url := dbtest.NewDatabase(t)
	ctx := context.Background()
	pool, err := db.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var owner, pid [16]byte
	if err := pool.QueryRow(ctx, `WITH u AS (INSERT INTO users (email, password_hash, credits) VALUES ('r@example.com', 'x', 1) RETURNING id)
		INSERT INTO projects (owner_id, name, start_command, port) SELECT id, 'p', 'node server.js', 3000 FROM u RETURNING owner_id, id`).Scan(&owner, &pid); err != nil {
		t.Fatal(err)
	}
	if err := db.InTx(ctx, pool, func(tx db.Tx) error {
		_, err := versions.CreateFirst(ctx, tx, owner, pid, []versions.File{{Path: "a", Content: []byte("b")}}, versions.DefaultQuota)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	old, _ := keyring.Parse(oldKey, "")
	yes := true
	if err := envvars.New(pool, old, nil).Set(ctx, owner, pid, []envvars.Input{{Name: "TOKEN", Value: "the-token", Secret: &yes}}, nil); err != nil {
		t.Fatal(err)
	}
	hooks := outbox.DefaultConfig()
	hooks.AllowPrivate = true
	if _, err := outbox.New(pool, old, hooks, slog.New(slog.DiscardHandler)).Create(ctx, owner,
		outbox.EndpointInput{URL: "http://127.0.0.1:9/hook", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	sandman := func(env map[string]string, args ...string) (string, error) {
		env["DATABASE_URL"] = url
		var out bytes.Buffer
		err := run(ctx, args, func(k string) string { return env[k] }, &out)
		return strings.TrimSpace(out.String()), err
	}
	if _, err := sandman(map[string]string{}, "secrets", "rotate"); err == nil || !strings.Contains(err.Error(), "SANDMAN_SECRETS_KEY is not set") {
		t.Fatalf("without a key: %v", err)
	}
	got, err := sandman(map[string]string{"SANDMAN_SECRETS_KEY": newKey, "SANDMAN_SECRETS_KEY_PREVIOUS": oldKey}, "secrets", "rotate")
	if err != nil || !strings.HasPrefix(got, "1 environment secret(s) and 1 webhook signing secret(s) sealed again") {
		t.Fatalf("rotate: %q, %v", got, err)
	}
	onlyNew, _ := keyring.Parse(newKey, "")
	env, err := envvars.New(pool, onlyNew, nil).Open(ctx, db.New(pool), pid)
	if err != nil || env.Map()["TOKEN"] != "the-token" {
		t.Fatalf("under the new key alone: %v, %v", env.Map(), err)
	}
	// Nothing is left under the previous key: the webhook's secret too was sealed again.
	if n, err := outbox.New(pool, onlyNew, hooks, slog.New(slog.DiscardHandler)).Reseal(ctx); n != 0 || err != nil {
		t.Fatalf("after the rotation, %d webhook secret(s) still stale (%v)", n, err)
	}
}
