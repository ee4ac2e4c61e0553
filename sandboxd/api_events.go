package sandboxd

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"sandman/sandboxd/wire"
)

func parseEventQuery(q url.Values) (eventQuery, error) {
	eq := eventQuery{limit: 10}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return eq, errors.New("offset must be a non-negative integer")
		}
		eq.offset = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return eq, errors.New("limit must be between 1 and 100")
		}
		eq.limit = n
	}
	if v := q.Get("orderAsc"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return eq, errors.New("orderAsc must be true or false")
		}
		eq.asc = b
	}
	// Repeated (?types=a&types=b) as documented; comma-separated also works.
	for _, raw := range q["types"] {
		for t := range strings.SplitSeq(raw, ",") {
			if _, ok := eventLabels[t]; !ok {
				return eq, errors.New("unknown event type: " + t)
			}
			eq.types = append(eq.types, t)
		}
	}
	return eq, nil
}

// handleEvents serves both events routes; events outlive their sandbox, so
// an unknown or killed sandbox is not an error.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	eq, err := parseEventQuery(r.URL.Query())
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if r.PathValue("sandboxID") != "" {
		id, ok := sandboxIDParam(w, r)
		if !ok {
			return
		}
		eq.sandboxID = id
	}
	evs := s.events.query(eq)
	out := make([]restEvent, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.rest())
	}
	wire.WriteJSON(w, http.StatusOK, out)
}
