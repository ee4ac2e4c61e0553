package apptest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"sandman/app/apptest"
)

// A tab without JavaScript runs no timer, so WaitFor must read its condition again itself: a
// condition false at its first read and true at its next (a page still arriving when the wait
// began, TestVersionsPagesWithoutJavaScript's restore) is seen, not waited out.
func TestWaitForWithoutJavaScriptReadsItsConditionAgain(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`<!DOCTYPE html><title>t</title><p>page</p>`))
	}))
	t.Cleanup(srv.Close)
	tab := apptest.NewBrowser(t).OpenWithoutJavaScript(t, srv.URL)
	tab.WaitFor(t, "the condition's second read", `(window.reads = (window.reads || 0) + 1) > 1`)
}
