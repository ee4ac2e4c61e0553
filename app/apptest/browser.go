package apptest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"sandman/internal/testkit"
)

// ChromiumPath is where the browser tests expect Debian's Chromium (`make deps` installs it).
const ChromiumPath = "/usr/bin/chromium"

// Browser is a person's browser in a test: its tabs share cookies, storage and workers (the
// shared event stream), and nothing with another test's Browser. Every Browser of a test binary
// lives in one headless Chromium, started on first use (CloseBrowsers ends it).
type Browser struct{ ctx context.Context }

// chromium is the test binary's one browser process.
var chromium struct {
	once    sync.Once
	ctx     context.Context
	cancel  func()
	dataDir string
	err     error
}

func startChromium() {
	chromium.dataDir, chromium.err = os.MkdirTemp("", "sandman-chromium-")
	if chromium.err != nil {
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(ChromiumPath), chromedp.NoSandbox, chromedp.DisableGPU,
		// This machine has no internet: background fetches would only fail noisily.
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(chromium.dataDir), chromedp.WindowSize(1280, 800))
	// The kernel ends the browser with the test binary (chromedp sets Pdeathsig), so a binary
	// that does not call CloseBrowsers leaves only the data directory behind.
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(alloc)
	chromium.ctx, chromium.cancel = ctx, func() { cancelBrowser(); cancelAlloc() }
	chromium.err = chromedp.Do(ctx)
}

// CloseBrowsers ends the test binary's Chromium, if it started; a TestMain that runs browser
// tests calls it after the tests.
func CloseBrowsers() {
	if chromium.cancel != nil {
		chromium.cancel()
	}
	if chromium.dataDir != "" {
		_ = os.RemoveAll(chromium.dataDir)
	}
}

// NewBrowser gives the test a browser of its own (a separate browser context of the binary's
// Chromium), closed when the test ends. Without Chromium the test fails: browser tests are
// part of the suite, not optional.
func NewBrowser(t testing.TB) *Browser {
	t.Helper()
	testkit.NotInQuickLane(t, "Chromium")
	if _, err := os.Stat(ChromiumPath); err != nil {
		t.Fatalf("browser tests need Debian's Chromium at %s: run `make deps` (apt-get install -y chromium)", ChromiumPath)
	}
	chromium.once.Do(startChromium)
	if chromium.err != nil {
		t.Fatalf("start Chromium: %v", chromium.err)
	}
	ctx, cancel := chromedp.NewContext(chromium.ctx, chromedp.WithNewBrowserContext())
	if err := chromedp.Do(ctx); err != nil { // its first tab, blank, holds the browser context
		cancel()
		t.Fatalf("open a browser context: %v", err)
	}
	t.Cleanup(cancel)
	return &Browser{ctx: ctx}
}

// Tab is one browser tab, with the requests it sent since it opened.
type Tab struct {
	ctx context.Context
	// noScript: the tab runs no script (OpenWithoutJavaScript), not even a timer of DevTools'
	// own, so WaitFor asks again from here.
	noScript bool
	mu       sync.Mutex
	sent     []string // "METHOD URL"
}

// Open opens url in a new tab. When the test fails, the tab's screenshot is saved in the test's
// artifact directory (go test -artifacts keeps it).
func (b *Browser) Open(t testing.TB, url string) *Tab {
	t.Helper()
	return b.open(t, url, false)
}

// OpenWithoutJavaScript opens url in a new tab that runs no script at all, as a browser with
// JavaScript turned off.
func (b *Browser) OpenWithoutJavaScript(t testing.TB, url string) *Tab {
	t.Helper()
	return b.open(t, url, true)
}

// ScriptsBack lets a tab opened without JavaScript run scripts again from now on, for checks
// that need them (axe-core's) on a page drawn without JavaScript: the page's own scripts, never
// run, stay so until it is loaded again.
func (tab *Tab) ScriptsBack(t testing.TB) {
	t.Helper()
	if _, err := chromedp.Call(tab.ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false}); err != nil {
		t.Fatal(err)
	}
}

func (b *Browser) open(t testing.TB, url string, noScript bool) *Tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	tab := &Tab{ctx: ctx, noScript: noScript}
	if err := chromedp.Do(ctx); err != nil { // opens the tab, so its events can be followed
		cancel()
		t.Fatal(err)
	}
	if noScript {
		if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
			cancel()
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			tab.screenshot(t)
		}
		cancel()
	})
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for ev, err := range requests {
			if err != nil {
				return
			}
			tab.mu.Lock()
			tab.sent = append(tab.sent, ev.Request.Method+" "+ev.Request.URL)
			tab.mu.Unlock()
		}
	}()
	tab.Do(t, chromedp.Navigate(url))
	return tab
}

func (tab *Tab) screenshot(t testing.TB) {
	name := filepath.Join(t.ArtifactDir(), "tab-"+strings.ReplaceAll(time.Now().Format("150405.000"), ".", "")+".png")
	if err := tab.saveScreenshot(name); err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot of the failing tab: %s", name)
}

// SaveScreenshot saves a PNG of the tab's whole page (beyond the window too) at path.
func (tab *Tab) SaveScreenshot(t testing.TB, path string) {
	t.Helper()
	if err := tab.saveScreenshot(path); err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
}

func (tab *Tab) saveScreenshot(path string) error {
	ctx, cancel := context.WithTimeout(tab.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

// Phone is the width of the phones the pages must fit (an iPhone's 390 CSS pixels).
const Phone = 390

// Viewport makes the tab a screen of width×height CSS pixels: a phone's (touch, its viewport
// meta honoured) when width is Phone or less, else a desktop window's.
func (tab *Tab) Viewport(t testing.TB, width, height int64) {
	t.Helper()
	opts := []chromedp.EmulateViewportOption{chromedp.EmulatePortrait}
	if width <= Phone {
		opts = append(opts, chromedp.EmulateMobile)
	}
	tab.Do(t, chromedp.EmulateViewport(width, height, opts...))
}

// Overflow describes what makes the page wider than its window (nothing scrolls sideways when
// it is empty): the page's widths and the elements that stick out on the right.
func (tab *Tab) Overflow(t testing.TB) string {
	t.Helper()
	return Eval[string](t, tab, `(() => {
		const root = document.documentElement, w = root.clientWidth;
		if (root.scrollWidth <= w && document.body.scrollWidth <= w) return "";
		const out = [];
		for (const el of document.body.querySelectorAll("*")) {
			const r = el.getBoundingClientRect();
			if (r.width > 0 && r.right > w + 0.5) out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
				(el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : "") + " right=" + Math.round(r.right));
		}
		return "page " + root.scrollWidth + " px wide in a " + w + " px window: " + out.slice(0, 12).join(", ");
	})()`)
}

// Do runs actions in the tab, failing the test on an error or after 30 s.
func (tab *Tab) Do(t testing.TB, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// Eval runs JavaScript in the tab and returns its result (with chromedp.EvalAwaitPromise, the
// result of the promise it returns).
func Eval[T any](t testing.TB, tab *Tab, js string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	v, err := chromedp.Run(tab.ctx, chromedp.Evaluate[T](js, opts...))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// WaitFor waits until the JavaScript condition js holds in the tab, and fails the test with
// the page's text after 30 s.
//
// In a tab without JavaScript the page runs no timer, so an in-page poll (chromedp.Poll) reads
// the condition once and never again: one read while a navigation's page was still arriving
// waited out the 30 s. There the condition is read from here until it holds in a page parsed
// whole (readyState past "loading": the page changes no more, so what the test reads next is
// there too).
func (tab *Tab) WaitFor(t testing.TB, what, js string) {
	t.Helper()
	if tab.noScript {
		testkit.Eventually(t, 30*time.Second, what, func() error {
			ctx, cancel := context.WithTimeout(tab.ctx, 5*time.Second)
			defer cancel()
			ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.readyState !== "loading" && !!(`+js+`)`))
			if err == nil && ok {
				return nil
			}
			if err == nil {
				err = errors.New("not yet")
			}
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body?.innerText ?? ""`))
			return fmt.Errorf("%w\npage text:\n%.1500s", err, text)
		})
		return
	}
	ctx, cancel := context.WithTimeout(tab.ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(20*time.Millisecond)))
		if err == nil {
			return
		}
		// A navigation (the login form's redirect) replaces the page the poll ran in.
		if (strings.Contains(err.Error(), "context with specified id") || strings.Contains(err.Error(), "navigated or closed")) && ctx.Err() == nil {
			continue
		}
		text, _ := chromedp.Run(tab.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("waiting for %s: %v\npage text:\n%.1500s", what, err, text)
	}
}

// Requests returns every request the tab sent so far, as "METHOD URL".
func (tab *Tab) Requests() []string {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	return append([]string(nil), tab.sent...)
}

// Browse starts Chromium and logs in the founder email (made with Client.SignUp) through the
// instance's login form; the tab it returns shows the dashboard.
func (i *Instance) Browse(t testing.TB, email string) (*Browser, *Tab) {
	t.Helper()
	b := NewBrowser(t)
	tab := b.Open(t, i.URL()+"/login")
	tab.LogIn(t, i.URL(), email)
	return b, tab
}

// LogIn signs in through the login form, as a founder would, and waits for the dashboard.
func (tab *Tab) LogIn(t testing.TB, base, email string) {
	t.Helper()
	tab.Do(t, chromedp.Navigate(base+"/login"),
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), Password),
		chromedp.Submit(chromedp.ID("password")))
	tab.WaitFor(t, "the dashboard", `location.pathname === "/"`)
}

// FrameText waits until the tab holds an iframe showing a page whose URL starts with
// urlPrefix and whose text contains want, and returns that text. Previews come from another
// site than Sandman, so Chromium runs them in a process (and target) of their own, which the
// page's DOM does not reach: the frame is read through its own target, as a person sees it.
func (tab *Tab) FrameText(t testing.TB, urlPrefix, want string) string {
	t.Helper()
	var text string
	testkit.Eventually(t, 30*time.Second, "a frame from "+urlPrefix+" showing "+strconv.Quote(want), func() error {
		if text = tab.frameText(urlPrefix); !strings.Contains(text, want) {
			return fmt.Errorf("it shows %.300q", text)
		}
		return nil
	})
	return text
}

// FrameTextNow is the text of the tab's iframe whose URL starts with urlPrefix, or "" when it
// holds none (yet): FrameText without the wait, for a test's own condition.
func (tab *Tab) FrameTextNow(urlPrefix string) string { return tab.frameText(urlPrefix) }

// Context is the tab's chromedp context, for what the helpers here do not do.
func (tab *Tab) Context() context.Context { return tab.ctx }

// FrameActivate runs js in the tab's iframe whose URL starts with urlPrefix (see FrameText),
// marked as a user's gesture (DevTools' userGesture), and returns its result. It stands in for a
// click in the frame, imperfectly: under a sandbox that allows top navigation with a user's
// activation, Chromium did not let it navigate the page around the frame (docs/mutations.md).
func (tab *Tab) FrameActivate(t testing.TB, urlPrefix, js string) string {
	t.Helper()
	infos, err := chromedp.Targets(tab.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if info.Type != "iframe" || !strings.HasPrefix(info.URL, urlPrefix) {
			continue
		}
		frame, cancel := chromedp.NewContext(tab.ctx, chromedp.WithTargetID(info.TargetID), chromedp.WithDetachOnCancel())
		defer cancel()
		ctx, stop := context.WithTimeout(frame, 10*time.Second)
		defer stop()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, func(p *runtime.EvaluateParams) { p.UserGesture = new(true) }))
		if err != nil {
			t.Fatalf("%s in the frame from %s: %v", js, urlPrefix, err)
		}
		return got
	}
	t.Fatalf("no frame from %s in the tab", urlPrefix)
	return ""
}

func (tab *Tab) frameText(urlPrefix string) string {
	infos, err := chromedp.Targets(tab.ctx)
	if err != nil {
		return ""
	}
	for _, info := range infos {
		if info.Type != "iframe" || !strings.HasPrefix(info.URL, urlPrefix) {
			continue
		}
		// Detach only: closing the target would close the frame.
		frame, cancel := chromedp.NewContext(tab.ctx, chromedp.WithTargetID(info.TargetID), chromedp.WithDetachOnCancel())
		ctx, stop := context.WithTimeout(frame, 5*time.Second)
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		stop()
		cancel()
		if err == nil {
			return text
		}
	}
	return ""
}

// TemplateLeftovers is testkit.TemplateLeftovers of the page as the tab holds it now: the
// fragments the live stream swapped in included.
func (tab *Tab) TemplateLeftovers(t testing.TB) []string {
	t.Helper()
	return testkit.TemplateLeftovers(Eval[string](t, tab, `document.documentElement.outerHTML`))
}
