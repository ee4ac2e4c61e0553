package envd

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path"
	"syscall"
	"time"

	"sandman/sandboxd/machine"
	"sandman/sandboxd/wire"
)

func (s *Server) filesystemMethod(method string) envdHandlerFunc {
	switch method {
	case "Stat":
		return s.rpcStat
	case "MakeDir":
		return s.rpcMakeDir
	case "Move":
		return s.rpcMove
	case "ListDir":
		return s.rpcListDir
	case "Remove":
		return s.rpcRemove
	case "WatchDir":
		return s.rpcWatchDir
	}
	return func(w http.ResponseWriter, r *http.Request, _ *envdRequest) {
		writeRPCError(w, rpcErr("unimplemented", "filesystem.Filesystem/%s is not implemented by sandboxd", method))
	}
}

// fsRPCError maps a file error to the Connect code envd uses.
func fsRPCError(p string, err error) *rpcError {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return rpcErr("not_found", "%v", err)
	case errors.Is(err, fs.ErrExist):
		return rpcErr("already_exists", "%v", err)
	case machine.IsErrno(err, syscall.EROFS), errors.Is(err, fs.ErrPermission):
		return rpcErr("permission_denied", "%v", err)
	case machine.IsErrno(err, syscall.ENOSPC):
		return rpcErr("resource_exhausted", "%v", err)
	case machine.IsErrno(err, syscall.ENOTDIR):
		return rpcErr("invalid_argument", "path %s is not a directory", p)
	case errors.As(err, &pe), errors.As(err, &le):
		return rpcErr("invalid_argument", "%v", err)
	}
	return rpcErr("internal", "%v", err)
}

type pathRequest struct {
	Path string `json:"path"`
}

// fsCall decodes a filesystem request into req and returns the sandbox's
// file access; on failure it has answered.
func (s *Server) fsCall(w http.ResponseWriter, r *http.Request, er *envdRequest, req any) (machine.FileOps, bool) {
	if e := decodeUnary(r, req); e != nil {
		writeRPCError(w, e)
		return nil, false
	}
	m, _, e := s.runningMachine(er.rec.ID)
	if e != nil {
		writeRPCError(w, e)
		return nil, false
	}
	return m.Files(), true
}

func writeEntry(w http.ResponseWriter, p string, e machine.EntryInfo, err error) {
	if err != nil {
		writeRPCError(w, fsRPCError(p, err))
		return
	}
	wire.WriteJSON(w, http.StatusOK, map[string]any{"entry": e})
}

func (s *Server) rpcStat(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req pathRequest
	files, ok := s.fsCall(w, r, er, &req)
	if !ok {
		return
	}
	p := machine.CleanSandboxPath(req.Path)
	e, err := files.Entry(p)
	writeEntry(w, p, e, err)
}

func (s *Server) rpcMakeDir(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req pathRequest
	files, ok := s.fsCall(w, r, er, &req)
	if !ok {
		return
	}
	p := machine.CleanSandboxPath(req.Path)
	e, err := files.Mkdir(p)
	if errors.Is(err, fs.ErrExist) {
		writeRPCError(w, rpcErr("already_exists", "directory at %s already exists", p))
		return
	}
	writeEntry(w, p, e, err)
}

func (s *Server) rpcMove(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
	}
	files, ok := s.fsCall(w, r, er, &req)
	if !ok {
		return
	}
	src, dst := machine.CleanSandboxPath(req.Source), machine.CleanSandboxPath(req.Destination)
	if machine.IsProtectedPath(src) {
		writeRPCError(w, rpcErr("permission_denied", "cannot move %s", src))
		return
	}
	e, err := files.Move(src, dst)
	if machine.IsErrno(err, syscall.EXDEV) {
		writeRPCError(w, rpcErr("invalid_argument", "cannot move %s to %s: another mount", src, dst))
		return
	}
	writeEntry(w, dst, e, err)
}

func (s *Server) rpcListDir(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req struct {
		Path  string `json:"path"`
		Depth int    `json:"depth"`
	}
	files, ok := s.fsCall(w, r, er, &req)
	if !ok {
		return
	}
	p := machine.CleanSandboxPath(req.Path)
	entries, err := files.List(p, max(req.Depth, 1))
	if err != nil {
		writeRPCError(w, fsRPCError(p, err))
		return
	}
	wire.WriteJSON(w, http.StatusOK, map[string]any{"entries": entries})
}

func (s *Server) rpcRemove(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req pathRequest
	files, ok := s.fsCall(w, r, er, &req)
	if !ok {
		return
	}
	p := machine.CleanSandboxPath(req.Path)
	if machine.IsProtectedPath(p) {
		writeRPCError(w, rpcErr("permission_denied", "cannot remove %s", p))
		return
	}
	// As envd's: removing what is not there is done already.
	if err := files.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		writeRPCError(w, fsRPCError(p, err))
		return
	}
	wire.WriteJSON(w, http.StatusOK, struct{}{})
}

type watchDirResponse struct {
	Start      *struct{}        `json:"start,omitempty"`
	Filesystem *filesystemEvent `json:"filesystem,omitempty"`
	Keepalive  *struct{}        `json:"keepalive,omitempty"`
}

type filesystemEvent struct {
	machine.WatchEvent
	Entry *machine.EntryInfo `json:"entry,omitempty"`
}

// rpcWatchDir streams the changes in a directory as envd does: a start event once the watch
// is in place, then one event per change, keepalives while nothing changes.
func (s *Server) rpcWatchDir(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	sw := newStreamWriter(w)
	var req struct {
		Path         string `json:"path"`
		Recursive    bool   `json:"recursive"`
		IncludeEntry bool   `json:"includeEntry"`
		// allowNetworkMounts changes nothing: a sandbox has no network filesystem.
	}
	if e := decodeStreamRequest(r, &req); e != nil {
		sw.end(e)
		return
	}
	m, _, e := s.runningMachine(er.rec.ID)
	if e != nil {
		sw.end(e)
		return
	}
	files := m.Files()
	p := machine.CleanSandboxPath(req.Path)
	watch, err := files.Watch(p, req.Recursive)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		sw.end(rpcErr("not_found", "path %s not found: %v", p, err))
		return
	case machine.IsErrno(err, syscall.ENOTDIR):
		sw.end(rpcErr("invalid_argument", "path %s not a directory", p))
		return
	case err != nil:
		sw.end(rpcErr("internal", "error watching path %s: %v", p, err))
		return
	}
	defer watch.Close()
	if err := sw.send(watchDirResponse{Start: &struct{}{}}); err != nil {
		return
	}
	interval := s.keepalive(r)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ticker.C:
			if err := sw.send(watchDirResponse{Keepalive: &struct{}{}}); err != nil {
				return
			}
		case evs, ok := <-watch.Events:
			if !ok {
				sw.end(rpcErr("internal", "the watch of %s ended", p))
				return
			}
			for _, ev := range evs {
				fe := &filesystemEvent{WatchEvent: ev}
				// Only for what still exists at its path, as envd: a removed or renamed-away
				// entry's path may already hold another.
				if req.IncludeEntry && (ev.Type == "EVENT_TYPE_CREATE" || ev.Type == "EVENT_TYPE_WRITE" || ev.Type == "EVENT_TYPE_CHMOD") {
					if e, err := files.Entry(path.Join(p, ev.Name)); err == nil {
						fe.Entry = &e
					}
				}
				if err := sw.send(watchDirResponse{Filesystem: fe}); err != nil {
					return
				}
			}
			ticker.Reset(interval)
		}
	}
}
