package live

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// streamWriter is the response r3labs writes a hijacked stream to. An idle stream holds no
// buffer: one is taken from a pool when an event is written and given back once its bytes are
// on the socket, in one write per batch. A batch is every event the stream had been given when
// the writer caught up with them (conn.published), so every message of a snapshot, or a state
// and a heartbeat, leave in one write instead of one each. Only the stream's own
// goroutine (r3labs' ServeHTTP, then close) uses it.
type streamWriter struct {
	c       *conn
	nc      net.Conn
	header  http.Header // until the status line is written; nil after
	head    []byte      // the status line and headers, until the first batch carries them
	chunked bool        // HTTP/1.1: chunked encoding; HTTP/1.0: the body ends with the connection
	buf     *[]byte     // the batch not yet written, after chunkRoom bytes; nil while idle
	// flushed counts the events r3labs has written (it flushes after each, and once after the
	// status line, hence the start at -1).
	flushed int64
	failed  bool
}

// chunkRoom is kept free at the start of a batch for its chunk's size line.
const chunkRoom = 18

// streamBufs are the writers' batches; idle streams hold none.
var streamBufs = sync.Pool{New: func() any { b := make([]byte, chunkRoom, 8<<10); return &b }}

// errStreamEnded answers r3labs' writes once one write failed (it ignores the errors).
var errStreamEnded = errors.New("live: the stream's connection failed")

func (w *streamWriter) Header() http.Header {
	if w.header == nil {
		return http.Header{} // written already: a late change goes nowhere
	}
	return w.header
}

// WriteHeader makes the status line and headers, which go with the first batch. The
// connection is not the server's any more, so it closes when the stream ends.
func (w *streamWriter) WriteHeader(status int) {
	if w.header == nil {
		return
	}
	h := w.header
	w.header = nil
	h.Del("Content-Length")
	h.Set("Connection", "close")
	if w.chunked {
		h.Set("Transfer-Encoding", "chunked")
	}
	var out bytes.Buffer
	out.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	_ = h.Write(&out)
	out.WriteString("\r\n")
	w.head = out.Bytes()
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if w.header != nil {
		w.WriteHeader(http.StatusOK)
	}
	if w.failed {
		return 0, errStreamEnded
	}
	if w.buf == nil {
		w.buf = streamBufs.Get().(*[]byte)
	}
	*w.buf = append(*w.buf, p...)
	return len(p), nil
}

// Flush writes the batch once the writer has caught up with the events the stream was given:
// while more of them are on their way through r3labs, they join it, up to maxBatch. (Past it
// the batch is written anyway: a slow client must hold the writer back, so that the stream's
// buffers fill and its mailbox keeps only the newest states, rather than pile up here.)
func (w *streamWriter) Flush() {
	if w.flushed++; w.flushed < w.c.published.Load() && w.buf != nil && len(*w.buf) < maxBatch {
		return
	}
	w.writeOut()
}

// maxBatch bounds a batch: a state (a founder's card, pane and balance) is a few KiB.
const maxBatch = 32 << 10

// writeOut writes the pending batch (after the headers, the first time) in one write, and lets
// its buffer go. A failed write (the client left, or end cut the connection) ends the stream.
func (w *streamWriter) writeOut() {
	var out []byte
	if w.buf != nil {
		b := *w.buf
		start := chunkRoom
		if w.chunked {
			var size [chunkRoom]byte
			line := append(strconv.AppendInt(size[:0], int64(len(b)-chunkRoom), 16), '\r', '\n')
			start -= copy(b[chunkRoom-len(line):], line)
			b = append(b, '\r', '\n')
		}
		out = b[start:]
		*w.buf = b
	}
	if w.head != nil {
		out = append(w.head, out...)
		w.head = nil
	}
	if len(out) > 0 && !w.failed {
		if _, err := w.nc.Write(out); err != nil {
			w.failed = true
			w.c.end()
		}
	}
	w.release()
}

// release gives the batch's buffer back (a big one is left to the collector).
func (w *streamWriter) release() {
	if w.buf == nil {
		return
	}
	if cap(*w.buf) <= 64<<10 {
		*w.buf = (*w.buf)[:chunkRoom]
		streamBufs.Put(w.buf)
	}
	w.buf = nil
}

// close ends the response (its last chunk, if the connection still takes it at once) and
// closes the connection.
func (w *streamWriter) close() {
	w.writeOut()
	if !w.failed && w.chunked {
		_ = w.nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = w.nc.Write([]byte("0\r\n\r\n"))
	}
	_ = w.nc.Close()
}

// watchByReading calls gone once reading the connection fails: its peer left, or it was
// closed. It costs the stream a goroutine parked in the read (and a one-byte buffer); anything
// the client sends is discarded.
func watchByReading(nc net.Conn, gone func()) (unwatch func()) {
	go func() {
		var b [1]byte
		for {
			if _, err := nc.Read(b[:]); err != nil {
				gone()
				return
			}
		}
	}()
	return func() {}
}
