package sandboxd

import (
	"errors"
	"fmt"
	"io"

	"sandman/sandboxd/machine"
)

// maxCorrupt bounds the file a corrupt fault rewrites: tests damage source files, not disks.
const maxCorrupt = 64 << 20

// damageFiles applies a files fault to a sandbox that has just been resumed (the caller holds
// sb.op): it boots the sandbox if nothing runs yet (a filesystem snapshot), then deletes or
// corrupts each path through the sandbox's own file access, as its processes would see it.
func (s *Server) damageFiles(sb *sandbox, f Fault) {
	m, err := s.machineFor(sb)
	if err != nil {
		s.log.Error("files fault: boot sandbox", "sandbox_id", sb.id, "err", err)
		return
	}
	files := m.Files()
	for _, raw := range f.Files {
		p := machine.CleanSandboxPath(raw)
		var err error
		switch f.Damage {
		case DamageDelete:
			err = files.Remove(p)
		case DamageCorrupt:
			err = corrupt(files, p)
		}
		if err != nil {
			s.log.Warn("files fault: path skipped", "sandbox_id", sb.id, "path", p, "damage", f.Damage, "err", err)
			continue
		}
		s.log.Info("files fault: damaged", "sandbox_id", sb.id, "path", p, "damage", f.Damage)
	}
}

// corrupt rewrites p with every byte inverted: the same size, other bytes.
func corrupt(files machine.FileOps, p string) error {
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
