package e2b

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Connect protocol envelopes for server-streaming calls with the JSON codec
// (application/connect+json): 1 flag byte, a 4-byte big-endian length, the message.
const (
	flagCompressed = 0x01
	flagEndStream  = 0x02
	// maxEnvelope bounds one message; envd sends output in small chunks.
	maxEnvelope = 4 << 20
)

// errMalformedStream marks a stream that is not valid Connect framing.
var errMalformedStream = errors.New("malformed Connect stream")

func appendEnvelope(dst []byte, flags byte, msg []byte) []byte {
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(msg)))
	return append(dst, msg...)
}

type envelopeReader struct {
	r   io.Reader
	hdr [5]byte
}

// next returns the next envelope; io.EOF only at a clean boundary between envelopes.
func (er *envelopeReader) next() (flags byte, msg []byte, err error) {
	if _, err := io.ReadFull(er.r, er.hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("%w: truncated envelope header", errMalformedStream)
		}
		return 0, nil, err
	}
	flags = er.hdr[0]
	size := binary.BigEndian.Uint32(er.hdr[1:])
	if size > maxEnvelope {
		return 0, nil, fmt.Errorf("%w: %d-byte message exceeds %d", errMalformedStream, size, maxEnvelope)
	}
	if flags&flagCompressed != 0 {
		// We never offer compression, so a compressed message is a protocol error.
		return 0, nil, fmt.Errorf("%w: compressed message not negotiated", errMalformedStream)
	}
	msg = make([]byte, size)
	if _, err := io.ReadFull(er.r, msg); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("%w: truncated message", errMalformedStream)
		}
		return 0, nil, err
	}
	return flags, msg, nil
}

type envelope struct {
	flags byte
	msg   []byte
}

// decodeEnvelopes splits a whole stream body; used by tests and fuzzing.
func decodeEnvelopes(b []byte) ([]envelope, error) {
	er := &envelopeReader{r: bytes.NewReader(b)}
	var out []envelope
	for {
		flags, msg, err := er.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, envelope{flags, msg})
	}
}

// endStreamError parses the end-of-stream message: {} or {"error": {code, message}}.
func endStreamError(op string, msg []byte) error {
	var end struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if len(bytes.TrimSpace(msg)) == 0 {
		return nil
	}
	if err := json.Unmarshal(msg, &end); err != nil {
		return fmt.Errorf("e2b %s: %w: bad end of stream: %v", op, errMalformedStream, err)
	}
	if end.Error == nil {
		return nil
	}
	code := end.Error.Code
	if code == "" {
		code = "unknown"
	}
	return &APIError{Op: op, Code: code, Message: end.Error.Message}
}

// protoInt reads an integer in protobuf JSON, which may be a number or a string.
type protoInt int64

func (n *protoInt) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if s == "null" {
		return nil
	}
	if unq, err := strconv.Unquote(s); err == nil {
		s = unq
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// protobuf JSON also allows exponent forms like 1e2 for integers.
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) {
			return fmt.Errorf("not an integer: %s", s)
		}
		v = int64(f)
	}
	*n = protoInt(v)
	return nil
}

// protoBytes reads a protobuf JSON bytes field: base64, standard or URL-safe, padded or not.
type protoBytes []byte

func (p *protoBytes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	s = strings.TrimRight(s, "=")
	s = strings.NewReplacer("-", "+", "_", "/").Replace(s)
	out, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	*p = out
	return nil
}
