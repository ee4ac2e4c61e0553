package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a log sink the test can read while run writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--api-addr", "127.0.0.1:0", "--sandbox-addr", "127.0.0.1:0",
			"--state-dir", t.TempDir(), "--api-key", "e2b_00ff", "--log-format", "json"}, &logs)
	}()
	apiURL := regexp.MustCompile(`"api_url":"(http://[^"]+)"`)
	var m []string
	deadline := time.Now().Add(10 * time.Second)
	for m = apiURL.FindStringSubmatch(logs.String()); m == nil; m = apiURL.FindStringSubmatch(logs.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no listening line in %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get(m[1] + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
	if !strings.Contains(logs.String(), `"msg":"sandbox isolation"`) {
		t.Fatalf("the isolation mode must be logged: %s", logs.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	tests := map[string][]string{
		"no state dir":    {"--api-key", "e2b_00"},
		"bad key":         {"--state-dir", t.TempDir(), "--api-key", "sk_nope"},
		"bad isolation":   {"--state-dir", t.TempDir(), "--api-key", "e2b_00", "--isolation", "vm"},
		"secretless hook": {"--state-dir", t.TempDir(), "--api-key", "e2b_00", "--webhook-url", "http://x"},
		"bad log format":  {"--state-dir", t.TempDir(), "--api-key", "e2b_00", "--log-format", "xml"},
		"unknown flag":    {"--nope"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			var logs syncBuffer
			if err := run(context.Background(), args, &logs); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
