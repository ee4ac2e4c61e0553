// Package store is sandboxd's persisted state of sandboxes: one record per
// sandbox (JSON, replaced atomically on every change), each beside its files
// and disk image under <state>/sandboxes, and the atomic file writes the
// event log and the webhook registry use too (docs/sandboxd.md, "Restarts").
package store

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// WriteFileAtomic replaces path so that a reader (or a restart after a crash)
// sees either the old or the new content, never a mix.
func WriteFileAtomic(path string, data []byte) error {
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

// WriteJSONAtomic writes v as indented JSON with WriteFileAtomic.
func WriteJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, append(b, '\n'))
}

// ReadJSON decodes path into v; a missing file leaves v alone.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Store is the sandboxes of one state directory.
type Store struct {
	dir string
}

// Open makes the sandboxes' directory of stateDir if it is missing.
func Open(stateDir string) (*Store, error) {
	st := &Store{dir: filepath.Join(stateDir, "sandboxes")}
	if err := os.MkdirAll(st.dir, 0o755); err != nil {
		return nil, err
	}
	return st, nil
}

// Dir holds every sandbox's record, files directory and disk image.
func (st *Store) Dir() string { return st.dir }

// FilesDir is sandbox id's directory of files (or its disk image's mount point).
func (st *Store) FilesDir(id string) string { return filepath.Join(st.dir, id) }

// RecordPath is sandbox id's record.
func (st *Store) RecordPath(id string) string {
	return filepath.Join(st.dir, id+".json")
}

// ImageSuffix names a sandbox's disk image next to its record.
const ImageSuffix = ".ext4"

// ImagePath is sandbox id's disk image.
func (st *Store) ImagePath(id string) string {
	return filepath.Join(st.dir, id+ImageSuffix)
}

// Save replaces r's record.
func (st *Store) Save(r Record) error {
	return WriteJSONAtomic(st.RecordPath(r.ID), r)
}

// Load reads every sandbox record; files that do not parse are
// reported so the caller can clean them up.
func (st *Store) Load() (recs []Record, bad []string, err error) {
	entries, err := os.ReadDir(st.dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		var r Record
		if err := ReadJSON(filepath.Join(st.dir, name), &r); err != nil || r.ID+".json" != name {
			bad = append(bad, strings.TrimSuffix(name, ".json"))
			continue
		}
		recs = append(recs, r)
	}
	return recs, bad, nil
}
