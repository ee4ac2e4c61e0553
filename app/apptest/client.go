package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"sandman/internal/testkit"
)

// Client is a browser-like HTTP client of one instance: it keeps its own cookies (so its own
// session), remembers the CSRF token of the last page or log-in, and does not follow redirects,
// so a test sees them.
type Client struct {
	t    testing.TB
	base string
	hc   *http.Client
	csrf string
	// bearer is the API token sent with every request ("" for none).
	bearer string
}

// NewClient returns a client of the instance with an empty cookie jar.
func (i *Instance) NewClient(t testing.TB) *Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Client{t: t, base: i.URL(), hc: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// On returns a client with c's session and CSRF token that talks to another instance of the
// same deployment (sessions live in the shared database).
func (c *Client) On(other *Instance) *Client {
	moved := *c
	moved.base = other.URL()
	return &moved
}

// For returns c reporting to t, for use inside a subtest or a fuzz function.
func (c *Client) For(t testing.TB) *Client {
	moved := *c
	moved.t = t
	return &moved
}

// WithToken returns a client of the same instance that is what a founder's backend is: it sends
// the API token with every request, and has no cookie jar and no CSRF token.
func (c *Client) WithToken(token string) *Client {
	return &Client{t: c.t, base: c.base, bearer: token, hc: &http.Client{Timeout: c.hc.Timeout, CheckRedirect: c.hc.CheckRedirect}}
}

// MakeToken makes an API token through the JSON API with the client's session and returns it.
func (c *Client) MakeToken(name string) string {
	c.t.Helper()
	var out struct{ Token string }
	r := c.API(http.MethodPost, "/api/tokens", map[string]string{"name": name}, &out)
	if r.Status != http.StatusCreated || out.Token == "" {
		c.t.Fatalf("make the API token %q: %d %s", name, r.Status, r.Body)
	}
	return out.Token
}

// HTTP is the client's underlying http.Client (its cookie jar, no redirects followed).
func (c *Client) HTTP() *http.Client { return c.hc }

// Bearer is the API token the client sends ("" for a browser-like client), for requests made
// outside Do (an event stream read by hand).
func (c *Client) Bearer() string { return c.bearer }

// URL is the instance's base URL followed by path.
func (c *Client) URL(path string) string { return c.base + path }

// CSRF is the token the client sends with state-changing requests.
func (c *Client) CSRF() string { return c.csrf }

// Response is an answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Do sends one request with the given headers and reads the whole answer.
func (c *Client) Do(method, path string, body io.Reader, header map[string]string) Response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatalf("read %s %s: %v", method, path, err)
	}
	// Every page and fragment a test reads is also checked for template code shown as text,
	// which no other assertion of a page looks for.
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		if code := testkit.TemplateLeftovers(string(b)); len(code) > 0 {
			c.t.Errorf("%s %s shows template code as text: %q", method, path, code)
		}
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}

var csrfRe = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// Get fetches a page and remembers its CSRF token, as a browser that shows the page's forms.
func (c *Client) Get(path string) Response {
	c.t.Helper()
	r := c.Do(http.MethodGet, path, nil, nil)
	if m := csrfRe.FindStringSubmatch(r.Body); m != nil {
		c.csrf = m[1]
	}
	return r
}

// PostForm submits a form with the remembered CSRF token (unless v carries its own _csrf).
func (c *Client) PostForm(path string, v url.Values) Response {
	c.t.Helper()
	if _, ok := v["_csrf"]; !ok {
		v.Set("_csrf", c.csrf)
	}
	return c.Do(http.MethodPost, path, strings.NewReader(v.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
}

// HTMX sends what an htmx button sends: its hx-vals as a form body, the CSRF header from the
// page's hx-headers, and HX-Request.
func (c *Client) HTMX(method, path string, vals url.Values) Response {
	c.t.Helper()
	return c.Do(method, path, strings.NewReader(vals.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded",
		"X-CSRF-Token": c.csrf, "HX-Request": "true"})
}

// API sends a JSON request with the CSRF header (when the client has one) and, for a 2xx
// answer, decodes it into out.
func (c *Client) API(method, path string, in, out any) Response {
	c.t.Helper()
	var body io.Reader
	h := map[string]string{}
	if c.csrf != "" {
		h["X-CSRF-Token"] = c.csrf
	}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			c.t.Fatal(err)
		}
		body = bytes.NewReader(b)
		h["Content-Type"] = "application/json"
	}
	r := c.Do(method, path, body, h)
	if out != nil && r.Status < 300 {
		if err := json.Unmarshal([]byte(r.Body), out); err != nil {
			c.t.Fatalf("decode %s %s: %v (%s)", method, path, err, r.Body)
		}
	}
	return r
}

// Password is the password SignUp gives every founder.
const Password = "correct horse"

// SignUp creates a founder through the JSON API and keeps the session.
func (c *Client) SignUp(email string) {
	c.t.Helper()
	var out struct{ CSRFToken string }
	r := c.API(http.MethodPost, "/api/users", map[string]string{"email": email, "password": Password}, &out)
	if r.Status != http.StatusCreated {
		c.t.Fatalf("sign up %s: %d %s", email, r.Status, r.Body)
	}
	c.csrf = out.CSRFToken
}

// Credits reads the founder's balance from the JSON API.
func (c *Client) Credits() int {
	c.t.Helper()
	var me struct{ Credits int }
	RequireStatus(c.t, c.API(http.MethodGet, "/api/me", nil, &me), http.StatusOK)
	return me.Credits
}

// Sandbox is the JSON API's view of a sandbox.
type Sandbox struct {
	ID, ProviderID, Status, PreviewURL, FailureCause, FailureCode string
	Recreated                                                     bool
}

// WaitSandbox polls the JSON API (the test's view of the backend, not what the pages do)
// until the sandbox has status, and returns it.
func (c *Client) WaitSandbox(id, status string, within time.Duration) Sandbox {
	c.t.Helper()
	var sb Sandbox
	testkit.Eventually(c.t, within, "sandbox "+id+" to be "+status, func() error {
		RequireStatus(c.t, c.API(http.MethodGet, "/api/sandboxes/"+id, nil, &sb), http.StatusOK)
		if sb.Status != status {
			return fmt.Errorf("it is %s", sb.Status)
		}
		return nil
	})
	return sb
}

// BuildCounter creates a project from the counter starter, builds it and waits until its
// sandbox runs; it returns the project's and the sandbox's ids.
func (c *Client) BuildCounter() (projectID, sandboxID string) {
	c.t.Helper()
	return c.BuildStarter("Counter", "counter")
}

// BuildStarter is BuildCounter for any starter (projects.Starters), the project named name.
func (c *Client) BuildStarter(name, starter string) (projectID, sandboxID string) {
	c.t.Helper()
	var p struct{ ID string }
	RequireStatus(c.t, c.API(http.MethodPost, "/api/projects", map[string]string{"name": name, "starter": starter}, &p), http.StatusCreated)
	var res struct{ Sandbox struct{ ID string } }
	RequireStatus(c.t, c.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "first-" + p.ID}, &res), http.StatusAccepted)
	c.WaitSandbox(res.Sandbox.ID, "running", 90*time.Second)
	return p.ID, res.Sandbox.ID
}

// Pause asks for the sandbox to be paused and waits until it is.
func (c *Client) Pause(sandboxID string) {
	c.t.Helper()
	if r := c.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/pause", nil, nil); r.Status != http.StatusOK && r.Status != http.StatusAccepted {
		c.t.Fatalf("pause: %d %s", r.Status, r.Body)
	}
	c.WaitSandbox(sandboxID, "paused", 30*time.Second)
}

// Stream opens the founder's event stream (GET /events) and returns its messages as they
// arrive, until ctx ends or the server ends the stream.
func (c *Client) Stream(ctx context.Context) <-chan testkit.SSEEvent {
	c.t.Helper()
	return testkit.OpenSSE(c.t, ctx, c.hc, c.base+"/events")
}

// RequireStatus fails t unless r has status want.
func RequireStatus(t testing.TB, r Response, want int) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %d, want %d; body: %.600s", r.Status, want, r.Body)
	}
}

// RequireContains fails t unless body contains want.
func RequireContains(t testing.TB, body, want string) {
	t.Helper()
	if !strings.Contains(body, want) {
		t.Fatalf("body does not contain %q:\n%.1500s", want, body)
	}
}
