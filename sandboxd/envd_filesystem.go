package sandboxd

import (
	"errors"
	"io/fs"
	"net/http"
	"path"
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
	}
	return func(w http.ResponseWriter, r *http.Request, _ *envdRequest) {
		writeRPCError(w, rpcErr("unimplemented", "filesystem.Filesystem/%s is not implemented by sandboxd", method))
	}
}

// fsRPCError maps a file error to the Connect code envd uses.
func fsRPCError(err error) *rpcError {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return rpcErr("not_found", "%v", err)
	case errors.Is(err, fs.ErrExist):
		return rpcErr("already_exists", "%v", err)
	case errors.Is(err, errReadOnly), errors.Is(err, fs.ErrPermission):
		return rpcErr("permission_denied", "%v", err)
	}
	return rpcErr("invalid_argument", "%v", err)
}

type pathRequest struct {
	Path string `json:"path"`
}

func (s *Server) rpcStat(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req pathRequest
	if e := decodeUnary(r, &req); e != nil {
		writeRPCError(w, e)
		return
	}
	fp, err := er.fs.resolve(req.Path, false)
	if err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	defer fp.close()
	e, err := fp.entry()
	if err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"entry": e})
}

func (s *Server) rpcMakeDir(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req pathRequest
	if e := decodeUnary(r, &req); e != nil {
		writeRPCError(w, e)
		return
	}
	fp, err := er.fs.resolve(req.Path, true)
	if err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	defer fp.close()
	if _, err := fp.lstat(); err == nil {
		writeRPCError(w, rpcErr("already_exists", "directory at %s already exists", fp.display))
		return
	}
	if err := fp.root.MkdirAll(fp.rel, 0o755); err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	e, err := fp.entry()
	if err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"entry": e})
}

func (s *Server) rpcMove(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req struct {
		Source      string `json:"source"`
		Destination string `json:"destination"`
	}
	if e := decodeUnary(r, &req); e != nil {
		writeRPCError(w, e)
		return
	}
	src, err := er.fs.resolve(req.Source, true)
	if err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	defer src.close()
	dst, err := er.fs.resolve(req.Destination, true)
	if err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	defer dst.close()
	if _, err := src.lstat(); err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	if src.root.Name() != dst.root.Name() {
		writeRPCError(w, rpcErr("invalid_argument", "cannot move between /home/user and /tmp"))
		return
	}
	if dir := path.Dir(dst.rel); dir != "." {
		if err := dst.root.MkdirAll(dir, 0o755); err != nil {
			writeRPCError(w, fsRPCError(err))
			return
		}
	}
	if err := src.root.Rename(src.rel, dst.rel); err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	e, err := dst.entry()
	if err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"entry": e})
}

func (s *Server) rpcListDir(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req struct {
		Path  string `json:"path"`
		Depth int    `json:"depth"`
	}
	if e := decodeUnary(r, &req); e != nil {
		writeRPCError(w, e)
		return
	}
	depth := max(req.Depth, 1)
	fp, err := er.fs.resolve(req.Path, false)
	if err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	defer fp.close()
	fi, err := fp.stat()
	if err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	if !fi.IsDir() {
		writeRPCError(w, rpcErr("invalid_argument", "path %s is not a directory", fp.display))
		return
	}
	entries := []entryInfo{}
	var walk func(dir *fsPath, level int) error
	walk = func(dir *fsPath, level int) error {
		f, err := dir.open()
		if err != nil {
			return err
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return err
		}
		for _, name := range names {
			c := dir.child(name)
			e, err := c.entry()
			if err != nil {
				continue // removed meanwhile
			}
			entries = append(entries, e)
			if e.Type == "FILE_TYPE_DIRECTORY" && level < depth {
				if err := walk(c, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(fp, 1); err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
}

func (s *Server) rpcRemove(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req pathRequest
	if e := decodeUnary(r, &req); e != nil {
		writeRPCError(w, e)
		return
	}
	fp, err := er.fs.resolve(req.Path, true)
	if err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	defer fp.close()
	if _, err := fp.lstat(); err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	if fp.rel == "." {
		writeRPCError(w, rpcErr("permission_denied", "cannot remove %s", fp.display))
		return
	}
	if err := fp.root.RemoveAll(fp.rel); err != nil {
		writeRPCError(w, fsRPCError(err))
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}
