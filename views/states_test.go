package views

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"sandman/internal/testkit"
	"sandman/sandbox"
)

var (
	now     = time.Date(2026, 5, 3, 10, 0, 0, 0, time.UTC)
	project = "0b7e5a3c-1f2d-4e5f-8a9b-0c1d2e3f4a5b"
)

// previewIn is a project's preview in a state, with everything the fragments show.
func previewIn(status sandbox.Status, edit ...func(*Preview)) Preview {
	p := Preview{ProjectID: project, ProjectName: "Counter", Source: "Counter starter", FileCount: 2, Now: now,
		IdleFor: "3 min", EventID: 42}
	if status != "" {
		p.SandboxID, p.BuildID, p.Status, p.BuildStatus = "sb-1", "build-1", status, "ready"
		p.PreviewURL = "http://3000-i1.localhost:8082/"
		p.Why, p.WhyAt = "Paused after 3 min without activity", now.Add(-2*time.Minute)
	}
	switch status {
	case "starting":
		p.BuildStatus, p.Stage = "building", "installing"
	case "running":
		p.SleepsAt = now.Add(3*time.Minute + 20*time.Second)
	case "paused":
		p.SnapshotKind = "memory"
	case "resume_failed":
		p.FailureCause = "The sandbox couldn't be reached. It may be corrupted."
	case "killed":
		p.Why = "Stopped by the provider"
	}
	for _, e := range edit {
		e(&p)
	}
	return p
}

// want is what one fragment says, part by part (data-testid → text; "" is absent).
type want struct {
	parts    map[string]string
	controls []string // "testid: label [cost]", in order
	icon     string
	spinner  bool
}

// The copy of every state on the card and on the pane, exactly as docs/states.md (after
// design.md §2) and issue 8 write it, read by test id.
func TestCopyOfEveryState(t *testing.T) {
	t.Parallel()
	rebuild := "rebuild: Rebuild [1 credit]"
	gone := map[string]string{"killed": "The sandbox is gone. Rebuild the preview from your saved files.",
		"expired": "Every sandbox has a time limit. Rebuild the preview from your saved files.", "terminated": "This sandbox was stopped. Rebuild the preview from your saved files."}
	tests := []struct {
		name       string
		p          Preview
		card, pane want
	}{
		{"not built", previewIn(""),
			want{parts: map[string]string{"build-status": "Not built yet", "preview-state": "No preview yet"}, controls: []string{"build: Build [1 credit]"}, icon: "new"},
			want{parts: map[string]string{"pane-heading": "Not built yet", "pane-line": "Build the project to get a live preview."}, controls: []string{"build: Build [1 credit]"}, icon: "new"}},
		{"starting", previewIn("starting"),
			want{parts: map[string]string{"build-status": "Building", "preview-state": "Installing dependencies"}, icon: "build", spinner: true},
			want{parts: map[string]string{"pane-heading": "Preparing sandbox…", "build-stage": "Installing dependencies"}, icon: "build", spinner: true}},
		{"starting, queued", previewIn("starting", func(p *Preview) { p.Stage = "" }),
			want{parts: map[string]string{"build-status": "Building", "preview-state": "Queued"}, icon: "build", spinner: true},
			want{parts: map[string]string{"pane-heading": "Preparing sandbox…", "build-stage": "Queued"}, icon: "build", spinner: true}},
		{"running", previewIn("running"),
			want{parts: map[string]string{"build-status": "Ready", "preview-state": "Live preview ready", "sleeps-in": "Sleeping in 3 min"},
				controls: []string{"keep-awake: Keep awake", "open: Open", "copy-url: Copy URL", "pause: Pause"}, icon: "live"},
			want{parts: map[string]string{"pane-heading": "Live preview ready", "awake": "Awake while this page is open · sleeps 3 min after you leave",
				"preview-url": "http://3000-i1.localhost:8082/"},
				controls: []string{"open: Open", "copy-url: Copy URL", "pause: Pause"}, icon: "live"}},
		{"running, nearly asleep", previewIn("running", func(p *Preview) { p.SleepsAt = now.Add(59 * time.Second) }),
			want{parts: map[string]string{"build-status": "Ready", "preview-state": "Live preview ready", "sleeps-in": "Sleeping in less than a minute"},
				controls: []string{"keep-awake: Keep awake", "open: Open", "copy-url: Copy URL", "pause: Pause"}, icon: "live"},
			want{parts: map[string]string{"pane-heading": "Live preview ready", "awake": "Awake while this page is open · sleeps 3 min after you leave"},
				controls: []string{"open: Open", "copy-url: Copy URL", "pause: Pause"}, icon: "live"}},
		{"paused with memory", previewIn("paused"),
			want{parts: map[string]string{"build-status": "Ready", "preview-state": "Your preview is sleeping.", "why": "Paused after 3 min without activity · 2 min ago"},
				controls: []string{"resume: Resume preview [Free · about a second]"}, icon: "sleep"},
			want{parts: map[string]string{"pane-heading": "Your preview is sleeping.", "pane-line": "", "why": "Paused after 3 min without activity · 2 min ago"},
				controls: []string{"resume: Resume preview [Free · about a second]"}, icon: "sleep"}},
		{"paused, files only", previewIn("paused", func(p *Preview) { p.SnapshotKind = "filesystem"; p.Why = "Paused by you" }),
			want{parts: map[string]string{"build-status": "Ready", "preview-state": "Your preview is sleeping.", "why": "Paused by you · 2 min ago"},
				controls: []string{"resume: Resume preview [Free · restarts the dev server]"}, icon: "sleep"},
			want{parts: map[string]string{"pane-heading": "Your preview is sleeping.", "why": "Paused by you · 2 min ago"},
				controls: []string{"resume: Resume preview [Free · restarts the dev server]"}, icon: "sleep"}},
		{"resuming", previewIn("resuming"),
			want{parts: map[string]string{"build-status": "Ready", "preview-state": "Resuming preview...", "why": ""}, controls: []string{"resume: Resume preview (disabled)"}, icon: "wake", spinner: true},
			want{parts: map[string]string{"pane-heading": "Resuming preview...", "pane-line": "Waking the sandbox and checking the dev server."},
				controls: []string{"resume: Resume preview (disabled)"}, icon: "wake", spinner: true}},
		{"resume failed", previewIn("resume_failed"),
			want{parts: map[string]string{"build-status": "Ready", "preview-state": "Resume failed"}, controls: []string{rebuild}, icon: "failed"},
			want{parts: map[string]string{"pane-heading": "Resume failed", "pane-line": "The sandbox couldn't be reached. It may be corrupted."}, controls: []string{rebuild}, icon: "failed"}},
		{"killed", previewIn("killed"),
			want{parts: map[string]string{"build-status": "Preview gone", "preview-state": "", "why": "Stopped by the provider · 2 min ago"}, controls: []string{rebuild}, icon: "gone"},
			want{parts: map[string]string{"pane-heading": "Sandbox not found", "pane-line": gone["killed"], "why": "Stopped by the provider · 2 min ago"}, controls: []string{rebuild}, icon: "gone"}},
		{"expired", previewIn("expired", func(p *Preview) { p.Why = "Expired: its time ran out" }),
			want{parts: map[string]string{"build-status": "Preview expired", "preview-state": "", "why": "Expired: its time ran out · 2 min ago"}, controls: []string{rebuild}, icon: "expired"},
			want{parts: map[string]string{"pane-heading": "Sandbox expired", "pane-line": gone["expired"]}, controls: []string{rebuild}, icon: "expired"}},
		{"terminated", previewIn("terminated", func(p *Preview) { p.Why = "Replaced by a rebuild" }),
			want{parts: map[string]string{"build-status": "Preview stopped", "preview-state": "", "why": "Replaced by a rebuild · 2 min ago"}, controls: []string{rebuild}, icon: "stopped"},
			want{parts: map[string]string{"pane-heading": "Sandbox stopped", "pane-line": gone["terminated"]}, controls: []string{rebuild}, icon: "stopped"}},
		{"unknown", previewIn("unknown"),
			want{parts: map[string]string{"build-status": "Ready", "preview-state": "Connection issue", "why": ""}, controls: []string{"retry: Retry", rebuild}, icon: "warn"},
			want{parts: map[string]string{"pane-heading": "Connection issue", "pane-line": "We can't reach the sandbox provider right now to check this preview."},
				controls: []string{"retry: Retry", rebuild}, icon: "warn"}},
		{"build failed", previewIn("terminated", func(p *Preview) {
			p.BuildStatus, p.BuildError = "failed", "Build failed because of the sandbox provider. Your credit was refunded."
		}),
			want{parts: map[string]string{"build-status": "Failed", "preview-state": "Build failed because of the sandbox provider. Your credit was refunded.", "why": ""},
				controls: []string{rebuild}, icon: "broken"},
			want{parts: map[string]string{"pane-heading": "Build failed", "pane-line": "Build failed because of the sandbox provider. Your credit was refunded."},
				controls: []string{rebuild}, icon: "broken"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, f := range []struct {
				name string
				d    dom
				want want
			}{{"card", renderDOM(t, PreviewCard(tt.p)), tt.card}, {"pane", renderDOM(t, PreviewPane(tt.p)), tt.pane}} {
				for id, text := range f.want.parts {
					if got := f.d.text(id); got != text {
						t.Errorf("%s %s: %q, want %q", f.name, id, got, text)
					}
				}
				if got := controlsOf(f.d); !reflect.DeepEqual(got, f.want.controls) {
					t.Errorf("%s actions: %q, want %q", f.name, got, f.want.controls)
				}
				if got := testkit.Attr(f.d.one("state-icon"), "data-icon"); got != f.want.icon {
					t.Errorf("%s icon %q, want %q", f.name, got, f.want.icon)
				}
				if got := len(f.d.all("spinner")) > 0; got != f.want.spinner {
					t.Errorf("%s spinner shown: %v, want %v", f.name, got, f.want.spinner)
				}
			}
		})
	}
}

// controlsOf lists a fragment's buttons and links with their costs.
func controlsOf(d dom) []string {
	var out []string
	for _, id := range []string{"build", "keep-awake", "open", "copy-url", "pause", "resume", "retry", "rebuild"} {
		for _, n := range d.all(id) {
			s := id + ": " + testkit.Text(n)
			if hasAttr(n, "disabled") {
				s += " (disabled)"
			}
			if c := d.all("cost-" + id); len(c) == 1 {
				s += " [" + testkit.Text(c[0]) + "]"
				if testkit.Attr(n, "aria-describedby") != testkit.Attr(c[0], "id") {
					d.t.Errorf("%s's cost is not its description", id)
				}
			}
			out = append(out, s)
		}
	}
	// In the order they appear.
	order := map[string]int{}
	i := 0
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (n.Data == "button" || n.Data == "a") && testkit.Attr(n, "data-testid") != "" {
			order[testkit.Attr(n, "data-testid")] = i
			i++
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(d.root)
	for a := range out {
		for b := a + 1; b < len(out); b++ {
			ia, ib := order[strings.SplitN(out[a], ":", 2)[0]], order[strings.SplitN(out[b], ":", 2)[0]]
			if ib < ia {
				out[a], out[b] = out[b], out[a]
			}
		}
	}
	return out
}

// Each state has an icon of its own: colour is never the only signal.
func TestEveryStateHasItsOwnIcon(t *testing.T) {
	t.Parallel()
	seen := map[string]sandbox.Status{}
	for _, st := range []sandbox.Status{"", "starting", "running", "paused", "resuming", "resume_failed", "killed", "expired", "terminated", "unknown"} {
		p := previewIn(st)
		icon := p.copy().Icon
		if other, ok := seen[icon]; ok || icon == "" {
			t.Errorf("%q and %q share the icon %q", st, other, icon)
		}
		seen[icon] = st
		d := renderDOM(t, PreviewPane(p))
		svg := d.one("state-icon")
		if svg.Data != "svg" || testkit.Attr(svg, "aria-hidden") != "true" || svg.FirstChild == nil {
			t.Errorf("%q: the icon is not an inline SVG drawing: %s", st, d.raw)
		}
	}
}

// The fragments' forms work without JavaScript: each action posts to its route with the
// session's token and the page to come back to, and htmx posts the same form and swaps the
// fragment that holds it.
func TestActionsAreForms(t *testing.T) {
	t.Parallel()
	for _, f := range []Fragment{Card, Pane} {
		for _, st := range []sandbox.Status{"", "running", "paused", "unknown", "killed"} {
			p := previewIn(st, func(p *Preview) { p.CSRF = "tok" })
			var d dom
			if f == Card {
				d = renderDOM(t, PreviewCard(p))
			} else {
				d = renderDOM(t, PreviewPane(p))
			}
			for _, id := range []string{"build", "keep-awake", "pause", "resume", "retry", "rebuild"} {
				for _, btn := range d.all(id) {
					form := ancestor(btn, "form")
					if form == nil || testkit.Attr(btn, "type") != "submit" {
						t.Fatalf("%s %q: %s is not a form's submit button", f, st, id)
					}
					if got := fields(form); got["return"] != ReturnPath(f, project) {
						t.Errorf("%s %q %s returns to %q", f, st, id, got["return"])
					}
					if id == "rebuild" {
						if testkit.Attr(form, "method") != "get" || testkit.Attr(form, "action") != "/projects/"+project+"/rebuild" ||
							testkit.Attr(form, "hx-get") != testkit.Attr(form, "action") || testkit.Attr(form, "hx-target") != "#rebuild-dialog" ||
							fields(form)["target"] != DOMID(f, project) {
							t.Errorf("%s %q: the rebuild question's form is %v", f, st, form.Attr)
						}
						continue
					}
					if testkit.Attr(form, "method") != "post" || testkit.Attr(form, "hx-post") != testkit.Attr(form, "action") ||
						testkit.Attr(form, "hx-target") != "#"+DOMID(f, project) || fields(form)["_csrf"] != "tok" {
						t.Errorf("%s %q %s: form %v fields %v", f, st, id, form.Attr, fields(form))
					}
					if id == "build" && fields(form)["idempotencyKey"] != "build-"+project {
						t.Errorf("the build form's key is %q", fields(form)["idempotencyKey"])
					}
				}
			}
		}
	}
	// The live feed's fragments carry no session token: htmx sends the header.
	d := renderDOM(t, PreviewPane(previewIn("paused")))
	if _, ok := fields(ancestor(d.one("resume"), "form"))["_csrf"]; ok {
		t.Error("a fragment rendered without a token has an empty _csrf field")
	}
}

func fields(form *html.Node) map[string]string {
	out := map[string]string{}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "input" {
			out[testkit.Attr(n, "name")] = testkit.Attr(n, "value")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(form)
	return out
}

// A view model renders the same markup every time: nothing random or clock-driven inside.
func TestFragmentsRenderDeterministically(t *testing.T) {
	t.Parallel()
	for _, st := range []sandbox.Status{"", "starting", "running", "paused", "killed"} {
		p := previewIn(st)
		for _, cmp := range []func(Preview) string{
			func(p Preview) string { return renderDOM(t, PreviewCard(p)).raw },
			func(p Preview) string { return renderDOM(t, PreviewPane(p)).raw },
		} {
			if a, b := cmp(p), cmp(p); a != b {
				t.Fatalf("%q renders differently twice:\n%s\n%s", st, a, b)
			}
		}
	}
}

// The Build and Rebuild keys name what they are about: one rendered form (or the same question
// in two tabs) charges once, and the rebuild of the next build is a new request.
func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	notBuilt, built := previewIn(""), previewIn("killed")
	rebuilt := previewIn("killed", func(p *Preview) { p.SandboxID, p.BuildID = "sb-2", "build-2" })
	if notBuilt.IdempotencyKey() != "build-"+project {
		t.Errorf("first build key %q", notBuilt.IdempotencyKey())
	}
	if built.IdempotencyKey() != previewIn("killed").IdempotencyKey() || built.IdempotencyKey() == rebuilt.IdempotencyKey() ||
		built.IdempotencyKey() == notBuilt.IdempotencyKey() {
		t.Errorf("keys %q %q %q", notBuilt.IdempotencyKey(), built.IdempotencyKey(), rebuilt.IdempotencyKey())
	}
}

// The rebuild question, in the dialog and on its page.
func TestRebuildQuestion(t *testing.T) {
	t.Parallel()
	q := RebuildQuestion{ProjectID: project, Target: DOMID(Card, project), Return: "/", Key: "rebuild-build-1", CSRF: "tok"}
	for _, tt := range []struct {
		credits int32
		balance string
	}{{7, "You have 7 credits."}, {1, "You have 1 credit."}} {
		q.Credits = tt.credits
		d := renderDOM(t, RebuildDialog(q))
		if d.text("rebuild-line") != "This will use 1 build credit. Continue?" || d.text("balance") != tt.balance ||
			d.text("rebuild-confirm") != "Rebuild (1 credit)" || d.text("rebuild-cancel") != "Cancel" || d.text("no-credits") != "" {
			t.Errorf("the question with %d credits: %s", tt.credits, d.raw)
		}
		form := ancestor(d.one("rebuild-confirm"), "form")
		if testkit.Attr(form, "hx-post") != "/projects/"+project+"/rebuild" || testkit.Attr(form, "hx-target") != "#"+DOMID(Card, project) ||
			!reflect.DeepEqual(fields(form), map[string]string{"_csrf": "tok", "idempotencyKey": "rebuild-build-1", "return": "/"}) {
			t.Errorf("the confirmation's form: %v %v", form.Attr, fields(form))
		}
		if testkit.Attr(ancestor(d.one("rebuild-cancel"), "form"), "method") != "dialog" {
			t.Error("Cancel does not close the dialog by itself")
		}
		page := renderDOM(t, RebuildConfirmPage(RebuildPage{Layout: Layout{Title: "Rebuild preview?", Now: now}, ProjectName: "Counter", Question: q}))
		if hasAttr(ancestor(page.one("rebuild-confirm"), "form"), "hx-post") || testkit.Attr(page.one("rebuild-cancel"), "href") != "/" {
			t.Errorf("the page's question: %s", page.raw)
		}
	}
	q.Credits = 0
	d := renderDOM(t, RebuildDialog(q))
	if d.text("no-credits") != "You have no build credits left, so this preview can't be rebuilt." || len(d.all("rebuild-confirm")) != 0 ||
		d.text("rebuild-cancel") != "Close" {
		t.Errorf("the question without credits: %s", d.raw)
	}
}

// The history lists its entries as given (newest first), each with its exact time.
func TestHistoryList(t *testing.T) {
	t.Parallel()
	h := History{ProjectID: project, Now: now, Entries: []HistoryEntry{
		{At: now.Add(-30 * time.Second), Text: "Resumed by you"},
		{At: now.Add(-2 * time.Minute), Text: "Paused by you"},
		{At: now.Add(-26 * time.Hour), Text: "Build started (1 credit)"},
	}}
	d := renderDOM(t, HistoryList(h, true))
	var got []string
	for _, li := range d.all("history-entry") {
		got = append(got, testkit.Text(li))
	}
	want := []string{"just now Resumed by you", "2 min ago Paused by you", "1 d ago Build started (1 credit)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
	sec := d.one("history")
	if testkit.Attr(sec, "id") != HistoryID(project) || testkit.Attr(sec, "hx-swap-oob") != "true" || !strings.Contains(d.raw, `datetime="2026-05-03T09:58:00Z"`) {
		t.Errorf("history markup: %s", d.raw)
	}
	if d := renderDOM(t, HistoryList(History{ProjectID: project, Now: now}, false)); d.text("history-empty") == "" || hasAttr(d.one("history"), "hx-swap-oob") {
		t.Errorf("empty history: %s", d.raw)
	}
	// A heal names the files it restored, under its sentence.
	d = renderDOM(t, HistoryList(History{ProjectID: project, Now: now, Entries: []HistoryEntry{
		{At: now, Text: "Restored 2 files the provider lost", Files: []string{"index.html", "lib/<a & b>.js"}},
	}}, false))
	if d.text("history-text") != "Restored 2 files the provider lost" || !strings.Contains(d.raw, "<details") ||
		d.text("history-files") != "index.htmllib/<a & b>.js" || !strings.Contains(d.raw, "lib/&lt;a &amp; b&gt;.js") {
		t.Errorf("a heal's entry: %s", d.raw)
	}
}

func TestRelativeTimes(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "just now", 59 * time.Second: "just now", time.Minute: "1 min ago", 119 * time.Second: "1 min ago",
		59 * time.Minute: "59 min ago", time.Hour: "1 h ago", 47 * time.Hour: "1 d ago",
	} {
		if got := agoText(now.Add(-d), now); got != want {
			t.Errorf("agoText(%v) = %q, want %q", d, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		-time.Second: "Sleeping in less than a minute", 59 * time.Second: "Sleeping in less than a minute",
		time.Minute: "Sleeping in 1 min", 179 * time.Second: "Sleeping in 2 min", 3 * time.Minute: "Sleeping in 3 min",
	} {
		if got := sleepsInText(now.Add(d), now); got != want {
			t.Errorf("sleepsInText(%v) = %q, want %q", d, got, want)
		}
	}
}

// The pane is a polite live region, and shows the iframe only while the preview runs.
func TestPaneFrame(t *testing.T) {
	t.Parallel()
	for _, st := range []sandbox.Status{"", "starting", "running", "paused", "resuming", "resume_failed", "killed", "unknown"} {
		p := previewIn(st)
		d := renderDOM(t, PreviewPane(p))
		pane := d.one("preview-pane")
		if testkit.Attr(pane, "aria-live") != "polite" || testkit.Attr(pane, "id") != DOMID(Pane, project) || testkit.Attr(pane, "sse-swap") != DOMID(Pane, project) {
			t.Errorf("%q pane: %v", st, pane.Attr)
		}
		frames := d.all("preview-frame")
		if (len(frames) == 1) != (st == "running") {
			t.Errorf("%q: %d frames", st, len(frames))
		}
		if len(frames) == 1 && (testkit.Attr(frames[0], "hx-preserve") != "true" || testkit.Attr(frames[0], "id") != fmt.Sprintf("frame-%s-42", project)) {
			t.Errorf("the frame is not kept across pushes of one state: %v", frames[0].Attr)
		}
	}
}

// A field with an error says so to assistive technology and points to the error's text.
func TestFieldErrorsAreDescribed(t *testing.T) {
	t.Parallel()
	d := renderDOM(t, Auth(AuthPage{Layout: Layout{Title: "Sign up", Now: now}, SignUp: true,
		Errors: map[string]string{"password": "Use at least 8 characters."}}))
	var password, email *html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "input" {
			switch testkit.Attr(n, "id") {
			case "password":
				password = n
			case "email":
				email = n
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(d.root)
	if testkit.Attr(password, "aria-invalid") != "true" || testkit.Attr(password, "aria-describedby") != "err-password" || d.text("err-password") != "Use at least 8 characters." {
		t.Errorf("the password's error: %v", password.Attr)
	}
	if hasAttr(email, "aria-invalid") || hasAttr(email, "aria-describedby") {
		t.Errorf("a field without an error is marked: %v", email.Attr)
	}
}
