package testkit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// SSEEvent is one message of a server-sent event stream.
type SSEEvent struct {
	ID    string // the message's own id field (empty when it has none)
	Event string // its event name (empty: "message")
	Data  string // its data lines joined with "\n"
}

// ReadSSE reads a text/event-stream from r and calls fn with each message until the stream ends
// (nil), fails (the error), or fn returns false (nil). Comments, such as heartbeats, are not
// messages. It allocates little per message, so a load generator can read thousands of streams.
func ReadSSE(r *bufio.Reader, fn func(SSEEvent) bool) error {
	var (
		ev      SSEEvent
		data    []byte
		hasData bool
		long    []byte // a line longer than r's buffer, assembled
	)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if long != nil {
			line, long = append(long, line...), nil
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) == 0 {
			if ev.Event != "" || hasData {
				ev.Data = string(data)
				if !fn(ev) {
					return nil
				}
			}
			ev, data, hasData = SSEEvent{}, data[:0], false
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "id":
			ev.ID = string(value)
		case "event":
			ev.Event = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data, hasData = append(data, value...), true
		}
	}
}

// OpenSSE opens url as an event stream with client (and so its cookies) and returns the
// messages as they arrive. The channel closes when the server ends the stream or ctx ends.
func OpenSSE(t testing.TB, ctx context.Context, client *http.Client, url string) <-chan SSEEvent {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	streaming := *client
	streaming.Timeout = 0 // a stream lives until ctx or the server ends it
	res, err := streaming.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, body)
	}
	out := make(chan SSEEvent, 1024)
	go func() {
		defer res.Body.Close()
		defer close(out)
		_ = ReadSSE(bufio.NewReader(res.Body), func(ev SSEEvent) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	return out
}

// NextSSE reads events until one matches, and returns it. It fails t when within passes first
// or the stream ends.
func NextSSE(t testing.TB, events <-chan SSEEvent, within time.Duration, what string, match func(SSEEvent) bool) SSEEvent {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case ev, open := <-events:
			if !open {
				t.Fatalf("the stream ended while waiting for %s", what)
			}
			if match(ev) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no %s within %s", what, within)
		}
	}
}

// SSEEnds waits until the server ends the stream (its messages until then are read and
// dropped), and fails t after within.
func SSEEnds(t testing.TB, events <-chan SSEEvent, within time.Duration) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case _, open := <-events:
			if !open {
				return
			}
		case <-timer.C:
			t.Fatalf("the stream is still open after %s", within)
		}
	}
}
