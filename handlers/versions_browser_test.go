package handlers_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// The founder steers versions from the browser without JavaScript: the Versions section lists
// them newest first with their counts, a version's changes show a unified diff for text and
// "binary" otherwise, Restore makes a new version, Restore this file takes one file, Upload a
// new version makes one from files, and the reload choice is saved. Every page passes axe-core
// and fits a phone.
func TestVersionsPagesWithoutJavaScript(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("versions-browser@example.com")
	pid := newCounter(t, c)
	server := fileOf(t, c, pid, 1, "server.js").Body
	v2server := strings.Replace(server, "Counted in memory", "Counted in memory, version two", 1)
	r, _ := postVersion(t, c, pid, map[string]any{"message": "Say which version", "files": []vfile{text("server.js", v2server),
		{"path": "logo.png", "base64": base64.StdEncoding.EncodeToString([]byte{0x89, 'P', 'N', 'G', 0, 1})}}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)

	browser := apptest.NewBrowser(t)
	tab := browser.OpenWithoutJavaScript(t, s.URL()+"/login")
	tab.LogIn(t, s.URL(), "versions-browser@example.com")
	// axe-core needs scripts: the pages are checked in a tab of their own, with them.
	_, checker := s.Browse(t, "versions-browser@example.com")
	everyone := func(path, name, shows string) {
		t.Helper()
		checker.Do(t, chromedp.Navigate(s.URL()+path))
		checkForEveryone(t, checker, name, shows)
	}
	tab.Do(t, chromedp.Navigate(s.URL()+"/projects/"+pid))
	rows := apptest.Eval[[]string](t, tab, `[...document.querySelectorAll("[data-testid=version-row]")].map(r =>
		r.dataset.version + " " + r.querySelector("[data-testid=version-source]").textContent + " " + r.querySelector("[data-testid=version-counts]").textContent)`)
	if strings.Join(rows, "|") != "2 From the API +1 ~1 −0|1 Created +2 ~0 −0" {
		t.Fatalf("the Versions section lists %q", rows)
	}
	everyone("/projects/"+pid, "versions-section", `!!document.querySelector("[data-testid=version-row]")`)

	// Version 2's changes: a diff of server.js, the logo as binary.
	tab.Do(t, chromedp.Click(chromedp.CSS(`[data-version="2"] [data-testid=version-changes]`)))
	tab.WaitFor(t, "version 2's changes", `location.pathname.endsWith("/versions/2")`)
	diff := apptest.Eval[string](t, tab, `document.querySelector("[data-path='server.js'] [data-testid=diff]").textContent`)
	if !strings.Contains(diff, "+<body><main><h1 id=\"visits\">Visits: ${visits}</h1><p>Counted in memory, version two") || !strings.Contains(diff, "-<body>") {
		t.Fatalf("the diff of server.js:\n%s", diff)
	}
	if got := apptest.Eval[string](t, tab, `document.querySelector("[data-path='logo.png'] [data-testid=binary]").textContent`); got != "Binary file added." {
		t.Fatalf("the logo shows %q", got)
	}
	everyone("/projects/"+pid+"/versions/2", "version-changes", `!!document.querySelector("[data-path='server.js'] [data-testid=diff]")`)

	// Restore version 1 from the build page: version 3, version 1's files.
	tab.Do(t, chromedp.Navigate(s.URL()+"/projects/"+pid), chromedp.Click(chromedp.CSS(`[data-version="1"] [data-testid=version-restore]`)))
	tab.WaitFor(t, "version 3 listed", `document.querySelector("[data-testid=version-row]")?.dataset.version === "3"`)
	if f := fileOf(t, c, pid, 3, "server.js"); f.Body != server || fileOf(t, c, pid, 3, "logo.png").Status != http.StatusNotFound {
		t.Fatalf("version 3 is not version 1 restored: server.js %.80q", f.Body)
	}
	// Restore one file of version 2: version 4 has its server.js, and no logo.
	tab.Do(t, chromedp.Navigate(s.URL()+"/projects/"+pid+"/versions/2"),
		chromedp.Click(chromedp.CSS(`[data-path='server.js'] [data-testid=restore-file]`)))
	tab.WaitFor(t, "version 4 listed", `document.querySelector("[data-testid=version-row]")?.dataset.version === "4"`)
	if fileOf(t, c, pid, 4, "server.js").Body != v2server || fileOf(t, c, pid, 4, "logo.png").Status != http.StatusNotFound {
		t.Fatal("version 4 does not hold version 2's server.js alone")
	}

	// Upload a new version: the files are the whole set.
	dir := t.TempDir()
	up := filepath.Join(dir, "index.html")
	if err := os.WriteFile(up, []byte("<h1>Uploaded</h1>"), 0o644); err != nil {
		t.Fatal(err)
	}
	tab.Do(t, chromedp.Click(chromedp.CSS(`[data-testid=upload-version]`)))
	tab.WaitFor(t, "the upload form", `location.pathname.endsWith("/versions/new")`)
	everyone("/projects/"+pid+"/versions/new", "upload-version", `!!document.querySelector("[data-testid=upload-version-submit]")`)
	tab.Do(t, chromedp.SetUploadFiles(chromedp.ID("files"), []string{up}), chromedp.SendKeys(chromedp.ID("message"), "From the browser"),
		chromedp.Click(chromedp.CSS(`[data-testid=upload-version-submit]`)))
	tab.WaitFor(t, "version 5 listed", `document.querySelector("[data-testid=version-row]")?.dataset.version === "5"`)
	if got := apptest.Eval[string](t, tab, `document.querySelector("[data-version='5'] [data-testid=version-message]").textContent + " · " +
		document.querySelector("[data-version='5'] [data-testid=version-source]").textContent`); got != "From the browser · Uploaded by you" {
		t.Fatalf("version 5 reads %q", got)
	}
	// A stale form (another writer made a version meanwhile) is refused, naming the current one.
	tab.Do(t, chromedp.Navigate(s.URL()+"/projects/"+pid+"/versions/new"))
	r, _ = postVersion(t, c, pid, map[string]any{"files": []vfile{text("other.txt", "another writer")}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	tab.Do(t, chromedp.SetUploadFiles(chromedp.ID("files"), []string{up}), chromedp.Click(chromedp.CSS(`[data-testid=upload-version-submit]`)))
	tab.WaitFor(t, "the conflict said", `document.body.textContent.includes("version 6 is")`)

	// The reload choice.
	tab.Do(t, chromedp.Navigate(s.URL()+"/projects/"+pid), chromedp.Click(chromedp.CSS(`[data-testid=reload-itself]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=reload-save]`)))
	testkit.Eventually(t, 30*time.Second, "the reload choice saved", func() error {
		var projects []struct{ ReloadsItself bool }
		apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &projects), http.StatusOK)
		if len(projects) != 1 || !projects[0].ReloadsItself {
			return fmt.Errorf("the API says %+v", projects)
		}
		return nil
	})
}

// A running preview takes a new version live: the build page's frame and a share link
// visitor's frame reload by themselves and show it, the pane says the version is live, and the
// dashboard's card says v2.
func TestNewVersionReloadsTheOpenPreviews(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("live-versions@example.com")
	pid, sid := c.BuildCounter()
	sb := c.WaitSandbox(sid, "running", time.Minute)
	token := shareToken(t, c, pid)

	browser, _ := s.Browse(t, "live-versions@example.com")
	page := browser.Open(t, s.URL()+"/projects/"+pid)
	page.FrameText(t, sb.PreviewURL, "Counted in memory since")
	visitor := apptest.NewBrowser(t).Open(t, s.URL()+"/s/"+token)
	visitor.FrameText(t, sb.PreviewURL, "Counted in memory since")

	server := fileOf(t, c, pid, 1, "server.js").Body
	r, _ := postVersion(t, c, pid, map[string]any{"files": []vfile{text("server.js",
		strings.Replace(server, "Counted in memory since", "Version two, counted since", 1))}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	page.FrameText(t, sb.PreviewURL, "Version two, counted since")
	page.WaitFor(t, "the pane saying version 2 is live", `document.querySelector("[data-testid=preview-pane] [data-testid=version-live]")?.textContent.startsWith("Version 2 is live")`)
	visitor.FrameText(t, sb.PreviewURL, "Version two, counted since")
	page.Do(t, chromedp.Navigate(s.URL()+"/"))
	page.WaitFor(t, "the card's v2", `document.querySelector("[data-testid=version-live]")?.textContent === "v2"`)
}
