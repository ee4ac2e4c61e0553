package handlers_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/projects"
	"sandman/sandbox"
	"sandman/sandboxd"
	"sandman/views"
)

// TestBrowserHealedResume: the founder's sleeping preview lost two of its files at the
// provider (sandboxd's files fault). Resume restores them before saying "Live preview ready":
// the frame in Chromium shows the site, the preview answers over HTTP, and the history on the
// page says what was restored, naming the files. When the files cannot be restored (the whole
// app directory gone), the pane says why and offers Rebuild.
func TestBrowserHealedResume(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	c := s.NewClient(t)
	c.SignUp("heal@example.com")
	projectID, sandboxID := c.BuildStarter("Landing", "static")
	c.Pause(sandboxID)
	sb := c.WaitSandbox(sandboxID, "paused", time.Second)
	s.Host.DamageAtResume(t, sb.ProviderID, sandboxd.DamageDelete, "app/public/index.html", "app/public/style.css")

	browser, _ := s.Browse(t, "heal@example.com")
	page := browser.Open(t, s.URL()+"/projects/"+projectID)
	page.WaitFor(t, "the pane paused", statusIs(views.Pane, projectID, "paused"))
	page.WaitFor(t, "the stream", pageSettled)
	click(t, page, "#"+views.DOMID(views.Pane, projectID)+" [data-testid=resume]")
	resumed := c.WaitSandbox(sandboxID, "running", time.Minute)
	page.WaitFor(t, "the pane running", statusIs(views.Pane, projectID, "running"))
	page.FrameText(t, resumed.PreviewURL, "Acme Rockets")

	// Over HTTP too: the restored files are the stored ones, byte for byte (a page less the tag
	// the preview proxy adds).
	starter, err := projects.StarterFiles("static")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range starter {
		if !strings.HasPrefix(f.Path, "public/") {
			continue
		}
		res, err := s.Host.HTTPClient().Get(strings.TrimSuffix(resumed.PreviewURL, "/") + strings.TrimPrefix(f.Path, "public"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || withoutReporter(string(body)) != string(f.Content) {
			t.Fatalf("the preview's %s answered %d %.200q, want the stored file", f.Path, res.StatusCode, body)
		}
	}

	// Newest first: "Resumed by you", then the heal, its files in a details element.
	page.WaitFor(t, "the heal in the history", textIs("[data-testid=history-entry]:nth-child(2) [data-testid=history-text]",
		"Restored 2 files the provider lost"))
	files := apptest.Eval[string](t, page, `[...document.querySelectorAll("[data-testid=history-files] li")].map(li => li.textContent).join(",")`)
	if files != "public/index.html,public/style.css" {
		t.Fatalf("the history names %q", files)
	}
	if !apptest.Eval[bool](t, page, `document.querySelector("[data-testid=history-files]").closest("details") !== null`) {
		t.Fatal("the restored files are not in a details element")
	}
	checkForEveryone(t, page, "build-healed", statusIs(views.Pane, projectID, "running"))

	// Lost for good: the whole app directory.
	c.Pause(sandboxID)
	s.Host.DamageAtResume(t, sb.ProviderID, sandboxd.DamageDelete, "app")
	page.WaitFor(t, "the pane paused again", statusIs(views.Pane, projectID, "paused"))
	click(t, page, "#"+views.DOMID(views.Pane, projectID)+" [data-testid=resume]")
	failed := c.WaitSandbox(sandboxID, "resume_failed", time.Minute)
	filesLost := views.CauseText(new(sandbox.CauseFilesLost), "")
	if failed.FailureCause != filesLost || failed.FailureCode != string(sandbox.CauseFilesLost) {
		t.Fatalf("failure cause %q, code %q", failed.FailureCause, failed.FailureCode)
	}
	page.WaitFor(t, "the pane failed", statusIs(views.Pane, projectID, "resume_failed"))
	pane := "#" + views.DOMID(views.Pane, projectID)
	page.WaitFor(t, "the cause and Rebuild", `document.querySelector(`+jsString(pane)+`).textContent.includes(`+jsString(filesLost)+`) && `+
		`!!document.querySelector(`+jsString(pane+" [data-testid=rebuild]")+`)`)
	page.WaitFor(t, "the failure in the history", historyTop("Resume failed: the provider lost its files and they couldn't be restored"))
	if text := apptest.Eval[string](t, page, `document.querySelector(`+jsString(pane)+`).textContent`); strings.Contains(text, "Live preview ready") {
		t.Fatalf("a preview that lost its files reads as live: %q", text)
	}
	checkForEveryone(t, page, "build-files-lost", statusIs(views.Pane, projectID, "resume_failed"))
}
