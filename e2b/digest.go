package e2b

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// FileDigest is what DigestFiles found at one path.
type FileDigest struct {
	// Path is the path as asked, relative to the directory.
	Path string
	// Regular is true when a regular file is there. A missing path, and one that holds
	// something else (a directory, a symlink, a device), is false: neither is the file.
	Regular bool
	Size    int64
	SHA256  [32]byte
}

// DirDigest is DigestFiles' answer.
type DirDigest struct {
	// DirExists is false when the directory itself is gone; Files is then empty.
	DirExists bool
	// Files has one entry per path asked, in the order asked.
	Files []FileDigest
}

// Digest chunks: one command per digestChunkFiles paths, and fewer when their names are long,
// so that the command line stays far below Linux's 128 KiB limit on one argument and the
// output (size and digest lines naming each path, about 190 KiB at most) within what a
// ProcessResult keeps (MaxProcessOutput). An app's files, at most 500, take one command.
const (
	digestChunkFiles = 1000
	digestChunkBytes = 48 << 10
)

// DigestFiles reports the size and SHA-256 of each of paths (relative to dir) in sb, in one
// envd command per 1,000 paths rather than one call per file. Paths may hold any byte but NUL
// (spaces, quotes, newlines, a leading dash): they travel NUL-separated and base64-encoded, never
// through the shell's parsing. Only regular files are read (find -type f: a symlink or a FIFO
// at a path is reported as not a regular file, and never followed or opened). The command needs
// what every template has: bash, coreutils (base64, sha256sum -z, mktemp) and findutils.
func (c *Client) DigestFiles(ctx context.Context, sb Sandbox, dir string, paths []string) (DirDigest, error) {
	const op = "envd_digest"
	if err := checkSandboxID(op, sb.ID); err != nil {
		return DirDigest{}, err
	}
	if dir == "" || strings.ContainsRune(dir, 0) {
		return DirDigest{}, fmt.Errorf("e2b %s: %w: bad directory %q", op, ErrInvalid, dir)
	}
	seen := make(map[string]bool, len(paths))
	for _, p := range paths {
		if p == "" || strings.ContainsRune(p, 0) || strings.HasPrefix(p, "/") || seen[p] {
			return DirDigest{}, fmt.Errorf("e2b %s: %w: bad path %q (relative, without NUL, once)", op, ErrInvalid, p)
		}
		seen[p] = true
	}
	out := DirDigest{DirExists: true, Files: make([]FileDigest, 0, len(paths))}
	for start := 0; start < len(paths) || start == 0; {
		end, size := start, 0
		for end < len(paths) && end-start < digestChunkFiles && (end == start || size+len(paths[end])+3 <= digestChunkBytes) {
			size += len(paths[end]) + 3
			end++
		}
		chunk := paths[start:end]
		got, exists, err := c.digestChunk(ctx, op, sb, dir, chunk)
		if err != nil {
			return DirDigest{}, err
		}
		if !exists {
			return DirDigest{}, nil
		}
		out.Files = append(out.Files, got...)
		if start = end; end >= len(paths) {
			break
		}
	}
	return out, nil
}

// Markers between the sections of the digest command's output (NUL-terminated, like every
// record in it: no path can contain NUL).
const (
	digestBegin  = "sandman-digest-sizes"
	digestHashes = "sandman-digest-hashes"
	digestEnd    = "sandman-digest-end"
	digestNoDir  = "sandman-digest-no-directory"
)

// digestScript lists, for the NUL-separated paths in the base64 text list (each prefixed with
// "./", so that no name reads as an option or a find expression), first "SIZE ./PATH" for each
// regular file, then sha256sum's "HEX  ./PATH" for each; records end with NUL. Paths that are
// missing or not regular files appear in neither section.
func digestScript(dir, list string) string {
	return "cd -- " + shellQuote(dir) + " 2>/dev/null || { printf '" + digestNoDir + `\0'; exit 0; }
l=$(mktemp) || exit 70
trap 'rm -f -- "$l"' EXIT
printf %s '` + list + `' | base64 -d > "$l" || exit 71
regular() { xargs -0 -r -a "$l" sh -c 'exec find "$@" -maxdepth 0 -type f '"$1" sh; }
printf '` + digestBegin + `\0'
regular '-printf "%s %p\0"' 2>/dev/null
printf '` + digestHashes + `\0'
regular -print0 2>/dev/null | xargs -0 -r sha256sum -z -- 2>/dev/null
printf '` + digestEnd + `\0'
`
}

// shellQuote quotes s for bash: in single quotes, each single quote inside closing the quotes,
// escaped, and opening them again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (c *Client) digestChunk(ctx context.Context, op string, sb Sandbox, dir string, paths []string) ([]FileDigest, bool, error) {
	cmd := digestScript(dir, nulList(paths))
	p, err := c.StartProcess(ctx, sb, ProcessParams{Command: cmd, Tag: "sandman-digest"})
	if err != nil {
		return nil, false, err
	}
	res, err := p.Wait(ctx)
	if err != nil {
		return nil, false, err
	}
	got, exists, err := parseDigest([]byte(res.Stdout), paths)
	if err != nil {
		return nil, false, fmt.Errorf("e2b %s: %w (exit %d, stderr %.300q)", op, err, res.ExitCode, res.Stderr)
	}
	return got, exists, nil
}

// parseDigest reads the digest command's output for paths, in their order.
func parseDigest(out []byte, paths []string) ([]FileDigest, bool, error) {
	records := strings.Split(string(out), "\x00")
	if len(records) > 0 && records[len(records)-1] == "" {
		records = records[:len(records)-1]
	}
	if len(records) == 1 && records[0] == digestNoDir {
		return nil, false, nil
	}
	if len(records) < 3 || records[0] != digestBegin || records[len(records)-1] != digestEnd {
		return nil, false, fmt.Errorf("the digest command's output is incomplete (%d bytes)", len(out))
	}
	byPath := make(map[string]*FileDigest, len(paths))
	files := make([]FileDigest, len(paths))
	for i, p := range paths {
		files[i].Path = p
		byPath["./"+p] = &files[i]
	}
	hashes := false
	hashed := 0
	for _, r := range records[1 : len(records)-1] {
		if r == digestHashes {
			hashes = true
			continue
		}
		if !hashes {
			sizeText, name, ok := strings.Cut(r, " ")
			size, err := strconv.ParseInt(sizeText, 10, 64)
			f := byPath[name]
			if !ok || err != nil || f == nil {
				return nil, false, fmt.Errorf("the digest command printed an unexpected size line %.200q", r)
			}
			f.Regular, f.Size = true, size
			continue
		}
		// sha256sum: 64 hex digits, a space, a space (text mode) or '*' (binary), the name.
		if len(r) < 67 || r[64] != ' ' {
			return nil, false, fmt.Errorf("the digest command printed an unexpected digest line %.200q", r)
		}
		f := byPath[r[66:]]
		if f == nil || !f.Regular {
			return nil, false, fmt.Errorf("the digest command printed a digest of a file it did not size: %.200q", r)
		}
		if _, err := hex.Decode(f.SHA256[:], []byte(r[:64])); err != nil {
			return nil, false, fmt.Errorf("the digest command printed a bad digest %.200q", r)
		}
		hashed++
	}
	sized := 0
	for _, f := range files {
		if f.Regular {
			sized++
		}
	}
	if sized != hashed {
		// sha256sum could not read a regular file, or could not run (no -z): the check itself
		// failed, which says nothing about the files.
		return nil, false, fmt.Errorf("the digest command sized %d files but digested %d", sized, hashed)
	}
	return files, true, nil
}
