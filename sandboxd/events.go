package sandboxd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"sandman/sandboxd/store"
)

// Event types, exactly as the provider names them.
const (
	EventCreated      = "sandbox.lifecycle.created"
	EventResumed      = "sandbox.lifecycle.resumed"
	EventUpdated      = "sandbox.lifecycle.updated"
	EventPaused       = "sandbox.lifecycle.paused"
	EventKilled       = "sandbox.lifecycle.killed"
	EventCheckpointed = "sandbox.lifecycle.checkpointed"
)

var eventLabels = map[string]string{
	EventCreated: "create", EventResumed: "resume", EventUpdated: "update",
	EventPaused: "pause", EventKilled: "kill", EventCheckpointed: "",
}

// Kill reasons sandboxd emits.
const (
	KillReasonRequest  = "request"
	KillReasonTimeout  = "timeout"
	KillReasonOrphaned = "orphaned"
)

// event is a lifecycle event in the webhook's snake_case shape, which is
// also how it is stored (one JSON line each in events.jsonl).
type event struct {
	Seq               int64          `json:"seq,omitempty"`
	ID                string         `json:"id"`
	Version           string         `json:"version"`
	Type              string         `json:"type"`
	Timestamp         time.Time      `json:"timestamp"`
	EventCategory     string         `json:"event_category"`
	EventLabel        string         `json:"event_label"`
	EventData         map[string]any `json:"event_data,omitempty"`
	SandboxID         string         `json:"sandbox_id"`
	SandboxExecution  string         `json:"sandbox_execution_id"`
	SandboxTemplateID string         `json:"sandbox_template_id"`
	SandboxBuildID    string         `json:"sandbox_build_id"`
	SandboxTeamID     string         `json:"sandbox_team_id"`
}

// webhookBody is the delivered JSON: the stored event without sandboxd's
// own sequence number.
func (e *event) webhookBody() []byte {
	c := *e
	c.Seq = 0
	b, _ := json.Marshal(c)
	return b
}

// restEvent is the events API's camelCase shape.
type restEvent struct {
	Version            string         `json:"version"`
	ID                 string         `json:"id"`
	Type               string         `json:"type"`
	EventCategory      string         `json:"eventCategory"`
	EventLabel         string         `json:"eventLabel"`
	EventData          map[string]any `json:"eventData"`
	SandboxBuildID     string         `json:"sandboxBuildId"`
	SandboxExecutionID string         `json:"sandboxExecutionId"`
	SandboxID          string         `json:"sandboxId"`
	SandboxTeamID      string         `json:"sandboxTeamId"`
	SandboxTemplateID  string         `json:"sandboxTemplateId"`
	Timestamp          time.Time      `json:"timestamp"`
}

func (e *event) rest() restEvent {
	return restEvent{
		Version: e.Version, ID: e.ID, Type: e.Type, EventCategory: e.EventCategory, EventLabel: e.EventLabel,
		EventData: e.EventData, SandboxBuildID: e.SandboxBuildID, SandboxExecutionID: e.SandboxExecution,
		SandboxID: e.SandboxID, SandboxTeamID: e.SandboxTeamID, SandboxTemplateID: e.SandboxTemplateID,
		Timestamp: e.Timestamp,
	}
}

// eventStore keeps every event in memory and appends it to a JSON-lines file
// before anyone can observe it.
type eventStore struct {
	mu     sync.Mutex
	f      *os.File
	events []*event
	seq    int64
	last   time.Time
}

func openEventStore(dir string, retention time.Duration) (*eventStore, error) {
	path := filepath.Join(dir, "events.jsonl")
	s := &eventStore{}
	cutoff := time.Now().Add(-retention)
	dropped := false
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				// A torn last line after a crash: everything before it stands.
				dropped = true
				continue
			}
			s.seq = max(s.seq, e.Seq)
			if e.Timestamp.After(s.last) {
				s.last = e.Timestamp
			}
			if e.Timestamp.Before(cutoff) {
				dropped = true
				continue
			}
			s.events = append(s.events, &e)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	if dropped {
		if err := s.rewrite(path); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	s.f = f
	return s, nil
}

func (s *eventStore) rewrite(path string) error {
	var buf []byte
	for _, e := range s.events {
		b, _ := json.Marshal(e)
		buf = append(append(buf, b...), '\n')
	}
	return store.WriteFileAtomic(path, buf)
}

// append stamps e with its id, sequence and a timestamp that is strictly
// later than every earlier event's, so ordering by timestamp is ordering by
// occurrence even within one clock tick.
func (s *eventStore) append(e *event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	e.Seq = s.seq
	e.ID = newUUID()
	e.Version = "v2"
	e.EventCategory = "lifecycle"
	e.EventLabel = eventLabels[e.Type]
	t := now()
	if !t.After(s.last) {
		t = s.last.Add(time.Microsecond)
	}
	s.last = t
	e.Timestamp = t
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := s.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	s.events = append(s.events, e)
	return nil
}

func (s *eventStore) bySeq(seq int64) *event {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := slices.BinarySearchFunc(s.events, seq, func(e *event, seq int64) int {
		switch {
		case e.Seq < seq:
			return -1
		case e.Seq > seq:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return s.events[i]
}

type eventQuery struct {
	sandboxID string
	types     []string
	offset    int
	limit     int
	asc       bool
}

func (s *eventStore) query(q eventQuery) []*event {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*event, 0, q.limit)
	skipped := 0
	n := len(s.events)
	for i := range n {
		e := s.events[n-1-i]
		if q.asc {
			e = s.events[i]
		}
		if q.sandboxID != "" && e.SandboxID != q.sandboxID {
			continue
		}
		if len(q.types) > 0 && !slices.Contains(q.types, e.Type) {
			continue
		}
		if skipped < q.offset {
			skipped++
			continue
		}
		out = append(out, e)
		if len(out) == q.limit {
			break
		}
	}
	return out
}

func (s *eventStore) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.f.Sync(); err != nil {
		s.f.Close()
		return err
	}
	return s.f.Close()
}
