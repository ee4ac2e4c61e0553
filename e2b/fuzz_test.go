package e2b

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func FuzzParseWebhook(f *testing.F) {
	f.Add([]byte(webhookBody))
	f.Add([]byte(`{"id":"e","type":"sandbox.lifecycle.paused","sandbox_id":"i","timestamp":"2026-01-01T00:00:00Z","event_data":null}`))
	f.Add([]byte(`{"id":"e","type":"t","sandbox_id":"i","timestamp":"2026-01-01T00:00:00Z","event_data":{"sandbox_metadata":[],"kill_reason":7,"set_timeout":"x"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := ParseWebhook(body)
		if err != nil {
			return
		}
		if ev.ID == "" || ev.Type == "" || ev.SandboxID == "" {
			t.Fatalf("accepted an event missing required fields: %+v", ev)
		}
		if ev.Type == EventKilled && ev.KillReason == "" {
			t.Fatal("killed event without a kill reason")
		}
	})
}

func FuzzParseEvents(f *testing.F) {
	f.Add([]byte(`[{"version":"v2","id":"e1","type":"sandbox.lifecycle.updated","eventData":{"set_timeout":"2026-08-01T13:00:00Z"},"sandboxId":"i","timestamp":"2026-08-01T12:00:00Z"}]`))
	f.Add([]byte(`[{"version":"v1","id":"e3","eventCategory":"lifecycle","eventLabel":"kill","sandboxId":"i","timestamp":"2026-08-01T12:00:00Z"}, 1, null, "x"]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, skipped, err := ParseEvents(body)
		if err != nil {
			return
		}
		if skipped < 0 {
			t.Fatal("negative skip count")
		}
		for _, ev := range evs {
			if ev.ID == "" || ev.Type == "" || ev.SandboxID == "" {
				t.Fatalf("accepted %+v", ev)
			}
		}
	})
}

func FuzzVerifySignature(f *testing.F) {
	f.Add("secret", []byte(webhookBody), "")
	f.Add("s", []byte{}, "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU")
	f.Add("", []byte("x"), "=====")
	f.Fuzz(func(t *testing.T, secret string, body []byte, sig string) {
		got := VerifyWebhookSignature(secret, body, sig)
		if secret == "" {
			if got {
				t.Fatal("an empty secret verified")
			}
			return
		}
		right := sign(secret, body, base64.RawStdEncoding)
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.StdEncoding, base64.RawURLEncoding, base64.URLEncoding} {
			if !VerifyWebhookSignature(secret, body, sign(secret, body, enc)) {
				t.Fatal("a correct signature did not verify")
			}
		}
		norm := strings.NewReplacer("-", "+", "_", "/").Replace(strings.TrimRight(strings.TrimSpace(sig), "="))
		if got != (norm == right) {
			t.Fatalf("Verify(%q) = %v, but the normalised header equals the signature: %v", sig, got, norm == right)
		}
	})
}

func FuzzDecodeEnvelopes(f *testing.F) {
	f.Add(appendEnvelope(appendEnvelope(nil, 0, []byte(`{"event":{"start":{"pid":1}}}`)), flagEndStream, []byte(`{}`)))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{2, 0, 0, 0, 1, '{'})
	f.Fuzz(func(t *testing.T, b []byte) {
		envs, err := decodeEnvelopes(b)
		var re []byte
		for _, e := range envs {
			if len(e.msg) > maxEnvelope || e.flags&flagCompressed != 0 {
				t.Fatal("returned an envelope it should have refused")
			}
			re = appendEnvelope(re, e.flags, e.msg)
		}
		if !bytes.HasPrefix(b, re) {
			t.Fatal("decoded envelopes do not re-encode to the input")
		}
		if err == nil && len(re) != len(b) {
			t.Fatal("bytes left over without an error")
		}
		if err != nil && !errors.Is(err, errMalformedStream) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}

func FuzzProcessStream(f *testing.F) {
	f.Add(appendEnvelope(appendEnvelope(appendEnvelope(nil, 0, []byte(`{"event":{"start":{"pid":"3"}}}`)),
		0, []byte(`{"event":{"end":{"exit_code":2}}}`)), flagEndStream, []byte(`{"error":{"code":"internal"}}`)))
	f.Add(appendEnvelope(nil, 0, []byte(`{"event":{"data":{"stdout":"!!"}}}`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := &Process{op: "fuzz", body: io.NopCloser(nil), frames: &envelopeReader{r: bytes.NewReader(b)}, cancel: func() {}, cfg: Config{CallTimeout: time.Second}}
		res, err := p.Wait(t.Context())
		if err == nil && p.result == nil {
			t.Fatal("no error and no end")
		}
		if len(res.Stdout) > MaxProcessOutput || len(res.Stderr) > MaxProcessOutput {
			t.Fatal("output over its cap")
		}
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "120", "-5", "Sat, 01 Aug 2026 12:00:30 GMT", "9223372036854775807", "1e3"} {
		f.Add(s)
	}
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := parseRetryAfter(v, now)
		if d < 0 || d > maxRetryAfter || (!ok && d != 0) {
			t.Fatalf("parseRetryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}

func FuzzParseListHeaders(f *testing.F) {
	f.Add("MjAyNi0wOC0wMVQxMjowMDowMFpfX2lhYmM=", "12")
	f.Add("", "")
	f.Add(" x ", "-1")
	f.Fuzz(func(t *testing.T, token, total string) {
		h := http.Header{}
		h.Set("X-Next-Token", token)
		h.Set("X-Total-Running", total)
		tok, n := parseListHeaders(h)
		if tok != strings.TrimSpace(h.Get("X-Next-Token")) || n < -1 {
			t.Fatalf("parseListHeaders(%q, %q) = %q, %d", token, total, tok, n)
		}
	})
}

func FuzzErrorFromResponse(f *testing.F) {
	f.Add(404, []byte(`{"code":404,"message":"x"}`), "")
	f.Add(429, []byte(`{"code":429,"message":"Rate limit exceeded"}`), "3")
	f.Add(200, []byte(`{"code":"resource_exhausted"}`), "Sat, 01 Aug 2026 12:00:30 GMT")
	f.Add(502, []byte("<html>"), "x")
	f.Fuzz(func(t *testing.T, status int, body []byte, retryAfter string) {
		status = 100 + abs(status)%500
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		err := errorFromResponse("op", status, h, body)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Status != status {
			t.Fatalf("%v: no *APIError with the status", err)
		}
		var rl *RateLimitedError
		if errors.As(err, &rl) != (status == 429 || apiErr.Code == "resource_exhausted") {
			t.Fatalf("rate limit typing wrong for %d %q", status, apiErr.Code)
		}
		_ = err.Error()
	})
}

func abs(n int) int {
	if n < 0 {
		if n == -n { // math.MinInt
			return 0
		}
		return -n
	}
	return n
}

func FuzzMetadataFilter(f *testing.F) {
	f.Add("project", "p1", "owner", "a&b=c")
	f.Add("", "", "%", "+")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		md := map[string]string{k1: v1, k2: v2}
		q := url.Values{}
		q.Set("metadata", encodeMetadataFilter(md))
		got := serverDecodeMetadata(t, q.Encode())
		if len(got) != len(md) {
			t.Fatalf("round trip of %q gave %q", md, got)
		}
		for k, v := range md {
			if got[k] != v {
				t.Fatalf("round trip of %q gave %q", md, got)
			}
		}
	})
}
