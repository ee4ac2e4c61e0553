package e2b

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
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
// envd command per 1,000 paths rather than one call per file. The command is find itself,
// started directly (no shell, no login profile), which starts sha256sum once for its regular
// files: two processes, where a shell pipeline cost a dozen, most of a resume's integrity check
// (BENCHMARKS.md). Paths may hold any character but NUL (spaces, quotes, newlines, a leading
// dash): each travels as an argument of its own, prefixed with the directory, so no name reads
// as an option or is parsed by a shell. Only regular files are read (find -P -type f: a symlink
// or a FIFO at a path is reported as not a regular file, and never followed or opened). The
// command needs what every template has: findutils and coreutils (sha256sum -z).
func (c *Client) DigestFiles(ctx context.Context, sb Sandbox, dir string, paths []string) (DirDigest, error) {
	const op = "envd_digest"
	if err := checkSandboxID(op, sb.ID); err != nil {
		return DirDigest{}, err
	}
	if dir == "" || strings.ContainsRune(dir, 0) || !utf8.ValidString(dir) {
		return DirDigest{}, fmt.Errorf("e2b %s: %w: bad directory %q", op, ErrInvalid, dir)
	}
	seen := make(map[string]bool, len(paths))
	for _, p := range paths {
		if p == "" || strings.ContainsRune(p, 0) || strings.HasPrefix(p, "/") || !utf8.ValidString(p) || seen[p] {
			return DirDigest{}, fmt.Errorf("e2b %s: %w: bad path %q (relative, UTF-8 without NUL, once)", op, ErrInvalid, p)
		}
		seen[p] = true
	}
	out := DirDigest{DirExists: true, Files: make([]FileDigest, 0, len(paths))}
	for start := 0; start < len(paths) || start == 0; {
		end, size := start, 0
		for end < len(paths) && end-start < digestChunkFiles && (end == start || size+len(dir)+len(paths[end])+2 <= digestChunkBytes) {
			size += len(dir) + len(paths[end]) + 2
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

// digestArgv is the digest command for paths in dir: find names the directory first and last
// ("D DIR": the output's head and tail, so an output cut short is seen), then prints "SIZE
// PATH" for each path that holds a regular file and hands those to sha256sum ("HEX  PATH");
// records end with NUL. Paths that are missing or not regular files appear in neither.
func digestArgv(dir string, paths []string) []string {
	argv := make([]string, 0, len(paths)+20)
	argv = append(argv, "find", "-P", dir)
	for _, p := range paths {
		argv = append(argv, dir+"/"+p)
	}
	return append(argv, dir, "-maxdepth", "0", "(", "-type", "d", "-printf", digestDir+" %p\\0", "-o",
		"-type", "f", "-printf", "%s %p\\0", "-exec", "sha256sum", "-z", "--", "{}", "+", ")")
}

// digestDir marks the directory's records in the digest command's output.
const digestDir = "D"

func (c *Client) digestChunk(ctx context.Context, op string, sb Sandbox, dir string, paths []string) ([]FileDigest, bool, error) {
	if !strings.HasPrefix(dir, "/") {
		dir = "./" + dir // relative to the user's home, and never read as an option
	}
	p, err := c.StartProcess(ctx, sb, ProcessParams{Argv: digestArgv(dir, paths), Tag: "sandman-digest"})
	if err != nil {
		return nil, false, err
	}
	res, err := p.Wait(ctx)
	if err != nil {
		return nil, false, err
	}
	got, exists, err := parseDigest([]byte(res.Stdout), dir, paths)
	if err == nil && !exists && (!res.Exited || res.ExitCode != 1) {
		// find prints nothing and exits 1 when the directory is gone; anything else is a
		// command that did not run.
		err = errors.New("the digest command printed nothing")
	}
	if err != nil {
		return nil, false, fmt.Errorf("e2b %s: %w (exit %d, stderr %.300q)", op, err, res.ExitCode, res.Stderr)
	}
	return got, exists, nil
}

// parseDigest reads the digest command's output for paths in dir, in their order. find's own
// records keep their order, sha256sum's come among them or after: each is known by its form.
// No record at all is a directory that is not there (digestChunk checks find said so).
func parseDigest(out []byte, dir string, paths []string) ([]FileDigest, bool, error) {
	records := strings.Split(string(out), "\x00")
	if len(records) > 0 && records[len(records)-1] == "" {
		records = records[:len(records)-1]
	}
	if len(records) == 0 {
		return nil, false, nil
	}
	byPath := make(map[string]*FileDigest, len(paths))
	files := make([]FileDigest, len(paths))
	for i, p := range paths {
		files[i].Path = p
		byPath[dir+"/"+p] = &files[i]
	}
	marker := digestDir + " " + dir
	markers := 0
	var hashes []string
	for _, r := range records {
		switch {
		case r == marker:
			markers++
		case isDigestLine(r):
			hashes = append(hashes, r)
		case strings.HasPrefix(r, digestDir+" ") && byPath[r[len(digestDir)+1:]] != nil:
			// a directory where a file was expected: not a regular file
		default:
			sizeText, name, ok := strings.Cut(r, " ")
			size, err := strconv.ParseInt(sizeText, 10, 64)
			f := byPath[name]
			if !ok || err != nil || f == nil || f.Regular {
				return nil, false, fmt.Errorf("the digest command printed an unexpected line %.200q", r)
			}
			f.Regular, f.Size = true, size
		}
	}
	if markers != 2 {
		// find names the directory first and last: an output without both is cut short.
		return nil, false, fmt.Errorf("the digest command's output is incomplete (%d bytes)", len(out))
	}
	for _, r := range hashes {
		f := byPath[r[66:]]
		if f == nil || !f.Regular {
			return nil, false, fmt.Errorf("the digest command printed a digest of a file it did not size: %.200q", r)
		}
		if _, err := hex.Decode(f.SHA256[:], []byte(r[:64])); err != nil {
			return nil, false, fmt.Errorf("the digest command printed a bad digest %.200q", r)
		}
	}
	sized := 0
	for _, f := range files {
		if f.Regular {
			sized++
		}
	}
	if sized != len(hashes) {
		// sha256sum could not read a regular file, or could not run (no -z): the check itself
		// failed, which says nothing about the files.
		return nil, false, fmt.Errorf("the digest command sized %d files but digested %d", sized, len(hashes))
	}
	return files, true, nil
}

// isDigestLine reports whether r has sha256sum's form: 64 hex digits, a space, a space (text
// mode) or '*' (binary), the name. A size line cannot: its name starts within 20 bytes.
func isDigestLine(r string) bool {
	if len(r) < 67 || r[64] != ' ' || r[65] != ' ' && r[65] != '*' {
		return false
	}
	_, err := hex.DecodeString(r[:64])
	return err == nil
}
