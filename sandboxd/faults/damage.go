package faults

import (
	"errors"
	"fmt"
	"io"
)

// maxCorrupt bounds the file a corrupt fault rewrites: tests damage source files, not disks.
const maxCorrupt = 64 << 20

// Files is the file access of one sandbox a files fault damages through:
// the sandbox's own, as its processes see it (machine.FileOps).
type Files interface {
	Open(p string) (io.ReadCloser, int64, error)
	Create(p string) (io.WriteCloser, error)
	Remove(p string) error
}

// Damage applies files fault f through files, path by path: each of f.Files
// (already made absolute by clean) is deleted or corrupted; done hears of
// each path, with the error that made it skip the path.
func Damage(files Files, f Fault, clean func(string) string, done func(p string, err error)) {
	for _, raw := range f.Files {
		p := clean(raw)
		var err error
		switch f.Damage {
		case DamageDelete:
			err = files.Remove(p)
		case DamageCorrupt:
			err = corrupt(files, p)
		}
		done(p, err)
	}
}

// corrupt rewrites p with every byte inverted: the same size, other bytes.
func corrupt(files Files, p string) error {
	r, size, err := files.Open(p)
	if err != nil {
		return err
	}
	if size > maxCorrupt {
		r.Close()
		return fmt.Errorf("%d bytes is more than a corrupt fault rewrites", size)
	}
	b, err := io.ReadAll(io.LimitReader(r, maxCorrupt))
	r.Close()
	if err != nil {
		return err
	}
	for i := range b {
		b[i] ^= 0xff
	}
	w, err := files.Create(p)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return errors.Join(err, w.Close())
}
