package sandboxd_test

import (
	"strings"
	"testing"

	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// TestFilesFaultDamagesAtResume damages files of a paused sandbox at its resume, as the
// provider's users still see it (E2B#884): deleted, or corrupted to other bytes of the same
// size, whichever snapshot the sandbox was paused with; only the resume the fault was meant for.
func TestFilesFaultDamagesAtResume(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for _, memory := range []bool{true, false} {
		sb := c.create(nil)
		p := "/sandboxes/" + sb.SandboxID
		c.upload(sb, "/home/user/app/index.html", "<h1>hello</h1>")
		c.upload(sb, "/home/user/app/lib/util.js", "module.exports = 1;\n")
		c.upload(sb, "/home/user/app/keep.txt", "keep me")
		c.upload(sb, "/home/user/app/data.bin", "\x00\x01\xfe")
		c.must(204, "POST", p+"/pause", map[string]any{"memory": memory}, nil)
		c.h.DamageAtResume(t, sb.SandboxID, sandboxd.DamageDelete, "app/index.html", "/home/user/app/lib", "app/not-there")
		c.h.InjectFault(t, sandboxd.Fault{SandboxID: sb.SandboxID, Files: []string{"app/data.bin"}, Damage: sandboxd.DamageCorrupt, Count: 1})
		c.must(201, "POST", p+"/connect", map[string]any{"timeout": 60}, nil)
		res := c.run(sb, `cd /home/user/app && ls -A && od -An -tx1 data.bin && cat keep.txt`)
		if res.exitCode != 0 || strings.Fields(res.stdout)[0] != "data.bin" || strings.Fields(res.stdout)[1] != "keep.txt" ||
			!strings.Contains(res.stdout, "ff fe 01") || !strings.HasSuffix(res.stdout, "keep me") {
			t.Fatalf("memory=%v: after the damaging resume the app directory holds %q (exit %d, %s)", memory, res.stdout, res.exitCode, res.stderr)
		}
		// Used up: the next resume damages nothing.
		c.upload(sb, "/home/user/app/index.html", "<h1>hello</h1>")
		c.must(204, "POST", p+"/pause", map[string]any{"memory": memory}, nil)
		c.must(201, "POST", p+"/connect", map[string]any{"timeout": 60}, nil)
		if res := c.run(sb, `cat /home/user/app/index.html && od -An -tx1 /home/user/app/data.bin`); !strings.Contains(res.stdout, "<h1>hello</h1>") ||
			!strings.Contains(res.stdout, "ff fe 01") {
			t.Fatalf("memory=%v: a second resume damaged again: %q", memory, res.stdout)
		}
	}
	// A fault for another sandbox, and a resume of a running one, damage nothing.
	a, b := c.create(nil), c.create(nil)
	c.upload(a, "/home/user/app/x", "x")
	c.h.DamageAtResume(t, b.SandboxID, sandboxd.DamageDelete, "app/x")
	c.must(204, "POST", "/sandboxes/"+a.SandboxID+"/pause", nil, nil)
	c.must(201, "POST", "/sandboxes/"+a.SandboxID+"/connect", map[string]any{"timeout": 60}, nil)
	c.must(200, "POST", "/sandboxes/"+a.SandboxID+"/connect", map[string]any{"timeout": 60}, nil)
	if res := c.run(a, "cat /home/user/app/x"); res.stdout != "x" {
		t.Fatalf("another sandbox's fault damaged this one: %q", res.stdout)
	}

	for _, bad := range []sandboxd.Fault{
		{Files: []string{"app/x"}},
		{Files: []string{"app/x"}, Damage: "shred"},
		{Damage: sandboxd.DamageDelete},
		{Files: []string{"app/x"}, Damage: sandboxd.DamageDelete, Route: "*", Status: 500},
		{Files: []string{"/home/user"}, Damage: sandboxd.DamageDelete},
		{Files: []string{"/etc/passwd"}, Damage: sandboxd.DamageCorrupt},
	} {
		c.must(400, "POST", "/_sandboxd/faults", bad, nil)
	}
}

// TestLoseLeavesNoTrace removes a sandbox the way the provider sometimes loses one (E2B#1381):
// gone from every answer, with no killed event and no webhook.
func TestLoseLeavesNoTrace(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "l")
	c := newClient(t, sandboxdtest.WithWebhook(rcv.srv.URL, "l"))
	lost := c.create(nil)
	c.must(204, "POST", "/_sandboxd/sandboxes/"+lost.SandboxID+"/lose", nil, nil)
	c.must(404, "GET", "/sandboxes/"+lost.SandboxID, nil, nil)
	c.must(404, "POST", "/sandboxes/"+lost.SandboxID+"/connect", map[string]any{"timeout": 60}, nil)
	var listed []sandboxDetail
	c.must(200, "GET", "/v2/sandboxes", nil, &listed)
	for _, l := range listed {
		if l.SandboxID == lost.SandboxID {
			t.Fatal("a lost sandbox is still listed")
		}
	}
	// One webhook's deliveries go out in event order: once the next sandbox's created event
	// is in, anything the loss sent would have been delivered first.
	next := c.create(nil)
	got := rcv.waitEvents(2)
	if len(rcv.received()) != 2 || got[0].SandboxID != lost.SandboxID || got[1].SandboxID != next.SandboxID {
		t.Fatalf("webhooks after a loss: %s", mustJSON(t, rcv.received()))
	}
	if evs := c.events("/" + lost.SandboxID); len(evs) != 1 || evs[0].Type != "sandbox.lifecycle.created" {
		t.Fatalf("events of a lost sandbox: %s", mustJSON(t, evs))
	}
	c.must(404, "POST", "/_sandboxd/sandboxes/"+lost.SandboxID+"/lose", nil, nil)
}

// TestContractOf2026 checks what changed in the provider's API during 2026 where Sandman or the
// SDKs use it: lifecycle fields stored and read back, timeout ≤ 0 refused on create, connect and
// resume, and envd's version taken afresh at every resume.
func TestContractOf2026(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for _, tt := range []struct {
		body       map[string]any
		onTimeout  string
		autoResume bool
	}{
		{map[string]any{"autoPause": false, "autoResume": map[string]any{"enabled": false}}, "kill", false},
		{map[string]any{"autoPause": true, "autoPauseMemory": false, "autoResume": map[string]any{"enabled": false}}, "pause", false},
		{map[string]any{"autoPause": true, "autoResume": map[string]any{"enabled": true}}, "pause", true},
		{map[string]any{}, "kill", false},
	} {
		sb := c.create(tt.body)
		for _, state := range []string{"running", "paused"} {
			if state == "paused" {
				c.must(204, "POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, nil)
			}
			if d := c.info(sb.SandboxID); d.Lifecycle.OnTimeout != tt.onTimeout || d.Lifecycle.AutoResume != tt.autoResume {
				t.Errorf("created with %v, %s: lifecycle %+v, want onTimeout %s autoResume %v", tt.body, state, d.Lifecycle, tt.onTimeout, tt.autoResume)
			}
		}
	}

	sb := c.create(nil)
	p := "/sandboxes/" + sb.SandboxID
	for _, timeout := range []int{0, -1} {
		c.must(400, "POST", "/sandboxes", map[string]any{"templateID": "base", "timeout": timeout}, nil)
		c.must(400, "POST", p+"/connect", map[string]any{"timeout": timeout}, nil) // running
	}
	c.must(204, "POST", p+"/pause", nil, nil)
	for _, timeout := range []int{0, -1} {
		c.must(400, "POST", p+"/connect", map[string]any{"timeout": timeout}, nil) // paused
		c.must(400, "POST", p+"/resume", map[string]any{"timeout": timeout}, nil)
	}
	if d := c.info(sb.SandboxID); d.State != "paused" {
		t.Fatalf("a refused resume resumed it: %+v", d)
	}

	// envd is upgraded while the sandbox sleeps: the resume answers the new version, and so
	// does every answer after it, while a sandbox that stays paused keeps its own.
	stays := c.create(nil)
	c.must(204, "POST", "/sandboxes/"+stays.SandboxID+"/pause", nil, nil)
	if sb.EnvdVersion != sandboxd.DefaultEnvdVersion {
		t.Fatalf("created with envd %q, want %q", sb.EnvdVersion, sandboxd.DefaultEnvdVersion)
	}
	c.h.RestartWith(t, func(cfg *sandboxd.Config) { cfg.EnvdVersion = "0.7.1" })
	var resumed sandboxBody
	c.must(201, "POST", p+"/connect", map[string]any{"timeout": 60}, &resumed)
	var detail struct {
		EnvdVersion string `json:"envdVersion"`
	}
	c.must(200, "GET", p, nil, &detail)
	if resumed.EnvdVersion != "0.7.1" || detail.EnvdVersion != "0.7.1" {
		t.Fatalf("after an upgrade the resume answered envd %q and the detail %q, want 0.7.1", resumed.EnvdVersion, detail.EnvdVersion)
	}
	c.must(200, "GET", "/sandboxes/"+stays.SandboxID, nil, &detail)
	if detail.EnvdVersion != sandboxd.DefaultEnvdVersion {
		t.Fatalf("a sandbox still paused reports envd %q, want its own %q", detail.EnvdVersion, sandboxd.DefaultEnvdVersion)
	}
	sb.EnvdAccessToken = resumed.EnvdAccessToken
	if res := c.run(sb, "echo ok"); res.stdout != "ok\n" {
		t.Fatalf("envd after the upgrade: %+v", res)
	}
}
