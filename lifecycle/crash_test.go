package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app/apptest"
	"sandman/db"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/sandbox"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
	"sandman/views"
)

// crashJob makes the sandbox's queued job look as a worker that took it and died leaves it:
// running, attempted long ago by an instance that is gone. The row's last change is moved as
// far back, past every deadline.
func crashJob(t testing.TB, b *testBundle, kind string, id uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	tag, err := b.pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1,
		attempted_at = now() - interval '1 hour', attempted_by = ARRAY['crashed-instance']
		WHERE kind = $1 AND args->>'sandbox_id' = $2 AND state = 'available'`, kind, id.String())
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("crash the %s job: %d rows, %v", kind, tag.RowsAffected(), err)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE sandboxes SET state_changed_at = now() - interval '1 hour' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
}

// jobState is the state of the sandbox's newest job of kind.
func jobState(t testing.TB, b *testBundle, kind string, id uuid.UUID) string {
	t.Helper()
	var state string
	err := b.pool.QueryRow(context.Background(), `SELECT state::text FROM river_job
		WHERE kind = $1 AND args->>'sandbox_id' = $2 ORDER BY id DESC LIMIT 1`, kind, id.String()).Scan(&state)
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// TestCrashedWorkerNeverStrandsASandbox: an instance dies in the middle of a build or a
// resume, leaving the sandbox in starting or resuming and its job "running" for ever. Another
// instance must move the sandbox on, either finishing the work (River rescues the job and the
// idempotent worker runs again) or ending it as failed (the sweep), and whichever it is, the
// outcome must be whole: a failed build leaves no provider sandbox running up a bill.
func TestCrashedWorkerNeverStrandsASandbox(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id, name string
		// crash leaves a sandbox mid-flight, its job taken by the first instance, which it then
		// stops (web is an instance that runs no jobs, for what happens after), and returns it.
		crash func(t *testing.T, first, web *testBundle, client *e2b.Client, owner, project uuid.UUID) uuid.UUID
		// finished and failed are the two acceptable ends.
		finished, failed sandbox.Status
		check            func(t *testing.T, b *testBundle, host *sandboxdtest.Host, client *e2b.Client, sb db.Sandbox)
	}{
		{
			id: "instance-dies-mid-build", name: "build, after the provider sandbox was created",
			crash: func(t *testing.T, first, web *testBundle, client *e2b.Client, owner, project uuid.UUID) uuid.UUID {
				first.Stop(t)
				ctx := context.Background()
				res, err := web.svc.StartBuild(ctx, lifecycle.Actor{Founder: owner}, project, "k", false)
				if err != nil {
					t.Fatal(err)
				}
				sb := res.Sandbox
				// What the worker got done before it died: the provider sandbox exists.
				created, err := client.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600, Secure: true,
					Metadata: map[string]string{lifecycle.MetaApp: "sandman", lifecycle.MetaSandbox: sb.ID.String()}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.New(web.pool).SetSandboxProvider(ctx, db.SetSandboxProviderParams{ID: sb.ID, ProviderID: &created.ID,
					PreviewURL: client.PreviewURL(created, 3000), EnvdToken: created.EnvdAccessToken, EndAt: &created.EndAt}); err != nil {
					t.Fatal(err)
				}
				crashJob(t, web, "build", sb.ID)
				return sb.ID
			},
			finished: sandbox.Running, failed: sandbox.Terminated,
			check: func(t *testing.T, b *testBundle, host *sandboxdtest.Host, client *e2b.Client, sb db.Sandbox) {
				build, err := db.New(b.pool).GetBuild(context.Background(), sb.BuildID)
				if err != nil {
					t.Fatal(err)
				}
				if sb.Status == sandbox.Running {
					if build.Status != sandbox.BuildReady {
						t.Fatalf("running, but the build is %s", build.Status)
					}
					visits(t, host, sb.PreviewURL)
					return
				}
				if build.Status != sandbox.BuildFailed || !strings.Contains(views.BuildError(build), "stopped before it finished") ||
					killedReason(sb) != sandbox.ReasonBuildFailed {
					t.Fatalf("build %s %q, killed_reason %q: want a failed build with a readable reason", build.Status, views.BuildError(build), killedReason(sb))
				}
				// A worker that went away is Sandman's failure: the credit came back.
				if got := credits(t, b.pool, sb.OwnerID); got != 5 || !strings.Contains(views.BuildError(build), "Your credit was refunded") {
					t.Fatalf("credits = %d after a lost worker's build (%q), want all 5 back", got, views.BuildError(build))
				}
				testkit.Until(t, 30*time.Second, "the failed build's provider sandbox to be killed", func() bool {
					_, err := client.GetSandbox(context.Background(), *sb.ProviderID)
					return errors.Is(err, e2b.ErrNotFound)
				})
			},
		},
		{
			id: "instance-dies-mid-resume", name: "resume",
			crash: func(t *testing.T, first, web *testBundle, _ *e2b.Client, owner, project uuid.UUID) uuid.UUID {
				ctx := context.Background()
				res, err := first.svc.StartBuild(ctx, lifecycle.Actor{Founder: owner}, project, "k", false)
				if err != nil {
					t.Fatal(err)
				}
				first.waitStatus(t, res.Sandbox.ID, sandbox.Paused, time.Minute)
				first.Stop(t)
				if _, err := web.svc.Resume(ctx, owner, res.Sandbox.ID); err != nil {
					t.Fatal(err)
				}
				crashJob(t, web, "resume", res.Sandbox.ID)
				return res.Sandbox.ID
			},
			finished: sandbox.Running, failed: sandbox.ResumeFailed,
			check: func(t *testing.T, b *testBundle, host *sandboxdtest.Host, _ *e2b.Client, sb db.Sandbox) {
				if sb.Status == sandbox.Running {
					visits(t, host, sb.PreviewURL)
					return
				}
				if sb.FailureCause == nil || *sb.FailureCause != sandbox.CauseUnreachable {
					t.Fatalf("failure cause %v", sb.FailureCause)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host := sandboxdtest.Start(t)
			client := providerFor(t, host)
			cfg := fastConfig()
			cfg.IdleTimeout = 10 * time.Minute // a finished build stays running, to be seen
			if tt.failed == sandbox.ResumeFailed {
				cfg.PauseAfterReady = "immediate" // a paused sandbox to resume
			}
			first := instance(t, instanceOptions{host: host, config: cfg, work: true})
			web := instance(t, instanceOptions{host: host, databaseURL: first.DatabaseURL, config: cfg})
			u, p := founder(t, web.pool, 5)
			id := tt.crash(t, first, web, client, u.ID, p.ID)
			if s := web.get(t, id).Status; s != sandbox.Starting && s != sandbox.Resuming {
				t.Fatalf("the crash left the sandbox %s", s)
			}

			survivor := instance(t, instanceOptions{host: host, databaseURL: first.DatabaseURL, config: cfg, work: true})
			var sb db.Sandbox
			testkit.Eventually(t, 30*time.Second, "another instance to move the sandbox on", func() error {
				if sb = survivor.get(t, id); sb.Status == sandbox.Starting || sb.Status == sandbox.Resuming {
					return fmt.Errorf("it is still %s", sb.Status)
				}
				return nil
			})
			if sb.Status != tt.finished && sb.Status != tt.failed {
				t.Fatalf("the sandbox ended %s, want %s or %s: %s", sb.Status, tt.finished, tt.failed, history(survivor.eventsOf(t, id)))
			}
			t.Logf("the survivor ended it %s: %s", sb.Status, history(survivor.eventsOf(t, id)))
			tt.check(t, survivor, host, client, sb)
			// The dead worker's job does not stay "running" either: River rescues it, and the
			// retry sees the work done (or finishes it).
			kind := map[bool]string{true: "build", false: "resume"}[tt.failed == sandbox.Terminated]
			testkit.Eventually(t, 30*time.Second, "the crashed "+kind+" job to complete", func() error {
				if state := jobState(t, survivor, kind, id); state != "completed" {
					return fmt.Errorf("it is %s", state)
				}
				return nil
			})
			// Nothing moved it again afterwards.
			if again := survivor.get(t, id); again.Status != sb.Status {
				t.Fatalf("the sandbox moved on from %s to %s", sb.Status, again.Status)
			}
			audit := apptest.AuditDB(t, survivor.pool)
			testkit.Record(t, testkit.Scenario{ID: tt.id, Times: 1, Counts: audit,
				Injected: "an instance dead in the middle of a " + kind + " (its job left running, its sandbox's last change an hour old, as a killed process leaves them)",
				Result:   "another instance finishes it or fails it cleanly (River's rescuer, the sweep); a failed build's sandbox is killed and its credit refunded"})
		})
	}
}

// TestStoppedInstanceLeavesItsJobToAnother stops an instance in the middle of a build and of a
// resume, giving its running jobs less time than they need (a deploy, an autoscaler): the job is
// cut, River keeps it for a retry, and another instance finishes it. Nothing is charged twice,
// and no second provider sandbox is made.
func TestStoppedInstanceLeavesItsJobToAnother(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id, name string
		// begin starts the work on first and returns once it is under way.
		begin func(t *testing.T, first *testBundle, host *sandboxdtest.Host, owner, project uuid.UUID) uuid.UUID
		job   string
	}{
		{
			id: "instance-stopped-mid-build", name: "build", job: "build",
			begin: func(t *testing.T, first *testBundle, _ *sandboxdtest.Host, owner, project uuid.UUID) uuid.UUID {
				// An install that outlasts the instance's shutdown wait (2 s in tests).
				if _, err := first.pool.Exec(context.Background(), `UPDATE projects SET install_command = 'sleep 5 && ' || install_command WHERE id = $1`, project); err != nil {
					t.Fatal(err)
				}
				res, err := first.svc.StartBuild(context.Background(), lifecycle.Actor{Founder: owner}, project, "k", false)
				if err != nil {
					t.Fatal(err)
				}
				first.waitBuildStage(t, res.Sandbox, lifecycle.StageInstalling)
				return res.Sandbox.ID
			},
		},
		{
			id: "instance-stopped-mid-resume", name: "resume", job: "resume",
			begin: func(t *testing.T, first *testBundle, host *sandboxdtest.Host, owner, project uuid.UUID) uuid.UUID {
				ctx := context.Background()
				res, err := first.svc.StartBuild(ctx, lifecycle.Actor{Founder: owner}, project, "k", false)
				if err != nil {
					t.Fatal(err)
				}
				sb := first.waitStatus(t, res.Sandbox.ID, sandbox.Paused, time.Minute)
				host.InjectFault(t, sandboxd.Fault{Route: connectRoute, SandboxID: *sb.ProviderID, LatencyMs: 5000, Count: 1})
				if _, err := first.svc.Resume(ctx, owner, sb.ID); err != nil {
					t.Fatal(err)
				}
				testkit.Until(t, 30*time.Second, "the resume's connect in flight", func() bool { return remainingUses(t, host, connectRoute) == 0 })
				return sb.ID
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host := sandboxdtest.Start(t)
			cfg := fastConfig()
			cfg.IdleTimeout = 10 * time.Minute // what runs stays running, to be seen
			if tt.job == "resume" {
				cfg.PauseAfterReady = "immediate" // a paused sandbox to resume
			}
			first := instance(t, instanceOptions{host: host, config: cfg, work: true})
			u, p := founder(t, first.pool, 5)
			id := tt.begin(t, first, host, u.ID, p.ID)
			providerID := first.get(t, id).ProviderID
			first.Stop(t) // its 2 s are not enough: the job is cut

			survivor := instance(t, instanceOptions{host: host, databaseURL: first.DatabaseURL, config: cfg, work: true})
			sb := survivor.waitStatus(t, id, sandbox.Running, time.Minute)
			visits(t, host, sb.PreviewURL)
			if tt.job == "build" {
				build, err := db.New(survivor.pool).GetBuild(context.Background(), sb.BuildID)
				if err != nil || build.Status != sandbox.BuildReady {
					t.Fatalf("build %+v %v, want ready", build, err)
				}
				if providerID == nil || *sb.ProviderID != *providerID {
					t.Fatalf("the build's provider sandbox changed from %v to %v: the retry made another", providerID, sb.ProviderID)
				}
			}
			testkit.Eventually(t, 30*time.Second, "the cut "+tt.job+" job to complete on the survivor", func() error {
				if state := jobState(t, survivor, tt.job, id); state != "completed" {
					return fmt.Errorf("it is %s", state)
				}
				return nil
			})
			listed, err := providerFor(t, host).ListAllSandboxes(context.Background(), e2b.ListParams{Metadata: map[string]string{lifecycle.MetaApp: "sandman"}})
			if err != nil || len(listed) != 1 {
				t.Fatalf("the provider has %d sandboxes (%v), want the one", len(listed), err)
			}
			if got := credits(t, survivor.pool, u.ID); got != 4 {
				t.Fatalf("credits = %d, want 5 - 1", got)
			}
			audit := apptest.AuditDB(t, survivor.pool)
			testkit.Record(t, testkit.Scenario{ID: tt.id, Times: 1, Counts: audit,
				Injected: "the instance running the " + tt.job + " stopped with 2 s of grace, less than the job needs (" +
					map[string]string{"build": "an install of 5 s", "resume": "a connect held 5 s"}[tt.job] + ")",
				Result: "the cut job retried and finished by another instance: running, one provider sandbox, charged once"})
		})
	}
}
