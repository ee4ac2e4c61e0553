package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/sandboxd"
	"sandman/views"
)

// A failed build's API answer says why twice: error, the line its build page reads, and
// failureCode, the code a program acts on (docs/api.md, "Failure codes"), whether the founder's
// code failed it (the credit spent) or the provider did (refunded).
func TestAFailedBuildsAPISaysItsCodeBesideItsLine(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("build-codes@example.com")
	c.Get("/projects/new")
	failed := func(pid string) (b struct{ Status, Error, FailureCode string }) {
		t.Helper()
		apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+pid+"/builds", map[string]string{"idempotencyKey": "k-" + pid}, nil),
			http.StatusAccepted)
		testkit.Until(t, 90*time.Second, "the build to fail", func() bool {
			var ps []struct {
				ID    string
				Build struct{ Status, Error, FailureCode string }
			}
			apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &ps), http.StatusOK)
			for _, p := range ps {
				if p.ID == pid {
					b = p.Build
				}
			}
			return b.Status == "failed"
		})
		return b
	}

	r := upload(t, c, map[string]string{"name": "Exits", "start_command": "node index.js", "port": "3000"},
		[]upFile{{"index.js", "console.log('broken on purpose'); process.exit(1)"}})
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	exits := projectLinkRe.FindStringSubmatch(r.Header.Get("Location"))[1]
	b := failed(exits)
	if b.FailureCode != "start_exited" ||
		!strings.HasPrefix(b.Error, `The start command "node index.js" exited with code 1 before it answered on port 3000. Its last output:`) ||
		!strings.Contains(b.Error, "broken on purpose") {
		t.Fatalf("an app that exits: failureCode %q, error %q", b.FailureCode, b.Error)
	}
	if page := c.Get("/projects/" + exits); !strings.Contains(page.Body, "broken on purpose") {
		t.Fatalf("the build page does not tell what the app printed: %s", page.Body)
	}

	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	s.Host.InjectFault(t, sandboxd.Fault{Route: "POST /sandboxes", Status: 503, Count: 1000})
	if b := failed(p.ID); b.FailureCode != "provider" || b.Error != views.ProviderFailureText {
		t.Fatalf("a build the provider failed: failureCode %q, error %q; want provider, %q", b.FailureCode, b.Error, views.ProviderFailureText)
	}
}
