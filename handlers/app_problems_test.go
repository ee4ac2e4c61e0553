package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// The watch of dev servers and the log store are one loop as the app assembles them: a version
// whose server exits opens an app problem of that version, holding that run's own output (the
// lines it printed, not an earlier run's), and its output is in the project's logs; restoring
// the version before it brings the app up again and closes the problem.
func TestAnAppThatExitsIsAProblemUntilAGoodVersionIsUp(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("exit-problem@example.com")
	pid, _ := c.BuildCounter()
	marker := fmt.Sprintf("exit-marker-%d", time.Now().UnixNano())
	broken := `console.log("` + marker + ` before the crash"); throw new Error("` + marker + ` broken on purpose")`
	r, _ := postVersion(t, c, pid, map[string]any{"files": []vfile{text("server.js", broken)}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)

	var open problemOut
	testkit.Eventually(t, 30*time.Second, "an open app problem of version 2", func() error {
		for _, p := range problems(t, c, pid) {
			if p.Source == "app" && p.Version == 2 && p.Open {
				open = p
				return nil
			}
		}
		return fmt.Errorf("problems: %+v", problems(t, c, pid))
	})
	if !strings.Contains(open.Message, marker+" broken on purpose") || !strings.Contains(open.Detail, marker+" before the crash") {
		t.Fatalf("version 2's problem: message %q, detail %q; want its run's error and output", open.Message, open.Detail)
	}
	if strings.Contains(open.Detail, "counter listening") {
		t.Fatalf("version 2's problem holds an earlier run's output: %q", open.Detail)
	}
	var logs struct {
		Lines []struct{ Source, Text string }
	}
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects/"+pid+"/logs", nil, &logs), http.StatusOK)
	found := false
	for _, l := range logs.Lines {
		found = found || (l.Source == "app" && strings.Contains(l.Text, marker+" before the crash"))
	}
	if !found {
		t.Fatalf("the project's logs lack the broken run's output: %+v", logs.Lines)
	}

	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+pid+"/versions/1/restore", map[string]any{}, nil), http.StatusCreated)
	testkit.Eventually(t, 30*time.Second, "version 2's problem closed once the restored version is up", func() error {
		for _, p := range problems(t, c, pid) {
			if p.ID == open.ID && !p.Open {
				return nil
			}
		}
		return fmt.Errorf("problems: %+v", problems(t, c, pid))
	})
}
