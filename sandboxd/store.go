package sandboxd

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// writeFileAtomic replaces path so that a reader (or a restart after a crash)
// sees either the old or the new content, never a mix.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// readJSON decodes path into v; a missing file leaves v alone.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func (s *Server) sandboxesDir() string { return filepath.Join(s.cfg.StateDir, "sandboxes") }

func (s *Server) recordPath(id string) string {
	return filepath.Join(s.sandboxesDir(), id+".json")
}

// imageSuffix names a sandbox's disk image next to its record.
const imageSuffix = ".ext4"

func (s *Server) imagePath(id string) string {
	return filepath.Join(s.sandboxesDir(), id+imageSuffix)
}

func (s *Server) saveRecord(r record) error {
	return writeJSONAtomic(s.recordPath(r.ID), r)
}

// loadRecords reads every sandbox record; files that do not parse are
// reported so the caller can clean them up.
func (s *Server) loadRecords() (recs []record, bad []string, err error) {
	entries, err := os.ReadDir(s.sandboxesDir())
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		var r record
		if err := readJSON(filepath.Join(s.sandboxesDir(), name), &r); err != nil || r.ID+".json" != name {
			bad = append(bad, strings.TrimSuffix(name, ".json"))
			continue
		}
		recs = append(recs, r)
	}
	return recs, bad, nil
}
