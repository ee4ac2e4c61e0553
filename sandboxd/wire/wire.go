// Package wire is what sandboxd's HTTP answers have in common: the
// provider's JSON error body, JSON answers and request bodies, and the
// answer of the sandbox proxy when a sandbox cannot be reached.
package wire

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"strings"
)

// ErrorBody is the provider's Error schema.
type ErrorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// WriteError answers status with the provider's error body.
func WriteError(w http.ResponseWriter, status int, msg string) {
	WriteJSON(w, status, ErrorBody{Code: status, Message: msg})
}

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// DecodeBody decodes an optional JSON body into v; an empty body is fine.
func DecodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 1<<20))
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, v)
}

// NonNil is m, or an empty map where m is nil: JSON "{}", never null.
func NonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// ProxyFailure answers like the provider's proxy: JSON for programs, a
// small page for browsers.
func ProxyFailure(w http.ResponseWriter, r *http.Request, status int, id, msg string, extra map[string]any) {
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, "<!doctype html><title>%[1]s</title><h1>%[1]s</h1><p>Sandbox %[2]s</p>\n",
			html.EscapeString(msg), html.EscapeString(id))
		return
	}
	body := map[string]any{"sandboxId": id, "message": msg, "code": status}
	for k, v := range extra {
		body[k] = v
	}
	WriteJSON(w, status, body)
}
