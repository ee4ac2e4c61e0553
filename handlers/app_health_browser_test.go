package handlers_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// brokenServer is a server.js that prints a line and then throws at its start, with unique
// markers for what it printed and the error it threw.
func brokenServer() (src, printed, thrown string) {
	id := uuid.NewString()[:8]
	printed, thrown = "printed-"+id, "broken-"+id
	return `console.log("` + printed + `");
throw new Error("` + thrown + ` on purpose");
`, printed, thrown
}

// noReload marks the tab's document: a reload (or a navigation) loses the mark.
const (
	markDocument = `(window.sandmanNoReload = true)`
	notReloaded  = `window.sandmanNoReload === true`
)

// A running preview whose new version's server exits: within seconds and without a reload the
// pane says "Version 2 doesn't start" with the problem's detail in a pre, offers Restore version
// 1 first (and no Rebuild), never says "Live preview ready"; the card counts the open problem;
// the Logs panel shows the line the server printed as it arrives; the text for the AI holds the
// version, the message, the detail and the files the version changed; a rebuild asked for
// anyway warns; and Restore brings the preview back and closes the problem.
func TestBrowserAVersionThatDoesNotStartIsToldWithTheWayOut(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	email := "no-start-" + uuid.NewString()[:8] + "@example.com"
	c.SignUp(email)
	pid, sid := c.BuildCounter()
	sb := c.WaitSandbox(sid, "running", 90*time.Second)

	browser, _ := s.Browse(t, email)
	page := browser.Open(t, s.URL()+"/projects/"+pid)
	page.FrameText(t, sb.PreviewURL, "Counted in memory since")
	page.WaitFor(t, "the document marked", markDocument)
	cards := browser.Open(t, s.URL()+"/")
	cards.WaitFor(t, "the card", `document.querySelector("[data-testid=project-card]") !== null`)
	cards.WaitFor(t, "the document marked", markDocument)

	src, printed, thrown := brokenServer()
	r, _ := postVersion(t, c, pid, map[string]any{"files": []vfile{text("server.js", src)}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	posted := time.Now()

	pane := `document.querySelector("[data-testid=preview-pane]")`
	page.WaitFor(t, "the pane saying version 2 doesn't start", pane+`?.querySelector("[data-testid=pane-heading]")?.textContent.trim() === "Version 2 doesn't start"`)
	if took := time.Since(posted); took > 30*time.Second {
		t.Errorf("the pane told it %s after the version was posted", took)
	}
	page.WaitFor(t, "the detail in a pre, with the thrown error", pane+`?.querySelector("pre[data-testid=problem-detail]")?.textContent.includes("`+thrown+`")`)
	page.WaitFor(t, "Restore version 1 offered first, no Rebuild, no live frame, no ready",
		`(() => { const p = `+pane+`; const b = p.querySelector(".actions button, .actions a");
		  return b && b.dataset.testid === "restore-previous" && b.textContent.trim() === "Restore version 1" &&
		    !p.querySelector("[data-testid=rebuild]") && !p.querySelector("iframe") && !p.textContent.includes("Live preview ready"); })()`)
	page.WaitFor(t, "the printed line in the Logs panel", `Array.from(document.querySelectorAll("#logs [data-testid=log-text]")).some(e => e.textContent.includes("`+printed+`"))`)
	page.WaitFor(t, "the page not reloaded", notReloaded)
	cards.WaitFor(t, "the card's open problem, no Ready", `(() => { const c = document.querySelector("[data-testid=project-card]");
		return c.querySelector("[data-testid=problem-count]")?.textContent.trim() === "1 open problem" && !c.textContent.includes("Ready") &&
		  !c.textContent.includes("Live preview ready"); })()`)
	cards.WaitFor(t, "the dashboard not reloaded", notReloaded)
	checkForEveryone(t, page, "build page of a version that doesn't start", `document.querySelector("[data-testid=problem-detail]") !== null`)

	// The Problems list, drawn when the page is opened again: the text for the AI.
	page.Do(t, chromedp.Navigate(s.URL()+"/projects/"+pid))
	page.WaitFor(t, "the problem listed", `document.querySelector("[data-testid=problem][data-open=true]") !== null`)
	ai := apptest.Eval[string](t, page, `document.querySelector("[data-testid=problem][data-open=true] [data-testid=ai-text]").value`)
	for _, want := range []string{"Version 2", thrown, "- server.js (changed)"} {
		if !strings.Contains(ai, want) {
			t.Errorf("the text for the AI lacks %q:\n%s", want, ai)
		}
	}
	var ps []problemOut
	testkit.Eventually(t, 10*time.Second, "the open problem of version 2", func() error {
		ps = problems(t, c, pid)
		for _, p := range ps {
			if p.Open && p.Version == 2 {
				if !strings.Contains(ai, p.Message) {
					t.Errorf("the text for the AI lacks the message %q:\n%s", p.Message, ai)
				}
				return nil
			}
		}
		return errors.New("not yet")
	})

	q := c.Get("/projects/" + pid + "/rebuild")
	apptest.RequireStatus(t, q, http.StatusOK)
	if w := apptest.ByTestID(t, q.Body, "rebuild-warning"); !strings.Contains(w.Text, "Version 2 did not start") {
		t.Errorf("the rebuild question's warning: %q", w.Text)
	}

	page.Do(t, chromedp.Click(chromedp.CSS(`[data-testid=preview-pane] [data-testid=restore-previous]`)))
	page.FrameText(t, sb.PreviewURL, "Counted in memory since")
	testkit.Eventually(t, 10*time.Second, "the problem closed by the restored version", func() error {
		for _, p := range problems(t, c, pid) {
			if p.Open {
				return errors.New("not yet")
			}
		}
		return nil
	})
}

// A share link's visitor of a preview whose app exits sees our page in place of the frame
// within 2 s of the exit, without a reload and with nothing of the founder's (no provider id,
// no output, no file name); restoring a good version brings the frame back, without a reload.
// Nothing the visitor's page sends wakes or rebuilds anything. A version whose server takes a
// while to answer turns the page to "Starting the latest version…" and then to its frame,
// without a reload.
func TestBrowserAVisitorSeesOurPageWhileTheAppIsDown(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("visitor-down-" + uuid.NewString()[:8] + "@example.com")
	pid, sid := c.BuildCounter()
	sb := c.WaitSandbox(sid, "running", 90*time.Second)
	token := shareToken(t, c, pid)

	visitor := apptest.NewBrowser(t).Open(t, s.URL()+"/s/"+token)
	visitor.FrameText(t, sb.PreviewURL, "Counted in memory since")
	visitor.WaitFor(t, "the document marked", markDocument)

	src, printed, thrown := brokenServer()
	r, _ := postVersion(t, c, pid, map[string]any{"files": []vfile{text("server.js", src)}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)

	state := `document.querySelector("[data-testid=share-state]")`
	visitor.WaitFor(t, "the visitor's not-working page", state+`?.dataset.state === "broken"`)
	seen := time.Now()
	var exitedAt time.Time
	if err := s.Pool().QueryRow(t.Context(), `SELECT app_since FROM sandboxes WHERE id = $1 AND app_status = 'exited'`, sid).Scan(&exitedAt); err != nil {
		t.Fatalf("the app's exit: %v", err)
	}
	if took := seen.Sub(exitedAt); took > 2*time.Second {
		t.Errorf("the visitor saw the app's exit %s after it", took)
	}
	visitor.WaitFor(t, "the page not reloaded", notReloaded)
	body := apptest.Eval[string](t, visitor, `document.body.innerText + document.documentElement.outerHTML`)
	if !strings.Contains(body, "This preview isn't working right now.") || !strings.Contains(body, "Its maker can see why.") {
		t.Errorf("the visitor's page:\n%.1500s", body)
	}
	for _, secret := range []string{sb.ProviderID, printed, thrown, "server.js", "exit code"} {
		if secret != "" && strings.Contains(body, secret) {
			t.Errorf("the visitor's page shows %q", secret)
		}
	}
	if n := apptest.Eval[int](t, visitor, `document.querySelectorAll("iframe, [data-testid=share-state] form").length`); n != 0 {
		t.Errorf("the not-working page has %d frames or forms; want none (nothing a visitor does restarts it)", n)
	}
	checkForEveryone(t, visitor, "visitor's not-working page", state+`?.dataset.state === "broken"`)
	noJS := apptest.NewBrowser(t).OpenWithoutJavaScript(t, s.URL()+"/s/"+token)
	noJS.WaitFor(t, "the not-working page without JavaScript", state+`?.dataset.state === "broken"`)

	// A visitor's wake does nothing to a running sandbox whose app is down.
	if r := s.NewClient(t).PostForm("/s/"+token, url.Values{}); r.Status >= 500 {
		t.Fatalf("a visitor's post: %d", r.Status)
	}
	if n := s.count(t, `SELECT count(*) FROM sandbox_events WHERE sandbox_id = $1 AND source = 'visitor'`, sid); n != 0 {
		t.Errorf("a visitor's post recorded %d events; want none", n)
	}

	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+pid+"/versions/1/restore", map[string]any{}, nil), http.StatusCreated)
	visitor.FrameText(t, sb.PreviewURL, "Counted in memory since")
	visitor.WaitFor(t, "the page not reloaded", notReloaded)

	// A version whose server answers only after 4 s: its app is starting under the live page's
	// event (it records none of its own), and the page says so until the version is up.
	slow := "slow-" + uuid.NewString()[:8]
	r, _ = postVersion(t, c, pid, map[string]any{"files": []vfile{text("server.js", `setTimeout(() => require("http")
  .createServer((q, s) => { s.writeHead(200, { "Content-Type": "text/html" }); s.end("<p>`+slow+` answered</p>"); })
  .listen(Number(process.env.PORT || 3000), "0.0.0.0"), 4000);
`)}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	visitor.WaitFor(t, "the visitor's starting page", state+`?.dataset.state === "updating" &&
		document.querySelector("[data-testid=share-heading]")?.textContent.includes("Starting the latest version…")`)
	visitor.FrameText(t, sb.PreviewURL, slow+" answered")
	visitor.WaitFor(t, "the page not reloaded", notReloaded)
}
