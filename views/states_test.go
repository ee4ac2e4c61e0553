package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The pane shows the iframe only for a live preview and the spinner only while something is in
// progress; a failed build overrides whatever state its sandbox is in.
func TestPaneFollowsThePredicates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		p                 Preview
		live, busy, stage bool
		action            string
	}{
		{"not built", Preview{}, false, false, false, "build"},
		{"building", Preview{SandboxID: "s", Status: "starting", BuildStatus: "building"}, false, true, true, ""},
		{"build failed while starting", Preview{SandboxID: "s", Status: "starting", BuildStatus: "failed"}, false, false, false, "rebuild"},
		{"running", Preview{SandboxID: "s", Status: "running", BuildStatus: "ready", PreviewURL: "http://p/"}, true, false, false, "open"},
		{"running but the build failed", Preview{SandboxID: "s", Status: "running", BuildStatus: "failed"}, false, false, false, "rebuild"},
		{"paused", Preview{SandboxID: "s", Status: "paused", BuildStatus: "ready"}, false, false, false, "resume"},
		{"resuming", Preview{SandboxID: "s", Status: "resuming", BuildStatus: "ready"}, false, true, false, ""},
		{"resume failed", Preview{SandboxID: "s", Status: "resume_failed", BuildStatus: "ready", FailureCause: "gone"}, false, false, false, "rebuild"},
		{"unknown", Preview{SandboxID: "s", Status: "unknown", BuildStatus: "ready"}, false, false, false, "retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.p.ProjectID = "p1"
			if tt.p.Live() != tt.live || tt.p.Busy() != tt.busy || tt.p.Building() != tt.stage || tt.p.action() != tt.action {
				t.Fatalf("live %v busy %v building %v action %q, want %v %v %v %q",
					tt.p.Live(), tt.p.Busy(), tt.p.Building(), tt.p.action(), tt.live, tt.busy, tt.stage, tt.action)
			}
			var buf bytes.Buffer
			if err := PreviewPane(tt.p).Render(context.Background(), &buf); err != nil {
				t.Fatal(err)
			}
			html := buf.String()
			if got := strings.Contains(html, "<iframe"); got != tt.live {
				t.Errorf("iframe shown: %v, want %v", got, tt.live)
			}
			if got := strings.Contains(html, `class="spinner"`); got != tt.busy {
				t.Errorf("spinner shown: %v, want %v", got, tt.busy)
			}
			if got := strings.Contains(html, `data-testid="build-stage"`); got != tt.stage {
				t.Errorf("build stage shown: %v, want %v", got, tt.stage)
			}
			if !strings.Contains(html, `id="`+DOMID(Pane, "p1")+`"`) || !strings.Contains(html, `sse-swap="`+DOMID(Pane, "p1")+`"`) {
				t.Errorf("the pane is not addressed by DOMID: %s", html)
			}
		})
	}
}
