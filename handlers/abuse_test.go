package handlers_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// together runs f n times at once, all released together, and returns their answers.
func together(n int, f func(i int) apptest.Response) []apptest.Response {
	out := make([]apptest.Response, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// statuses counts answers by status.
func statuses(rs []apptest.Response) map[int]int {
	m := map[int]int{}
	for _, r := range rs {
		m[r.Status]++
	}
	return m
}

// 100 rebuilds at once with one idempotency key (a founder's frantic clicks, a client's
// retries) start one build and charge one credit; every answer names that build.
func TestConcurrentRebuildsWithOneKey(t *testing.T) {
	t.Parallel()
	s := webOnly(t) // the builds need not run: charging is what is counted
	c := s.NewClient(t)
	c.SignUp("frantic@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "first"}, nil), http.StatusAccepted)

	const n = 100
	type answer struct {
		Build    struct{ ID string }
		Replayed bool
	}
	answers := make([]answer, n)
	rs := together(n, func(i int) apptest.Response {
		return c.API(http.MethodPost, "/api/projects/"+p.ID+"/rebuild", map[string]string{"idempotencyKey": "one-key"}, &answers[i])
	})
	if got := statuses(rs); got[http.StatusAccepted] != n {
		t.Fatalf("answers %v, want %d × 202", got, n)
	}
	fresh := 0
	for _, a := range answers {
		if a.Build.ID != answers[0].Build.ID {
			t.Fatalf("two builds started: %s and %s", a.Build.ID, answers[0].Build.ID)
		}
		if !a.Replayed {
			fresh++
		}
	}
	builds := s.count(t, "SELECT count(*) FROM builds WHERE project_id = $1", p.ID)
	debits := s.count(t, "SELECT count(*) FROM credit_ledger WHERE delta < 0")
	if fresh != 1 || builds != 2 || debits != 2 || c.Credits() != 8 {
		t.Fatalf("%d fresh answers, %d builds, %d debits, %d credits: want 1, 2 (build and rebuild), 2 and 8", fresh, builds, debits, c.Credits())
	}
	audit := apptest.AuditDB(t, s.Pool())
	audit.ChargedTwice += debits - 2 // the ledger's debits beyond the build's and the rebuild's
	testkit.Record(t, testkit.Scenario{ID: "rebuild-one-key", Times: n, Counts: audit,
		Injected: "100 rebuild requests at once with one idempotency key",
		Result:   "one rebuild started and charged; 100 × 202 naming it, 99 of them replays"})
}

// 100 builds at once, each with its own key, by a founder with 3 credits: exactly 3 start, the
// others are refused with 402 and charge nothing.
func TestConcurrentBuildsBeyondCredits(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.StartCredits = 3 }})
	c := s.NewClient(t)
	c.SignUp("three-credits@example.com")
	const n = 100
	ids := make([]string, n)
	for i := range ids {
		var p struct{ ID string }
		apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "static"}, &p), http.StatusCreated)
		ids[i] = p.ID
	}
	rs := together(n, func(i int) apptest.Response {
		return c.API(http.MethodPost, "/api/projects/"+ids[i]+"/builds", map[string]string{"idempotencyKey": fmt.Sprint("key-", i)}, nil)
	})
	got := statuses(rs)
	if got[http.StatusAccepted] != 3 || got[http.StatusPaymentRequired] != n-3 {
		t.Fatalf("answers %v, want 3 × 202 and %d × 402", got, n-3)
	}
	for _, r := range rs {
		if r.Status == http.StatusPaymentRequired && !strings.Contains(r.Body, "no build credits left") {
			t.Fatalf("a 402 that does not say why: %s", r.Body)
		}
	}
	builds := s.count(t, "SELECT count(*) FROM builds")
	debits := s.count(t, "SELECT count(*) FROM credit_ledger WHERE delta < 0")
	if builds != 3 || debits != 3 || c.Credits() != 0 {
		t.Fatalf("%d builds, %d debits, %d credits left: want 3, 3, 0", builds, debits, c.Credits())
	}
	audit := apptest.AuditDB(t, s.Pool())
	testkit.Record(t, testkit.Scenario{ID: "builds-beyond-credits", Times: n, Counts: audit,
		Injected: "100 first builds at once, each of its own project and key, by a founder with 3 credits",
		Result:   "exactly 3 builds started and charged; 97 × 402 saying no credits are left"})
}

// A burst of log-in attempts at once for one account gets no more password checks than the
// limit allows, on any number of instances: each attempt is recorded before its check.
func TestConcurrentLoginBurst(t *testing.T) {
	t.Parallel()
	a := webOnly(t)
	b := start(t, apptest.Options{Role: app.RoleWeb, Host: a.Host, DatabaseURL: a.DatabaseURL})
	owner := a.NewClient(t)
	owner.SignUp("targeted@example.com")
	const n = 60
	attacker := a.NewClient(t)
	rs := together(n, func(i int) apptest.Response {
		c := attacker
		if i%2 == 1 {
			c = attacker.On(b.Instance)
		}
		return c.API(http.MethodPost, "/api/session", map[string]string{"email": "targeted@example.com", "password": fmt.Sprint("guess-", i)}, nil)
	})
	got := statuses(rs)
	if got[http.StatusUnauthorized] > 5 || got[http.StatusUnauthorized]+got[http.StatusTooManyRequests] != n {
		t.Fatalf("answers %v: want at most 5 × 401 (passwords checked) and 429 for the rest", got)
	}
	for _, r := range rs {
		if r.Status == http.StatusTooManyRequests && (r.Header.Get("Retry-After") == "" || !strings.Contains(r.Body, "Too many failed logins. Wait 15 minutes")) {
			t.Fatalf("a 429 without Retry-After or a sentence: %v %s", r.Header, r.Body)
		}
	}
	// The right password is refused too while the limit holds.
	apptest.RequireStatus(t, a.NewClient(t).API(http.MethodPost, "/api/session",
		map[string]string{"email": "targeted@example.com", "password": apptest.Password}, nil), http.StatusTooManyRequests)
	testkit.Record(t, testkit.Scenario{ID: "login-burst", Times: n,
		Injected: "60 wrong passwords for one account at once, half on each of two instances",
		Result:   "at most 5 passwords checked (401), the rest 429 with Retry-After and a sentence; then the right password is refused too"})
}

// A burst of sign-ups from one address creates no more founders (and free credits) than the
// hourly limit, and says when to try again.
func TestConcurrentSignUpBurst(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	const n = 40
	rs := together(n, func(i int) apptest.Response {
		return s.NewClient(t).API(http.MethodPost, "/api/users", map[string]string{"email": fmt.Sprintf("farm-%d@example.com", i), "password": "long enough"}, nil)
	})
	got := statuses(rs)
	if got[http.StatusCreated] != 10 || got[http.StatusTooManyRequests] != n-10 {
		t.Fatalf("answers %v, want 10 × 201 and %d × 429", got, n-10)
	}
	for _, r := range rs {
		if r.Status == http.StatusTooManyRequests && (r.Header.Get("Retry-After") == "" || !strings.Contains(r.Body, "Too many accounts were created from your network")) {
			t.Fatalf("a 429 without Retry-After or a sentence: %v %s", r.Header, r.Body)
		}
	}
	if users := s.count(t, "SELECT count(*) FROM users"); users != 10 {
		t.Fatalf("%d founders created", users)
	}
	// The form says so too.
	page := s.NewClient(t)
	page.Get("/signup")
	r := page.PostForm("/signup", map[string][]string{"email": {"one-more@example.com"}, "password": {"long enough"}})
	apptest.RequireStatus(t, r, http.StatusTooManyRequests)
	apptest.RequireContains(t, r.Body, "Too many accounts were created from your network in the last hour. Try again in")
	testkit.Record(t, testkit.Scenario{ID: "signup-burst", Times: n,
		Injected: "40 sign-ups at once from one address (limit: 10 an hour)",
		Result:   "exactly 10 founders created; 30 × 429 with Retry-After and a sentence; the form says the same"})
}

// rawRequest opens a connection to the instance and returns it with a reader of its answers.
func rawRequest(t *testing.T, s *stack) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

// A sender that trickles its request is cut off once the server's read timeout has passed
// (its headers, or its body), with an answer that says so where one can be sent; the upload has
// a longer deadline of its own.
func TestSlowSendersAreCutOff(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.ReadTimeout = time.Second }})

	// Headers that never end: the connection is closed (by the server, not by this test's
	// deadline, which is only there so that a server that never closes it fails the test).
	conn, r := rawRequest(t, s)
	fmt.Fprintf(conn, "GET /login HTTP/1.1\r\nHost: x\r\n")
	if line := closedByServer(t, conn, r, "a request whose headers never end"); line != "" && !strings.Contains(line, "408") {
		t.Fatalf("a request whose headers never end got %q", line)
	}

	// A body that never arrives: 408, and the connection closed.
	conn, r = rawRequest(t, s)
	fmt.Fprintf(conn, "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nemail=")
	conn.SetReadDeadline(time.Now().Add(slowSenderWait))
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a trickled body got %d, want 408", res.StatusCode)
	}
	closedByServer(t, conn, r, "a trickled body's connection, after its 408")

	// An upload may take longer than the server's read timeout: it has its own deadline.
	c := s.NewClient(t)
	c.SignUp("slow-upload@example.com")
	c.Get("/projects/new")
	body, ct := multipartBody(t, c.CSRF(), map[string]string{"name": "Slow", "start_command": "node index.js", "port": "3000"}, []upFile{{"index.js", "x"}})
	pr := &slowReader{data: body.Bytes(), pause: 3 * time.Second}
	r2 := c.Do(http.MethodPost, "/projects/upload", pr, map[string]string{"Content-Type": ct})
	apptest.RequireStatus(t, r2, http.StatusSeeOther)
	testkit.Record(t, testkit.Scenario{ID: "slow-senders", Times: 3,
		Injected: "headers that never end; a form body that never arrives; an upload that pauses past the read timeout (1 s in the test)",
		Result:   "the connection closed; 408; the upload, within its own 5-minute deadline, stored"})
}

// slowSenderWait is how long a test of a slow sender waits for the server to act on a read
// timeout of 1 s: long enough for a loaded machine, short of any timeout left at its default.
const slowSenderWait = 15 * time.Second

// closedByServer reads what is left on the connection until the server closes it, and returns
// its first line. It fails t when the connection is still open after slowSenderWait: the
// test's own deadline must never count as the server's cut.
func closedByServer(t *testing.T, conn net.Conn, r *bufio.Reader, what string) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(slowSenderWait))
	first, err := r.ReadString('\n')
	for err == nil {
		_, err = r.ReadString('\n')
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s: the connection was still open after %s, so the server's read timeout (1 s) never cut it off", what, slowSenderWait)
	}
	return first
}

// slowReader gives half its data, pauses, then gives the rest.
type slowReader struct {
	data  []byte
	pause time.Duration
	off   int
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	half := len(r.data) / 2
	if r.off == half {
		time.Sleep(r.pause)
	}
	end := len(r.data)
	if r.off < half {
		end = half
	}
	n := copy(p, r.data[r.off:end])
	r.off += n
	return n, nil
}
