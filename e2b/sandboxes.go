package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// State is a sandbox's state as the provider reports it. A killed sandbox has no state: it is
// ErrNotFound.
type State string

// The provider's states.
const (
	StateRunning State = "running"
	StatePaused  State = "paused"
)

// OnTimeout is what the provider does when a sandbox's time runs out.
type OnTimeout string

// The choices for CreateParams.OnTimeout.
const (
	OnTimeoutKill  OnTimeout = "kill"
	OnTimeoutPause OnTimeout = "pause"
)

// CreateKeyMetadata is the metadata key under which CreateSandbox stores
// CreateParams.IdempotencyKey.
const CreateKeyMetadata = "sandman_create_key"

// DefaultSandboxTimeoutSec is the lifetime CreateSandbox asks for when TimeoutSec is 0, as the
// SDKs do.
const DefaultSandboxTimeoutSec = 300

// Sandbox is the provider's view of one sandbox. Create and Connect fill the identity and
// access fields; Get and List also fill state, times, resources and metadata. Callers that
// only hold an ID (and the envd token) may build one themselves for the envd methods.
type Sandbox struct {
	ID         string `json:"sandboxID"`
	TemplateID string `json:"templateID"`
	Alias      string `json:"alias,omitempty"`
	// Domain is the sandbox domain the provider chose; empty means the configured one.
	Domain      string `json:"domain,omitempty"`
	EnvdVersion string `json:"envdVersion,omitempty"`
	// EnvdAccessToken authenticates envd calls; set for sandboxes created Secure.
	EnvdAccessToken    string    `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string    `json:"trafficAccessToken,omitempty"`
	State              State     `json:"state,omitempty"`
	StartedAt          time.Time `json:"startedAt"`
	// EndAt is when a running sandbox's time runs out. For a paused sandbox it is the time of
	// the pause, not an expiry: never classify by it.
	EndAt      time.Time         `json:"endAt"`
	CPUCount   int               `json:"cpuCount,omitempty"`
	MemoryMB   int               `json:"memoryMB,omitempty"`
	DiskSizeMB int               `json:"diskSizeMB,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	// Lifecycle is only in GetSandbox answers.
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
}

// Lifecycle is the timeout policy the provider stored for a sandbox. Whether its auto-pause
// keeps memory is not reported back.
type Lifecycle struct {
	AutoResume bool      `json:"autoResume"`
	OnTimeout  OnTimeout `json:"onTimeout"`
}

// CreateParams describes a new sandbox.
type CreateParams struct {
	// Template is the template ID or name, e.g. "base".
	Template string
	// TimeoutSec is the sandbox's lifetime; 0 means DefaultSandboxTimeoutSec.
	TimeoutSec int
	Metadata   map[string]string
	EnvVars    map[string]string
	// OnTimeout is what happens when the lifetime ends; empty is the provider's default, kill,
	// which is sent as such (every lifecycle field is sent).
	OnTimeout OnTimeout
	// FilesystemOnlyPause makes the on-timeout pause a filesystem-only snapshot
	// (autoPauseMemory=false); it requires OnTimeout pause and excludes AutoResume.
	FilesystemOnlyPause bool
	// AutoResume lets traffic resume the paused sandbox; it requires OnTimeout pause. False is
	// sent as autoResume {enabled: false}, never left to the provider's default.
	AutoResume bool
	// Secure makes the provider issue an envd access token, which envd calls then need.
	Secure bool
	// AllowInternetAccess nil leaves the provider's default (allowed).
	AllowInternetAccess *bool
	// IdempotencyKey, when set, makes the create safe to retry after an ambiguous failure
	// (timeout, reset connection, 5xx other than 503). The key is stored in the metadata under
	// CreateKeyMetadata; before repeating, the client lists sandboxes with that key and returns
	// the one it finds instead of creating a second. Without a key such failures are not
	// retried: the error is ErrTransient and a sandbox may or may not exist.
	IdempotencyKey string
}

type newSandboxBody struct {
	TemplateID          string            `json:"templateID"`
	Timeout             int               `json:"timeout"`
	AutoPause           *bool             `json:"autoPause,omitempty"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory,omitempty"`
	AutoResume          *autoResumeBody   `json:"autoResume,omitempty"`
	Secure              bool              `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
}

type autoResumeBody struct {
	Enabled bool `json:"enabled"`
}

// body checks p like the SDKs do and maps it to the wire (docs/provider.md, "Sandboxes").
func (p CreateParams) body() (newSandboxBody, error) {
	b := newSandboxBody{TemplateID: p.Template, Timeout: p.TimeoutSec, Secure: p.Secure,
		AllowInternetAccess: p.AllowInternetAccess, EnvVars: p.EnvVars}
	var problems []string
	if p.Template == "" {
		problems = append(problems, "a template is required")
	}
	if p.TimeoutSec < 0 {
		problems = append(problems, "the timeout cannot be negative")
	}
	if b.Timeout == 0 {
		b.Timeout = DefaultSandboxTimeoutSec
	}
	// Every lifecycle field is sent, the provider's defaults included: the SDKs now omit
	// autoResume so that the API owns its default, and whether a sandbox wakes on traffic must
	// stay the caller's decision (docs/provider.md, "Sandboxes").
	pause := false
	switch p.OnTimeout {
	case "", OnTimeoutKill:
	case OnTimeoutPause:
		pause = true
	default:
		problems = append(problems, fmt.Sprintf("unknown on-timeout action %q", p.OnTimeout))
	}
	b.AutoPause = &pause
	if pause {
		// autoPauseMemory is only valid with autoPause.
		keepMemory := !p.FilesystemOnlyPause
		b.AutoPauseMemory = &keepMemory
	}
	if p.FilesystemOnlyPause {
		if !pause {
			problems = append(problems, "a filesystem-only pause needs on-timeout pause")
		}
		if p.AutoResume {
			problems = append(problems, "a filesystem-only pause cannot be auto-resumed")
		}
	}
	if p.AutoResume && !pause {
		problems = append(problems, "auto-resume needs on-timeout pause")
	}
	b.AutoResume = &autoResumeBody{Enabled: p.AutoResume}
	if len(p.Metadata) > 0 || p.IdempotencyKey != "" {
		b.Metadata = make(map[string]string, len(p.Metadata)+1)
		for k, v := range p.Metadata {
			b.Metadata[k] = v
		}
		if p.IdempotencyKey != "" {
			b.Metadata[CreateKeyMetadata] = p.IdempotencyKey
		}
	}
	if len(problems) > 0 {
		return b, fmt.Errorf("e2b create: %w: %s", ErrInvalid, strings.Join(problems, "; "))
	}
	return b, nil
}

// CreateSandbox starts a new sandbox. Failures that prove nothing was created (429, 503,
// connection refused) are retried; for others see CreateParams.IdempotencyKey.
func (c *Client) CreateSandbox(ctx context.Context, p CreateParams) (Sandbox, error) {
	body, err := p.body()
	if err != nil {
		return Sandbox{}, err
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return Sandbox{}, err
	}
	r := &request{op: "create", method: http.MethodPost, url: c.apiURL("/sandboxes", nil), body: raw,
		contentType: "application/json", api: true}
	if p.IdempotencyKey != "" {
		r.resolveAmbiguous = func(ctx context.Context) (*response, error) {
			return c.findCreated(ctx, p.IdempotencyKey)
		}
	}
	resp, err := c.do(ctx, r)
	if err != nil {
		return Sandbox{}, err
	}
	return decodeSandbox("create", resp.body)
}

// findCreated looks for the sandbox an ambiguous create may have made; nil means none.
func (c *Client) findCreated(ctx context.Context, key string) (*response, error) {
	page, err := c.ListSandboxes(ctx, ListParams{Metadata: map[string]string{CreateKeyMetadata: key}, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(page.Sandboxes) == 0 {
		return nil, nil
	}
	// The list omits the envd token; the detail has it.
	return c.do(ctx, &request{op: "get", method: http.MethodGet,
		url: c.apiURL("/sandboxes/"+url.PathEscape(page.Sandboxes[0].ID), nil), api: true, idempotent: true})
}

func decodeSandbox(op string, body []byte) (Sandbox, error) {
	var sb Sandbox
	if err := json.Unmarshal(body, &sb); err != nil {
		return Sandbox{}, fmt.Errorf("e2b %s: decode answer: %w", op, err)
	}
	if sb.ID == "" {
		return Sandbox{}, fmt.Errorf("e2b %s: answer has no sandboxID", op)
	}
	return sb, nil
}

func sandboxPath(id string, suffix string) (string, error) {
	// An empty ID would turn GET /sandboxes/{id} into the list route.
	if id == "" || strings.ContainsAny(id, "/?#") {
		return "", fmt.Errorf("e2b: %w: bad sandbox ID %q", ErrInvalid, id)
	}
	return "/sandboxes/" + url.PathEscape(id) + suffix, nil
}

// GetSandbox returns the provider's detail of one sandbox, or ErrNotFound when it is gone.
func (c *Client) GetSandbox(ctx context.Context, id string) (Sandbox, error) {
	path, err := sandboxPath(id, "")
	if err != nil {
		return Sandbox{}, err
	}
	resp, err := c.do(ctx, &request{op: "get", method: http.MethodGet, url: c.apiURL(path, nil), api: true, idempotent: true})
	if err != nil {
		return Sandbox{}, err
	}
	return decodeSandbox("get", resp.body)
}

// ListParams filters and pages GET /v2/sandboxes.
type ListParams struct {
	// States filters by state; empty means both.
	States []State
	// Metadata keeps sandboxes having every given key with its value.
	Metadata map[string]string
	// Limit is the page size, 1..100; 0 means 100.
	Limit int
	// NextToken continues from a previous page.
	NextToken string
}

// ListPage is one page of sandboxes.
type ListPage struct {
	Sandboxes []Sandbox
	// NextToken is empty on the last page.
	NextToken string
	// TotalRunning counts the running sandboxes matching the filters, or -1 when the provider
	// did not say (it only does when running ones were asked for).
	TotalRunning int
}

// MaxListLimit is the largest page the provider serves.
const MaxListLimit = 100

// ListSandboxes returns one page of running and paused sandboxes.
func (c *Client) ListSandboxes(ctx context.Context, p ListParams) (ListPage, error) {
	if p.Limit < 0 || p.Limit > MaxListLimit {
		return ListPage{}, fmt.Errorf("e2b list: %w: limit %d is outside 1..%d", ErrInvalid, p.Limit, MaxListLimit)
	}
	q := url.Values{}
	if len(p.States) > 0 {
		states := make([]string, len(p.States))
		for i, s := range p.States {
			states[i] = string(s)
		}
		// style=form, explode=false: one comma-separated value.
		q.Set("state", strings.Join(states, ","))
	}
	if len(p.Metadata) > 0 {
		q.Set("metadata", encodeMetadataFilter(p.Metadata))
	}
	limit := p.Limit
	if limit == 0 {
		limit = MaxListLimit
	}
	q.Set("limit", strconv.Itoa(limit))
	if p.NextToken != "" {
		q.Set("nextToken", p.NextToken)
	}
	resp, err := c.do(ctx, &request{op: "list", method: http.MethodGet, url: c.apiURL("/v2/sandboxes", q), api: true, idempotent: true})
	if err != nil {
		return ListPage{}, err
	}
	var page ListPage
	if err := json.Unmarshal(resp.body, &page.Sandboxes); err != nil {
		return ListPage{}, fmt.Errorf("e2b list: decode answer: %w", err)
	}
	page.NextToken, page.TotalRunning = parseListHeaders(resp.header)
	return page, nil
}

// parseListHeaders reads X-Next-Token (absent or blank: last page) and X-Total-Running.
func parseListHeaders(h http.Header) (nextToken string, totalRunning int) {
	nextToken = strings.TrimSpace(h.Get("X-Next-Token"))
	totalRunning = -1
	if v := strings.TrimSpace(h.Get("X-Total-Running")); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			totalRunning = n
		}
	}
	return nextToken, totalRunning
}

// maxListPages bounds a walk of the list: a million sandboxes, ten times the scale the reconcile
// is measured at (BENCHMARKS.md), and a guard against a provider that never stops paging.
const maxListPages = 10_000

// ListAllSandboxes walks every page of the list (100 per call: 100,000 sandboxes take 1,000
// calls). A sandbox that changes state during the walk can be missed, so callers must confirm
// with GetSandbox before treating a missing one as gone.
func (c *Client) ListAllSandboxes(ctx context.Context, p ListParams) ([]Sandbox, error) {
	var all []Sandbox
	if err := c.WalkSandboxes(ctx, p, func(page []Sandbox) error {
		all = append(all, page...)
		return nil
	}); err != nil {
		return nil, err
	}
	return all, nil
}

// WalkSandboxes is ListAllSandboxes a page at a time: visit gets each page's sandboxes not seen
// on an earlier page, before the next page is asked for, so a caller can work on one page while
// the walk goes on. An error from visit ends the walk with it.
func (c *Client) WalkSandboxes(ctx context.Context, p ListParams, visit func([]Sandbox) error) error {
	if p.Limit == 0 {
		p.Limit = MaxListLimit
	}
	// One deadline for the whole walk, not one per page.
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	seen := map[string]bool{}
	tokens := map[string]bool{}
	for range maxListPages {
		page, err := c.ListSandboxes(ctx, p)
		if err != nil {
			return err
		}
		fresh := page.Sandboxes[:0]
		for _, sb := range page.Sandboxes {
			if !seen[sb.ID] {
				seen[sb.ID] = true
				fresh = append(fresh, sb)
			}
		}
		if err := visit(fresh); err != nil {
			return err
		}
		if page.NextToken == "" {
			return nil
		}
		if tokens[page.NextToken] {
			return fmt.Errorf("e2b list: the provider repeated next token %q", page.NextToken)
		}
		tokens[page.NextToken] = true
		p.NextToken = page.NextToken
	}
	return fmt.Errorf("e2b list: more than %d pages", maxListPages)
}

// encodeMetadataFilter builds the metadata query value as the JS SDK does: each key and value
// encodeURIComponent-ed, joined as a form-encoded k=v&… string. The server unescapes the
// whole value, splits on & and =, then unescapes each part, so & and = inside keys and values
// survive.
func encodeMetadataFilter(m map[string]string) string {
	pairs := make([]string, 0, len(m))
	for k, v := range m {
		pairs = append(pairs, url.QueryEscape(encodeURIComponent(k))+"="+url.QueryEscape(encodeURIComponent(v)))
	}
	// Sorted so that requests are reproducible (and cacheable by anything on the way).
	slices.Sort(pairs)
	return strings.Join(pairs, "&")
}

// encodeURIComponent escapes like JavaScript's: everything but A-Z a-z 0-9 - _ . ! ~ * ' ( ).
func encodeURIComponent(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9',
			strings.IndexByte("-_.!~*'()", ch) >= 0:
			b.WriteByte(ch)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[ch>>4])
			b.WriteByte(hex[ch&15])
		}
	}
	return b.String()
}

// Pause snapshots a running sandbox: with memory (resume continues where it stopped) or
// filesystem-only (resume cold-boots). It reports false, with no error, when the provider
// answered 409: already paused (or mid-transition), as the SDKs treat it.
func (c *Client) Pause(ctx context.Context, id string, keepMemory bool) (paused bool, err error) {
	path, err := sandboxPath(id, "/pause")
	if err != nil {
		return false, err
	}
	body, _ := json.Marshal(map[string]bool{"memory": keepMemory})
	// Repeating a pause is safe: the repeat answers 409, which is success.
	resp, err := c.do(ctx, &request{op: "pause", method: http.MethodPost, url: c.apiURL(path, nil), body: body,
		contentType: "application/json", api: true, idempotent: true, accept: []int{http.StatusConflict}})
	if err != nil {
		return false, err
	}
	return resp.status != http.StatusConflict, nil
}

// Connect makes sure a sandbox runs: a paused one is resumed with exactly timeoutSec to live
// (resumed is true), a running one has its end moved to now+timeoutSec if that is later.
func (c *Client) Connect(ctx context.Context, id string, timeoutSec int) (sb Sandbox, resumed bool, err error) {
	path, err := sandboxPath(id, "/connect")
	if err != nil {
		return Sandbox{}, false, err
	}
	if timeoutSec <= 0 {
		// A zero timeout would resume a paused sandbox with no time to live.
		return Sandbox{}, false, fmt.Errorf("e2b connect: %w: timeout must be positive", ErrInvalid)
	}
	body, _ := json.Marshal(map[string]int{"timeout": timeoutSec})
	// Connect is idempotent: a repeat finds the sandbox running and answers 200.
	resp, err := c.do(ctx, &request{op: "connect", method: http.MethodPost, url: c.apiURL(path, nil), body: body,
		contentType: "application/json", api: true, idempotent: true})
	if err != nil {
		return Sandbox{}, false, err
	}
	sb, err = decodeSandbox("connect", resp.body)
	return sb, resp.status == http.StatusCreated, err
}

// SetTimeout sets a running sandbox's end to now+timeoutSec; unlike Connect it can shorten.
// A paused sandbox answers ErrNotFound.
func (c *Client) SetTimeout(ctx context.Context, id string, timeoutSec int) error {
	path, err := sandboxPath(id, "/timeout")
	if err != nil {
		return err
	}
	if timeoutSec < 0 {
		return fmt.Errorf("e2b set timeout: %w: timeout cannot be negative", ErrInvalid)
	}
	body, _ := json.Marshal(map[string]int{"timeout": timeoutSec})
	_, err = c.do(ctx, &request{op: "set_timeout", method: http.MethodPost, url: c.apiURL(path, nil), body: body,
		contentType: "application/json", api: true, idempotent: true})
	return err
}

// Refresh extends a running sandbox's life by durationSec (extend-only; the provider uses at
// least 15 s and at most 3600 s; 0 sends no duration).
func (c *Client) Refresh(ctx context.Context, id string, durationSec int) error {
	path, err := sandboxPath(id, "/refreshes")
	if err != nil {
		return err
	}
	var body []byte
	if durationSec > 0 {
		body, _ = json.Marshal(map[string]int{"duration": durationSec})
	}
	_, err = c.do(ctx, &request{op: "refresh", method: http.MethodPost, url: c.apiURL(path, nil), body: body,
		contentType: "application/json", api: true, idempotent: true})
	return err
}

// Kill stops a sandbox and deletes its snapshot. A sandbox that does not exist is ErrNotFound;
// note that a kill retried after an ambiguous failure may find it already gone by our own hand,
// so callers should treat ErrNotFound from Kill as "gone" rather than as someone else's doing.
func (c *Client) Kill(ctx context.Context, id string) error {
	path, err := sandboxPath(id, "")
	if err != nil {
		return err
	}
	_, err = c.do(ctx, &request{op: "kill", method: http.MethodDelete, url: c.apiURL(path, nil), api: true, idempotent: true})
	return err
}
