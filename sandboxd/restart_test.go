package sandboxd_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

func TestRestartKeepsEverySandboxsFiles(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	rcv := newReceiver(t, "restart")
	c.must(201, "POST", "/events/webhooks", map[string]any{"name": "r", "url": rcv.srv.URL, "enabled": true,
		"events": []string{"sandbox.lifecycle.paused", "sandbox.lifecycle.killed"}, "signatureSecret": "restart"}, nil)

	fsPaused := c.create(map[string]any{"metadata": map[string]string{"kind": "fs"}, "secure": true})
	c.run(fsPaused, "echo fs > keep.txt")
	c.must(204, "POST", "/sandboxes/"+fsPaused.SandboxID+"/pause", map[string]any{"memory": false}, nil)

	memPaused := c.create(nil)
	port := appPort(t, c.h)
	c.startCounter(memPaused, port)
	c.run(memPaused, "echo mem > keep.txt")
	c.must(204, "POST", "/sandboxes/"+memPaused.SandboxID+"/pause", nil, nil)

	running := c.create(map[string]any{"secure": true})
	c.run(running, "echo running > keep.txt")
	marker := "sleep 600." + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	c.startBackground(running, marker)
	waitFor(t, "the background process", 5*time.Second, func() bool { return len(pidsRunning(marker)) > 0 })

	gone := c.create(nil)
	c.must(204, "POST", "/sandboxes/"+gone.SandboxID+"/pause", map[string]any{"memory": false}, nil)
	before := len(c.events("?limit=100"))

	c.h.Restart(t)
	for _, f := range []string{gone.SandboxID, gone.SandboxID + ".ext4"} {
		os.RemoveAll(filepath.Join(c.h.StateDir, "sandboxes", f))
	}
	c.h.Restart(t) // the files went missing while sandboxd was down

	if left := pidsRunning(marker); len(left) > 0 {
		t.Fatalf("processes %v outlived sandboxd", left)
	}
	var page []listedSandbox
	c.must(200, "GET", "/v2/sandboxes?state=paused", nil, &page)
	var ids []string
	for _, p := range page {
		ids = append(ids, p.SandboxID)
	}
	slices.Sort(ids)
	want := []string{fsPaused.SandboxID, memPaused.SandboxID, running.SandboxID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("paused after restart: %v, want %v", ids, want)
	}
	if d := c.info(fsPaused.SandboxID); d.Metadata["kind"] != "fs" {
		t.Fatalf("metadata after restart: %+v", d)
	}
	// After the three pauses by request, the provider's account of the
	// restarts: a paused event for the running sandbox, none for the ones
	// paused already, and a kill for the one whose files are gone.
	if got := rcv.waitEvents(5); types(got) != "paused paused paused paused killed" ||
		got[3].SandboxID != running.SandboxID || got[4].SandboxID != gone.SandboxID {
		t.Fatalf("webhooks across the restarts: %s", mustJSON(t, got))
	}
	if evs := c.events("/" + gone.SandboxID); evs[0].Type != "sandbox.lifecycle.killed" || evs[0].EventData["kill_reason"] != "orphaned" {
		t.Fatalf("lost sandbox: %s", mustJSON(t, evs))
	}
	c.must(404, "GET", "/sandboxes/"+gone.SandboxID, nil, nil)
	if after := len(c.events("?limit=100")); after != before+2 {
		t.Fatalf("events before %d, after %d: want the old ones kept, a pause and a kill added", before, after)
	}

	// Each resumes cold, with its files and without its processes.
	for _, sb := range []sandboxBody{fsPaused, memPaused, running} {
		var resumed sandboxBody
		c.must(201, "POST", "/sandboxes/"+sb.SandboxID+"/connect", map[string]any{"timeout": 60}, &resumed)
		if resumed.EnvdAccessToken != sb.EnvdAccessToken {
			t.Fatal("the access token changed across the restart")
		}
		if res := c.run(resumed, "cat keep.txt"); !strings.HasSuffix(res.stdout, "\n") || res.exitCode != 0 {
			t.Fatalf("%s: files after restart: %+v", sb.SandboxID, res)
		}
	}
	if status, _ := c.preview(memPaused.SandboxID, port); status != 502 {
		t.Fatalf("the app of the memory-paused sandbox answered %d after a restart; its memory is gone", status)
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
	// The running sandbox stopped with sandboxd; its pause follows the create.
	if got := rcv.waitEvents(2); !strings.HasSuffix(types(got), "paused") {
		t.Fatalf("after restart: %s", types(got))
	}
}
