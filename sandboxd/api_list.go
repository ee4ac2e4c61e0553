package sandboxd

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"sandman/sandboxd/store"
	"sandman/sandboxd/wire"
)

// parseMetadataFilter reads the list endpoints' metadata parameter the way
// the provider does. value is the query value after the usual query decoding;
// the provider unescapes the whole string once more, splits on & and =, and
// unescapes each key and value again (the JS SDK encodes three times).
func parseMetadataFilter(value string) (map[string]string, error) {
	if value == "" {
		return nil, nil
	}
	whole, err := url.QueryUnescape(value)
	if err != nil {
		return nil, errors.New("invalid metadata filter")
	}
	filter := map[string]string{}
	for pair := range strings.SplitSeq(whole, "&") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, errors.New("invalid metadata filter: want key=value pairs")
		}
		if k, err = url.QueryUnescape(k); err != nil {
			return nil, errors.New("invalid metadata key")
		}
		if v, err = url.QueryUnescape(v); err != nil {
			return nil, errors.New("invalid metadata value")
		}
		filter[k] = v
	}
	return filter, nil
}

func matchesMetadata(md, filter map[string]string) bool {
	for k, v := range filter {
		if got, ok := md[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// listCursor is the position after the last item of a page.
type listCursor struct {
	startedAt time.Time
	id        string
	asc       bool
}

// encodeNextToken uses the provider's format, opaque to clients:
// URL-safe padded base64 of "<RFC3339Nano startedAt>__<id>[__asc]".
func encodeNextToken(c listCursor) string {
	s := c.startedAt.UTC().Format(time.RFC3339Nano) + "__" + c.id
	if c.asc {
		s += "__asc"
	}
	return base64.URLEncoding.EncodeToString([]byte(s))
}

func decodeNextToken(tok string) (listCursor, error) {
	raw, err := base64.URLEncoding.DecodeString(tok)
	if err != nil {
		return listCursor{}, err
	}
	parts := strings.Split(string(raw), "__")
	var c listCursor
	switch {
	case len(parts) == 3 && parts[2] == "asc":
		c.asc = true
	case len(parts) != 2:
		return listCursor{}, errors.New("malformed token")
	}
	if c.startedAt, err = time.Parse(time.RFC3339Nano, parts[0]); err != nil {
		return listCursor{}, err
	}
	if !sandboxIDPattern.MatchString(parts[1]) {
		return listCursor{}, errors.New("malformed sandbox id")
	}
	c.id = parts[1]
	return c, nil
}

type listQuery struct {
	states       []store.State
	metadata     map[string]string
	asc          bool
	startedAfter time.Time
	noMatch      bool // a template other than ours: nothing can match
	limit        int
	after        *listCursor
}

func parseListQuery(q url.Values) (listQuery, error) {
	lq := listQuery{limit: 100}
	for _, raw := range q["state"] {
		for st := range strings.SplitSeq(raw, ",") {
			switch store.State(st) {
			case store.StateRunning, store.StatePaused:
				lq.states = append(lq.states, store.State(st))
			default:
				return lq, errors.New("invalid state: " + st)
			}
		}
	}
	if len(lq.states) == 0 {
		lq.states = []store.State{store.StateRunning, store.StatePaused}
	}
	var err error
	if lq.metadata, err = parseMetadataFilter(q.Get("metadata")); err != nil {
		return lq, err
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		lq.asc = true
	default:
		return lq, errors.New("invalid order: want asc or desc")
	}
	if v := q.Get("startedAfter"); v != "" {
		if lq.startedAfter, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return lq, errors.New("invalid startedAfter")
		}
		lq.startedAfter = lq.startedAfter.Truncate(time.Microsecond)
	}
	if v := q.Get("template"); v != "" {
		if strings.Contains(v, ":") {
			return lq, errors.New("template must not have a tag")
		}
		_, ok := resolveTemplate(v)
		lq.noMatch = !ok
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return lq, errors.New("limit must be between 1 and 100")
		}
		lq.limit = n
	}
	if v := q.Get("nextToken"); v != "" {
		c, err := decodeNextToken(v)
		if err != nil {
			return lq, &opError{http.StatusBadRequest, "Invalid next token"}
		}
		lq.after = &c
	}
	return lq, nil
}

// list returns one page, the cursor of the next page (nil on the last page)
// and how many running sandboxes match the filters. It walks the index from
// the cursor, so a page costs its own sandboxes (and the ones the filters
// skip), not a sort of every sandbox.
func (s *Server) list(lq listQuery) ([]store.Record, *listCursor, int) {
	if lq.noMatch {
		return nil, nil, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.byStart.all
	// The walk starts just past the cursor in the order asked for: the
	// index is ascending, descending walks it backwards.
	i, step := len(all)-1, -1
	if lq.asc {
		i, step = 0, 1
	}
	if lq.after != nil {
		j, found := s.byStart.search(*lq.after)
		switch {
		case !lq.asc:
			i = j - 1
		case found:
			i = j + 1
		default:
			i = j
		}
	}
	var out []store.Record
	for ; i >= 0 && i < len(all); i += step {
		r := &all[i].rec
		if !lq.matches(r) {
			continue
		}
		if len(out) == lq.limit {
			next := positionOf(&out[len(out)-1])
			next.asc = lq.asc
			return out, &next, s.runningLocked(lq)
		}
		out = append(out, r.Clone())
	}
	return out, nil, s.runningLocked(lq)
}

func (s *Server) handleListV2(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	recs, next, running := s.list(lq)
	out := make([]listedSandbox, 0, len(recs))
	for _, rec := range recs {
		out = append(out, s.listed(rec))
	}
	if next != nil {
		w.Header().Set("X-Next-Token", encodeNextToken(*next))
	}
	if slices.Contains(lq.states, store.StateRunning) {
		w.Header().Set("X-Total-Running", strconv.Itoa(running))
	}
	wire.WriteJSON(w, http.StatusOK, out)
}

// handleListV1 is the deprecated list: running sandboxes only, no pages.
func (s *Server) handleListV1(w http.ResponseWriter, r *http.Request) {
	md, err := parseMetadataFilter(r.URL.Query().Get("metadata"))
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	recs, _, _ := s.list(listQuery{states: []store.State{store.StateRunning}, metadata: md, limit: 1 << 30})
	out := make([]listedSandbox, 0, len(recs))
	for _, rec := range recs {
		out = append(out, s.listed(rec))
	}
	wire.WriteJSON(w, http.StatusOK, out)
}
