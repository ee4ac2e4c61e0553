package sandboxd_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

func TestRestartKeepsFilesystemSnapshots(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	rcv := newReceiver(t, "restart")
	c.must(201, "POST", "/events/webhooks", map[string]any{"name": "r", "url": rcv.srv.URL, "enabled": true,
		"events": []string{"sandbox.lifecycle.killed"}, "signatureSecret": "restart"}, nil)

	fsPaused := c.create(map[string]any{"metadata": map[string]string{"kind": "fs"}, "secure": true})
	c.run(fsPaused, "echo survived > keep.txt")
	c.must(204, "POST", "/sandboxes/"+fsPaused.SandboxID+"/pause", map[string]any{"memory": false}, nil)

	memPaused := c.create(nil)
	port := appPort(t, c.h)
	c.startCounter(memPaused, port)
	appPid := c.startBackground(memPaused, "sleep 600")
	c.must(204, "POST", "/sandboxes/"+memPaused.SandboxID+"/pause", nil, nil)
	running := c.create(nil)
	before := len(c.events("?limit=100"))

	c.h.Restart(t)

	if err := syscall.Kill(int(appPid), 0); err == nil {
		t.Fatalf("process %d outlived sandboxd", appPid)
	}
	if d := c.info(fsPaused.SandboxID); d.State != "paused" || d.Metadata["kind"] != "fs" {
		t.Fatalf("filesystem snapshot after restart: %+v", d)
	}
	var page []listedSandbox
	c.must(200, "GET", "/v2/sandboxes?state=paused", nil, &page)
	if len(page) != 1 || page[0].SandboxID != fsPaused.SandboxID {
		t.Fatalf("paused list after restart: %+v", page)
	}
	var sb sandboxBody
	c.must(201, "POST", "/sandboxes/"+fsPaused.SandboxID+"/connect", map[string]any{"timeout": 60}, &sb)
	if sb.EnvdAccessToken != fsPaused.EnvdAccessToken {
		t.Fatal("the access token changed across the restart")
	}
	if res := c.run(sb, "cat keep.txt"); res.stdout != "survived\n" {
		t.Fatalf("file after restart: %+v", res)
	}

	// What could not survive is killed, with events and webhooks.
	for _, id := range []string{memPaused.SandboxID, running.SandboxID} {
		c.must(404, "GET", "/sandboxes/"+id, nil, nil)
		evs := c.events("/" + id)
		if evs[0].Type != "sandbox.lifecycle.killed" || evs[0].EventData["kill_reason"] != "orphaned" {
			t.Fatalf("%s: %s", id, mustJSON(t, evs))
		}
	}
	if got := rcv.waitEvents(2); types(got) != "killed killed" {
		t.Fatalf("webhooks after restart: %s", types(got))
	}
	if after := len(c.events("?limit=100")); after != before+3 {
		t.Fatalf("events before %d, after %d: want the old ones kept and 2 kills + 1 resume added", before, after)
	}
}

func TestRestartDeliversPendingWebhooks(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "pending")
	rcv.failFirst = 1
	c := newClient(t, sandboxdtest.WithWebhook(rcv.srv.URL, "pending"), sandboxdtest.WithConfig(func(c *sandboxd.Config) {
		c.WebhookRetryDelay = time.Hour // the retry is still owed at shutdown
	}))
	sb := c.create(nil)
	waitFor(t, "the first attempt", 5*time.Second, func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return rcv.attempts == 1
	})
	c.h.Restart(t)
	got := rcv.waitEvents(1)
	if got[0].SandboxID != sb.SandboxID || got[0].Type != "sandbox.lifecycle.created" {
		t.Fatalf("after restart: %+v", got)
	}
	// The running sandbox did not survive; its kill follows the create.
	if got := rcv.waitEvents(2); !strings.HasSuffix(types(got), "killed") {
		t.Fatalf("after restart: %s", types(got))
	}
}
