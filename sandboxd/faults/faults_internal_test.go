package faults

import "testing"

func TestNormalizeRoute(t *testing.T) {
	for in, want := range map[string]string{
		"POST /sandboxes/{sandboxID}/pause": "POST /sandboxes/{}/pause",
		" DELETE   /sandboxes/{id} ":        "DELETE /sandboxes/{}",
		"*":                                 "*",
		"/v2/sandboxes":                     "/v2/sandboxes",
	} {
		if got := normalizeRoute(in); got != want {
			t.Errorf("normalizeRoute(%q) = %q, want %q", in, got, want)
		}
	}
}
