package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app/apptest"
	"sandman/apperr"
	"sandman/db"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/projects"
	"sandman/sandbox"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
	"sandman/versions"
	"sandman/views"
)

// An idempotency key belongs to one project and one kind of request: reused on another project,
// or for a rebuild after a build, it is a conflict that charges nothing and starts nothing.
func TestIdempotencyKeyBelongsToOneProjectAndKind(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx := context.Background()
	u, first := founder(t, b.pool, 5)
	second, err := projects.New(b.pool).CreateFromStarter(ctx, u.ID, "Second", "static")
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, first.ID, "one-key", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		project uuid.UUID
		rebuild bool
	}{
		{"another project's build", second.ID, false},
		{"another project's rebuild", second.ID, true},
		{"a rebuild of the same project", first.ID, true},
	} {
		_, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, tt.project, "one-key", tt.rebuild)
		if ae, ok := apperr.As(err); !ok || ae.Kind != apperr.KindConflict || ae.Code != "key_used" || !strings.Contains(ae.Message, "Nothing was charged") {
			t.Fatalf("%s with a used key: %v, want a 409 saying nothing was charged", tt.name, err)
		}
	}
	again, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, first.ID, "one-key", false)
	if err != nil || !again.Replayed || again.Build.ID != res.Build.ID {
		t.Fatalf("the same request again: %+v %v, want the first build replayed", again, err)
	}
	if got := credits(t, b.pool, u.ID); got != 4 {
		t.Fatalf("credits = %d, want 5 - 1", got)
	}
	if n := len(b.sandboxesOf(t, second.ID)); n != 0 {
		t.Fatalf("the refused requests started %d sandboxes", n)
	}
	audit := apptest.AuditDB(t, b.pool)
	testkit.Record(t, testkit.Scenario{ID: "key-reused-elsewhere", Times: 3, Counts: audit,
		Injected: "a build's idempotency key sent again for another project's build and rebuild, and for a rebuild of its own project",
		Result:   "409 saying nothing was charged, each time; the same request again replays the first build"})
}

// projectWith creates a project of one file with the given commands.
func projectWith(t testing.TB, b *testBundle, owner uuid.UUID, install, start string) db.Project {
	t.Helper()
	p, err := projects.New(b.pool).CreateFromFiles(context.Background(), owner,
		projects.Settings{Name: "Custom", InstallCommand: install, StartCommand: start, Port: 3000},
		[]versions.File{{Path: "index.js", Content: []byte("// nothing")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitBuildStage waits until the sandbox's build reaches stage.
func (b *testBundle) waitBuildStage(t testing.TB, sb db.Sandbox, stage string) {
	t.Helper()
	testkit.Eventually(t, time.Minute, "the build to be "+stage, func() error {
		build, err := db.New(b.pool).GetBuild(context.Background(), sb.BuildID)
		if err != nil {
			return err
		}
		if build.Stage != stage {
			return fmt.Errorf("it is %s %q", build.Status, build.Stage)
		}
		return nil
	})
}

// TestBuildFailuresRefundOnlyThePlatformsFaults: a build the platform fails (the provider's
// errors after retries, the sandbox lost mid-build however Sandman learns it) gives its credit
// back, once, in the transaction that fails it, and the build page says so; a build the
// founder's code fails keeps the charge and says which command failed with what it printed.
func TestBuildFailuresRefundOnlyThePlatformsFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id, name string
		install  string
		start    string
		webhooks bool
		ready    time.Duration // ReadyTimeout, when the test waits it out
		// fault is injected before the build; act runs once it has started.
		fault  *sandboxd.Fault
		act    func(t *testing.T, b *testBundle, host *sandboxdtest.Host, sb db.Sandbox)
		refund bool
		// wantText is what the build page's line says (all of it for a refund, parts otherwise).
		wantText []string
	}{
		{
			id: "build-provider-create-500", name: "the provider fails every create", start: "node index.js",
			fault:  &sandboxd.Fault{Route: "POST /sandboxes", Status: 500, Count: 1000},
			refund: true, wantText: []string{views.ProviderFailureText},
		},
		{
			id: "build-sandbox-lost", name: "the sandbox is killed mid-build", install: "sleep 60", start: "node index.js",
			act: func(t *testing.T, b *testBundle, host *sandboxdtest.Host, sb db.Sandbox) {
				b.waitBuildStage(t, sb, lifecycle.StageInstalling)
				host.KillFromDashboard(t, *b.get(t, sb.ID).ProviderID)
			},
			refund: true, wantText: []string{views.ProviderFailureText},
		},
		{
			id: "build-sandbox-lost-webhook", name: "the kill arrives by webhook mid-build", install: "sleep 60", start: "node index.js", webhooks: true,
			act: func(t *testing.T, b *testBundle, host *sandboxdtest.Host, sb db.Sandbox) {
				b.waitBuildStage(t, sb, lifecycle.StageInstalling)
				host.KillFromDashboard(t, *b.get(t, sb.ID).ProviderID)
			},
			refund: true, wantText: []string{views.ProviderFailureText},
		},
		{
			id: "build-install-fails", name: "the install command exits non-zero", install: "echo 'npm ERR! missing: left-pad'; exit 3", start: "node index.js",
			wantText: []string{`The install command "echo 'npm ERR! missing: left-pad'; exit 3" failed with exit code 3.`, "npm ERR! missing: left-pad"},
		},
		{
			id: "build-dev-server-silent", name: "the dev server never answers", start: "echo 'error: EADDRINUSE'; sleep 600", ready: 3 * time.Second,
			wantText: []string{`The start command "echo 'error: EADDRINUSE'; sleep 600" did not answer on port 3000 within 3s`, "error: EADDRINUSE"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host := sandboxdtest.Start(t)
			cfg := fastConfig()
			if tt.ready > 0 {
				cfg.ReadyTimeout = tt.ready
			}
			b := instance(t, instanceOptions{host: host, config: cfg, work: true, webhooks: tt.webhooks})
			ctx := context.Background()
			u, _ := founder(t, b.pool, 5)
			p := projectWith(t, b, u.ID, tt.install, tt.start)
			if tt.fault != nil {
				host.InjectFault(t, *tt.fault)
			}
			res, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "build", false)
			if err != nil {
				t.Fatal(err)
			}
			if tt.act != nil {
				tt.act(t, b, host, res.Sandbox)
			}
			var build db.Build
			testkit.Eventually(t, time.Minute, "the build to fail", func() error {
				if build, err = db.New(b.pool).GetBuild(ctx, res.Build.ID); err != nil {
					return err
				}
				if build.Status != sandbox.BuildFailed {
					return fmt.Errorf("it is %s %q", build.Status, build.Stage)
				}
				return nil
			})
			for _, want := range tt.wantText {
				if !strings.Contains(views.BuildError(build), want) {
					t.Fatalf("the build page says %q, want it to say %q", views.BuildError(build), want)
				}
			}
			if tt.refund && views.BuildError(build) != views.ProviderFailureText {
				t.Fatalf("the build page says %q, want exactly %q", views.BuildError(build), views.ProviderFailureText)
			}
			ledger, err := db.New(b.pool).ListCreditLedger(ctx, u.ID)
			if err != nil {
				t.Fatal(err)
			}
			var refunds []db.CreditLedger
			for _, l := range ledger {
				if l.Delta > 0 {
					refunds = append(refunds, l)
				}
			}
			want := int32(4)
			if tt.refund {
				want = 5
				if len(refunds) != 1 || refunds[0].BuildID == nil || *refunds[0].BuildID != res.Build.ID || refunds[0].Reason != db.LedgerReasonRefund || refunds[0].Detail == "" {
					t.Fatalf("ledger %+v: want one refund of this build, with its reason", ledger)
				}
				t.Logf("refund: %s", refunds[0].Detail)
			} else if len(refunds) != 0 {
				t.Fatalf("the founder's own failure was refunded: %+v", ledger)
			}
			if got := credits(t, b.pool, u.ID); got != want {
				t.Fatalf("credits = %d, want %d", got, want)
			}
			defer func() {
				audit := apptest.AuditDB(t, b.pool)
				result := "build failed, the credit kept; the page names the command and shows its output"
				if tt.refund {
					result = "build failed in one transaction with its refund (one ledger row with the reason); the page says \"" + views.ProviderFailureText + "\""
				}
				testkit.Record(t, testkit.Scenario{ID: tt.id, Times: 1, Counts: audit,
					Injected: tt.name, Result: result + "; its sandbox gone at the provider"})
			}()
			// Whatever failed it, nothing of it keeps running: the sandbox is gone.
			sb := b.get(t, res.Sandbox.ID)
			if !sb.Status.Gone() {
				t.Fatalf("the failed build's sandbox is %s", sb.Status)
			}
			// The history says whether the failure cost the credit (a sandbox the provider killed
			// reads as the provider's stop instead).
			if sb.Status == sandbox.Terminated {
				hist, err := b.ov.History(ctx, u.ID, p.ID, math.MaxInt64)
				if err != nil {
					t.Fatal(err)
				}
				want := "Build failed"
				if tt.refund {
					want = "Build failed because of the sandbox provider (credit refunded)"
				}
				if len(hist) == 0 || historyText(b.svc, hist[0]) != want {
					t.Fatalf("history %+v: want its newest entry to say %q", hist, want)
				}
			}
			if sb.ProviderID != nil {
				testkit.Until(t, 30*time.Second, "the provider sandbox to be gone", func() bool {
					_, err := providerFor(t, host).GetSandbox(ctx, *sb.ProviderID)
					return errors.Is(err, e2b.ErrNotFound)
				})
			}
		})
	}
}
