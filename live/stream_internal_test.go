package live

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
)

// A stream holds a buffer only between an event r3labs writes and the write of its batch to the
// socket: idle, it holds none (a buffer per idle stream is what the server's own bufio costs).
func TestAnIdleStreamHoldsNoBuffer(t *testing.T) {
	t.Parallel()
	server, client := net.Pipe()
	defer client.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(client); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	c, w := newTestStream(t, server)
	if w.buf != nil {
		t.Fatal("the stream holds a buffer once its headers are written")
	}
	c.published.Store(2) // a state of two events
	_, _ = w.Write([]byte("event: card\ndata: 1\n\n"))
	w.Flush()
	if w.buf == nil {
		t.Fatal("the state's first event was written before its second")
	}
	_, _ = w.Write([]byte("event: pane\ndata: 1\n\n"))
	w.Flush()
	if w.buf != nil {
		t.Fatal("the stream holds its buffer after writing the state")
	}
	w.close()
	for line := range lines {
		if line == "event: pane" {
			return
		}
	}
	t.Fatal("the state never reached the client")
}

// A batch never grows past maxBatch, however far ahead of the writer its stream was given
// events: past it the writer writes, and so waits for a slow client, whose stream's buffers then
// fill and whose mailbox keeps only the newest states. A batch without bound would take every
// state as it came, a backlog in memory.
func TestABatchIsBounded(t *testing.T) {
	t.Parallel()
	server, client := net.Pipe()
	defer client.Close()
	go func() { _, _ = io.Copy(io.Discard, client) }()
	c, w := newTestStream(t, server)
	c.published.Store(1000) // far more given than written
	event := append([]byte("data: "), bytes.Repeat([]byte("x"), 1<<10)...)
	for i := range 200 {
		_, _ = w.Write(event)
		w.Flush()
		if w.buf != nil && len(*w.buf) > chunkRoom+maxBatch+len(event) {
			t.Fatalf("after %d events of 1 KiB the batch holds %d bytes, past its bound of %d", i+1, len(*w.buf), maxBatch)
		}
	}
	w.close()
}

// newTestStream is a stream's connection and writer over nc, its headers written.
func newTestStream(t *testing.T, nc net.Conn) (*conn, *streamWriter) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := &conn{ctx: ctx, cancel: cancel}
	w := &streamWriter{c: c, nc: nc, header: http.Header{}, chunked: true, flushed: -1}
	w.WriteHeader(http.StatusOK)
	w.Flush()
	return c, w
}
