package e2b

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

func TestErrorFromResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		body     string
		want     error
		wantCode string
		wantMsg  string
	}{
		{"not found", 404, `{"code":404,"message":"Sandbox \"i1\" doesn't exist or you don't have access to it"}`, ErrNotFound, "", `Sandbox "i1" doesn't exist or you don't have access to it`},
		{"gone", 410, `{"code":410,"message":"gone"}`, ErrNotFound, "", "gone"},
		{"unauthorized", 401, `{"code":401,"message":"Invalid API key format"}`, ErrAuth, "", "Invalid API key format"},
		{"forbidden", 403, `{"code":403,"message":"team blocked"}`, ErrAuth, "", "team blocked"},
		{"conflict", 409, `{"code":409,"message":"already paused"}`, ErrConflict, "", "already paused"},
		{"bad request", 400, `{"code":400,"message":"Timeout must be greater than 0"}`, ErrInvalid, "", "Timeout must be greater than 0"},
		{"server error with error_code", 500, `{"code":500,"message":"boom","error_code":"sandbox_create_failed"}`, ErrTransient, "sandbox_create_failed", "boom"},
		{"gateway timeout, HTML", 504, "<html><body>upstream request timeout</body></html>", ErrTransient, "", "<html><body>upstream request timeout</body></html>"},
		{"proxy 502 JSON with numeric code", 502, `{"sandboxId":"i1","message":"The sandbox was not found","code":502}`, ErrTransient, "", "The sandbox was not found"},
		{"request timeout", 408, ``, ErrTransient, "", ""},
		{"envd Connect not_found", 404, `{"code":"not_found","message":"process 7 not found"}`, ErrNotFound, "not_found", "process 7 not found"},
		{"envd Connect unauthenticated", 401, `{"code":"unauthenticated","message":"no"}`, ErrAuth, "unauthenticated", "no"},
		{"envd Connect unavailable on 200-ish mapping", 503, `{"code":"unavailable","message":"x"}`, ErrTransient, "unavailable", "x"},
		{"teapot is none of ours", 418, `{}`, nil, "", "{}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := errorFromResponse("op", tt.status, http.Header{}, []byte(tt.body))
			var apiErr *APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("%v is not an *APIError", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.want)
			}
			for _, other := range []error{ErrNotFound, ErrAuth, ErrConflict, ErrInvalid, ErrTransient, ErrRateLimited, ErrCircuitOpen} {
				if other != tt.want && errors.Is(err, other) {
					t.Errorf("%v also matches %v", err, other)
				}
			}
			if apiErr.Status != tt.status || apiErr.Code != tt.wantCode || apiErr.Message != tt.wantMsg {
				t.Errorf("got status %d code %q message %q", apiErr.Status, apiErr.Code, apiErr.Message)
			}
		})
	}
}

func TestRateLimitedError(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("Retry-After", "7")
	err := error(errorFromResponse("connect", 429, h, []byte(`{"code":429,"message":"Rate limit exceeded"}`)))
	var rl *RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Fatalf("got %#v, want a *RateLimitedError with RetryAfter 7s", err)
	}
	if !errors.Is(err, ErrRateLimited) {
		t.Error("a RateLimitedError must match ErrRateLimited")
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 429 {
		t.Error("a RateLimitedError must expose its *APIError")
	}
	if errors.Is(err, ErrTransient) {
		t.Error("a rate limit is not a transient failure")
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"3", 3 * time.Second, true},
		{" 12 ", 12 * time.Second, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"abc", 0, false},
		{"99999999999999999999", 0, false},
		{"86400", time.Hour, true},
		{"Sat, 01 Aug 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Sat, 01 Aug 2026 11:00:00 GMT", 0, true},
		{"Saturday, 01-Aug-26 12:00:05 GMT", 5 * time.Second, true},
		{"Sun, 01 Aug 2027 12:00:00 GMT", time.Hour, true},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestTransportErrorTyping(t *testing.T) {
	t.Parallel()
	live := context.Background()
	if err := transportError("get", live, errors.New("connection reset")); !errors.Is(err, ErrTransient) {
		t.Errorf("a network error must be transient: %v", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	err := transportError("get", cancelled, context.Canceled)
	if errors.Is(err, ErrTransient) || !errors.Is(err, context.Canceled) {
		t.Errorf("a cancellation by the caller must stay context.Canceled, not transient: %v", err)
	}
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	err = transportError("get", expired, context.DeadlineExceeded)
	if !errors.Is(err, ErrTransient) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a timeout must be transient and keep DeadlineExceeded: %v", err)
	}
}

func TestShortText(t *testing.T) {
	t.Parallel()
	long := make([]byte, 1000)
	for i := range long {
		long[i] = 'é' & 0x7f
	}
	if got := shortText(long); len(got) > 310 {
		t.Errorf("shortText kept %d bytes", len(got))
	}
	if got := shortText([]byte("a\n  b\x00\xff")); got != "a b\x00?" {
		t.Errorf("shortText = %q", got)
	}
}
