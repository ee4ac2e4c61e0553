package handlers_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// versionBody is a valid JSON version of one text file, size bytes in all.
func versionBody(size int, marker string) []byte {
	head, tail := `{"files":[{"path":"big-`+marker+`.txt","content":"`, `"}]}`
	return []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
}

// holdBack sends a POST whose Content-Length declares the whole body but sends only its first
// bytes, then nothing more until release is called; answer receives the answer (Status 0 and
// the error for none). The rest is sent on release, so a server that waits for it still answers.
func holdBack(t testing.TB, hc *http.Client, url string, header map[string]string, body []byte, first int) (answer <-chan apptest.Response, release func()) {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	released := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(released) }) }
	go func() {
		if _, err := pw.Write(body[:first]); err != nil {
			return
		}
		<-released
		if _, err := pw.Write(body[first:]); err == nil {
			pw.Close()
		}
	}()
	out := make(chan apptest.Response, 1)
	go func() {
		res, err := hc.Do(req)
		if err != nil {
			out <- apptest.Response{Body: err.Error()}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		out <- apptest.Response{Status: res.StatusCode, Header: res.Header, Body: string(b)}
	}()
	t.Cleanup(func() {
		release()
		pr.CloseWithError(io.ErrClosedPipe)
	})
	return out, release
}

// clientOf is an http.Client with c's cookies, no redirects followed and room for a slow body.
func clientOf(c *apptest.Client) *http.Client {
	return &http.Client{Jar: c.HTTP().Jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// A large body is read only once its sender is known: a request with no valid session or token
// is answered (401/403, as the API answers it) while only the first 512 KiB of its 20 MiB have
// been sent, less than the small default (1 MiB of JSON) a request of no one may send. (net/http
// itself reads up to 256 KiB of what a handler left unread, to answer on a connection it can
// keep.) The founder's own large versions, by session and by token, are taken.
func TestLargeBodiesAreReadOnlyFromKnownSenders(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	owner := s.NewClient(t)
	owner.SignUp("large-owner@example.com")
	pid := newCounter(t, owner)
	other := s.NewClient(t)
	other.SignUp("large-other@example.com")
	visitor := s.NewClient(t)
	apptest.RequireStatus(t, visitor.Get("/login"), http.StatusOK) // a pre-login cookie and its token
	anonymous := s.NewClient(t)

	const size, first = 20 << 20, 512 << 10
	versions := "/api/projects/" + pid + "/versions"
	jsonType := map[string]string{"Content-Type": "application/json"}
	with := func(h map[string]string) map[string]string {
		out := map[string]string{"Content-Type": "application/json"}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name   string
		from   *apptest.Client
		path   string
		header map[string]string
		status int
		code   string // the JSON answer's code ("" for a page)
	}{
		{"no session and no token", anonymous, versions, jsonType, http.StatusForbidden, "csrf"},
		{"a token that does not exist", anonymous, versions,
			with(map[string]string{"Authorization": "Bearer sm_0000000000000000000000000000000000000000"}), http.StatusUnauthorized, "invalid_token"},
		{"a malformed Authorization header", anonymous, versions,
			with(map[string]string{"Authorization": "Bearer not a token"}), http.StatusBadRequest, "bad_request"},
		{"a pre-login cookie and its CSRF token, no founder", visitor, versions,
			with(map[string]string{"X-CSRF-Token": visitor.CSRF()}), http.StatusUnauthorized, "unauthorized"},
		{"another founder's session without its CSRF token", other, versions, jsonType, http.StatusForbidden, "csrf"},
		{"a session and a multipart body whose CSRF field never comes", other, versions,
			map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, http.StatusForbidden, "csrf"},
		{"the upload page, a session and a first field that is not its CSRF token", other, "/projects/upload",
			map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, http.StatusForbidden, ""},
		{"the upload page, no session", anonymous, "/projects/upload",
			map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, http.StatusForbidden, ""},
	}
	jsonBody := versionBody(size, "anonymous")
	// A form of one file part as large: read whole (the CSRF check's form parsing) it would be
	// held, or spilled to disk.
	head, tail := "--x\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.bin\"\r\n\r\n", "\r\n--x--\r\n"
	formBody := []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
	before := s.count(t, "SELECT count(*) FROM versions")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := jsonBody
			if strings.HasPrefix(tt.header["Content-Type"], "multipart/") {
				body = formBody
			}
			answer, release := holdBack(t, clientOf(tt.from), tt.from.URL(tt.path), tt.header, body, first)
			var r apptest.Response
			select {
			case r = <-answer:
				release()
			case <-time.After(20 * time.Second):
				release()
				r = <-answer
				t.Fatalf("no answer in 20 s while %d KiB of the body were sent (then %d after the whole body): the server read the body before knowing who sent it",
					first>>10, r.Status)
			}
			apptest.RequireStatus(t, r, tt.status)
			if tt.code != "" {
				apptest.RequireContains(t, r.Body, fmt.Sprintf(`"code":%q`, tt.code))
			}
		})
	}
	if after := s.count(t, "SELECT count(*) FROM versions"); after != before {
		t.Fatalf("refused requests stored versions: %d, then %d", before, after)
	}

	// The founder's own: 3 MiB of JSON, past the small default, by session and by token.
	r := owner.Do(http.MethodPost, versions, strings.NewReader(string(versionBody(3<<20, "session"))),
		map[string]string{"X-CSRF-Token": owner.CSRF(), "Content-Type": "application/json"})
	apptest.RequireStatus(t, r, http.StatusCreated)
	r = owner.WithToken(owner.MakeToken("large")).Do(http.MethodPost, versions, strings.NewReader(string(versionBody(3<<20, "token"))), jsonType)
	apptest.RequireStatus(t, r, http.StatusCreated)

	testkit.Record(t, testkit.Scenario{ID: "anonymous-large-bodies",
		Injected: "20 MiB bodies declared to the versions route (and the upload page) of which 512 KiB are sent, then nothing until answered: no session nor token, an unknown token, a malformed header, a pre-login cookie with its token, another founder's session without its CSRF token (a JSON body, a multipart one)",
		Times:    len(tests),
		Result:   "each answered (401, 403 or 400, as the API answers them) before the rest of its body was sent; nothing stored; the founder's 3 MiB versions by session and by token taken (201)"})
}

// An instance reads a bounded number of large bodies at once, whoever sends them: with a bound
// of one, a founder's second large version while the first is being read waits its short turn,
// then is refused (503, Retry-After, a sentence), unread and unstored; a small one passes
// meanwhile; once the first is done the second goes through.
func TestLargeBodiesAreReadAFewAtATime(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) {
		c.LargeBodies, c.LargeBodyWait = 1, 200*time.Millisecond
	}})
	c := s.NewClient(t)
	c.SignUp("large-turns@example.com")
	pid := newCounter(t, c)
	versions := "/api/projects/" + pid + "/versions"
	header := map[string]string{"X-CSRF-Token": c.CSRF(), "Content-Type": "application/json"}

	firstBody := versionBody(3<<20, "first")
	answer, release := holdBack(t, clientOf(c), c.URL(versions), header, firstBody, 2<<20)
	reading := func() float64 { return testkit.MetricValue(t, s.Registry(), "sandman_large_bodies_reading", nil) }
	for deadline := time.Now().Add(20 * time.Second); reading() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first large body never took its turn: %v reading", reading())
		}
	}

	second := string(versionBody(3<<20, "second"))
	r := c.Do(http.MethodPost, versions, strings.NewReader(second), header)
	apptest.RequireStatus(t, r, http.StatusServiceUnavailable)
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("the 503 has no Retry-After: %v", r.Header)
	}
	apptest.RequireContains(t, r.Body, "send it again in a few seconds")
	r, _ = postVersion(t, c, pid, map[string]any{"files": []vfile{text("small.txt", "small\n")}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)

	release()
	apptest.RequireStatus(t, <-answer, http.StatusCreated)
	r = c.Do(http.MethodPost, versions, strings.NewReader(second), header)
	apptest.RequireStatus(t, r, http.StatusCreated)
	if n := reading(); n != 0 {
		t.Fatalf("%v large bodies still counted as being read once all were answered", n)
	}
	testkit.Record(t, testkit.Scenario{ID: "large-bodies-at-once",
		Injected: "with a bound of 1 large body at a time, a founder's second 3 MiB version while the first is being read (held back after 2 MiB), and a small one",
		Times:    1,
		Result:   "the second refused after its wait (503, Retry-After, a sentence), nothing stored for it; the small one taken; once the first was done (201) the second taken"})
}
