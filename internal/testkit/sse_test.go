package testkit

import (
	"bufio"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestReadSSE(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100)
	tests := []struct {
		name, stream string
		want         []SSEEvent
	}{
		{"one message", "id: 7\nevent: pane-p\ndata: <p>hi</p>\n\n", []SSEEvent{{ID: "7", Event: "pane-p", Data: "<p>hi</p>"}}},
		{"data lines are joined", "event: card\ndata: a\ndata: b\n\n", []SSEEvent{{Event: "card", Data: "a\nb"}}},
		{"comments are not messages", ": ping\n\n: ping\n\nevent: x\ndata: 1\n\n", []SSEEvent{{Event: "x", Data: "1"}}},
		{"CRLF line ends", "event: x\r\ndata: 1\r\n\r\n", []SSEEvent{{Event: "x", Data: "1"}}},
		{"no space after the colon", "event:x\ndata:1\n\n", []SSEEvent{{Event: "x", Data: "1"}}},
		{"a line longer than the buffer", "data: " + long + "\n\n", []SSEEvent{{Data: long}}},
		{"fields do not leak into the next message", "id: 1\nevent: a\ndata: 1\n\ndata: 2\n\n", []SSEEvent{{ID: "1", Event: "a", Data: "1"}, {Data: "2"}}},
		{"an unfinished message is dropped", "event: a\ndata: 1\n\nevent: b\ndata: 2\n", []SSEEvent{{Event: "a", Data: "1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []SSEEvent
			err := ReadSSE(bufio.NewReaderSize(strings.NewReader(tt.stream), 16), func(ev SSEEvent) bool {
				got = append(got, ev)
				return true
			})
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %+v (%v), want %+v", got, err, tt.want)
			}
		})
	}
}

func TestReadSSEStopsWhenTold(t *testing.T) {
	t.Parallel()
	n := 0
	err := ReadSSE(bufio.NewReader(strings.NewReader("data: 1\n\ndata: 2\n\ndata: 3\n\n")), func(SSEEvent) bool {
		n++
		return n < 2
	})
	if err != nil || n != 2 {
		t.Fatalf("read %d messages (%v), want to stop after 2", n, err)
	}
	broken := errors.New("connection reset")
	err = ReadSSE(bufio.NewReader(&failingReader{data: "data: 1\n\n", err: broken}), func(SSEEvent) bool { return true })
	if !errors.Is(err, broken) {
		t.Fatalf("err %v, want the reader's", err)
	}
}

type failingReader struct {
	data string
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.data == "" {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}
