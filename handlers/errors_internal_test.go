package handlers

import (
	"net/http"
	"testing"

	"sandman/apperr"
)

func TestEveryErrorKindHasAStatus(t *testing.T) {
	t.Parallel()
	for _, k := range apperr.Kinds() {
		if _, ok := kindStatus[k]; !ok {
			t.Errorf("apperr kind %d has no HTTP status in kindStatus", k)
		}
	}
	if got := httpStatus(apperr.Kind(1000)); got != http.StatusInternalServerError {
		t.Fatalf("an unmapped kind answers %d, want 500", got)
	}
}
