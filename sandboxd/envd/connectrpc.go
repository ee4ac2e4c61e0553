package envd

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"sandman/sandboxd/wire"
)

// This file speaks the Connect protocol (https://connectrpc.com/docs/protocol)
// in its JSON codec, the one both official SDKs use with envd: unary calls
// are a plain JSON POST, server-streaming calls exchange envelopes.

const (
	envelopeCompressed = 0x01
	envelopeEndStream  = 0x02
	maxEnvelope        = 16 << 20
)

// rpcError is a Connect error; Code is one of the protocol's code strings.
type rpcError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

func (e *rpcError) Error() string { return e.Code + ": " + e.Message }

func rpcErr(code, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// connectHTTPStatus maps Connect codes to HTTP statuses for unary errors.
var connectHTTPStatus = map[string]int{
	"canceled": 499, "unknown": 500, "invalid_argument": 400, "deadline_exceeded": 504,
	"not_found": 404, "already_exists": 409, "permission_denied": 403, "resource_exhausted": 429,
	"failed_precondition": 400, "aborted": 409, "out_of_range": 400, "unimplemented": 501,
	"internal": 500, "unavailable": 503, "data_loss": 500, "unauthenticated": 401,
}

func writeRPCError(w http.ResponseWriter, e *rpcError) {
	status, ok := connectHTTPStatus[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	wire.WriteJSON(w, status, e)
}

// readEnvelope reads one envelope: a flag byte, a big-endian uint32 length
// and that many bytes of message.
func readEnvelope(r io.Reader) (flags byte, msg []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxEnvelope {
		return 0, nil, fmt.Errorf("envelope of %d bytes is too large", n)
	}
	msg = make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return 0, nil, fmt.Errorf("short envelope: %w", err)
	}
	return hdr[0], msg, nil
}

func appendEnvelope(dst []byte, flags byte, msg []byte) []byte {
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(msg)))
	return append(dst, msg...)
}

// decodeStreamRequest reads the single request message of a server-streaming
// call. A plain JSON body (no envelope) is accepted too, for hand-written
// clients.
func decodeStreamRequest(r *http.Request, v any) *rpcError {
	body := http.MaxBytesReader(nil, r.Body, maxEnvelope+5)
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/connect+json":
		flags, msg, err := readEnvelope(body)
		if err != nil {
			return rpcErr("invalid_argument", "read request: %v", err)
		}
		if flags&envelopeCompressed != 0 {
			return rpcErr("internal", "compressed requests are not supported")
		}
		if err := json.Unmarshal(msg, v); err != nil {
			return rpcErr("invalid_argument", "decode request: %v", err)
		}
	case "application/json", "":
		if err := json.NewDecoder(body).Decode(v); err != nil && !errors.Is(err, io.EOF) {
			return rpcErr("invalid_argument", "decode request: %v", err)
		}
	default:
		return rpcErr("unimplemented", "content type %q is not supported: use the JSON codec", ct)
	}
	return nil
}

// decodeUnary reads a unary request body; an empty body is the empty message.
func decodeUnary(r *http.Request, v any) *rpcError {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "application/json" && ct != "" {
		return rpcErr("unimplemented", "content type %q is not supported: use the JSON codec", ct)
	}
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxEnvelope))
	if err != nil {
		return rpcErr("invalid_argument", "read request: %v", err)
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return rpcErr("invalid_argument", "decode request: %v", err)
	}
	return nil
}

// streamWriter writes a server stream's envelopes, flushing each one so that
// output reaches the client as it happens.
type streamWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func newStreamWriter(w http.ResponseWriter) *streamWriter {
	return &streamWriter{w: w, rc: http.NewResponseController(w)}
}

func (s *streamWriter) startLocked() {
	if !s.started {
		s.started = true
		s.w.Header().Set("Content-Type", "application/connect+json")
		s.w.WriteHeader(http.StatusOK)
	}
}

func (s *streamWriter) send(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startLocked()
	if _, err := s.w.Write(appendEnvelope(nil, 0, b)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// end closes the stream, with an error or without.
func (s *streamWriter) end(e *rpcError) {
	var body []byte
	if e != nil {
		body, _ = json.Marshal(map[string]any{"error": e})
	} else {
		body = []byte("{}")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startLocked()
	_, _ = s.w.Write(appendEnvelope(nil, envelopeEndStream, body))
	_ = s.rc.Flush()
}
