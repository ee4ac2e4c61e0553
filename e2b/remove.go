package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
)

// RemoveFiles removes paths (relative to dir) from sb and marks executable (relative to dir)
// executable, in one envd command per chunk of paths, not one call per file (envd's Remove
// takes one path). Folders left empty by a removal are removed too, so that a later file may
// take a removed folder's name. A path that is not there is no error. Paths travel
// NUL-separated and base64-encoded, never through the shell's parsing, as DigestFiles' do.
func (c *Client) RemoveFiles(ctx context.Context, sb Sandbox, dir string, paths, executable []string) error {
	const op = "envd_remove"
	if err := checkSandboxID(op, sb.ID); err != nil {
		return err
	}
	if dir == "" || strings.ContainsRune(dir, 0) {
		return fmt.Errorf("e2b %s: %w: bad directory %q", op, ErrInvalid, dir)
	}
	for _, p := range append(paths[:len(paths):len(paths)], executable...) {
		if p == "" || strings.ContainsRune(p, 0) || strings.HasPrefix(p, "/") {
			return fmt.Errorf("e2b %s: %w: bad path %q (relative, without NUL)", op, ErrInvalid, p)
		}
	}
	for len(paths) > 0 || len(executable) > 0 {
		var rm, x []string
		rm, paths = chunk(paths)
		x, executable = chunk(executable)
		cmd := removeScript(dir, nulList(rm), nulList(x))
		p, err := c.StartProcess(ctx, sb, ProcessParams{Command: cmd, Tag: "sandman-remove"})
		if err != nil {
			return err
		}
		res, err := p.Wait(ctx)
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("e2b %s: exit %d: %.300q", op, res.ExitCode, res.Stderr)
		}
	}
	return nil
}

// chunk splits off what one command takes (the limits of a digest's command line).
func chunk(paths []string) (head, rest []string) {
	end, size := 0, 0
	for end < len(paths) && end < digestChunkFiles && (end == 0 || size+len(paths[end])+3 <= digestChunkBytes) {
		size += len(paths[end]) + 3
		end++
	}
	return paths[:end], paths[end:]
}

// nulList is paths, each prefixed with "./" (no name reads as an option) and NUL-terminated, in
// base64.
func nulList(paths []string) string {
	var b bytes.Buffer
	for _, p := range paths {
		b.WriteString("./")
		b.WriteString(p)
		b.WriteByte(0)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// removeScript removes the NUL-separated paths of the base64 list rm and their folders left
// empty, and chmods +x those of x. A missing directory has nothing to remove.
func removeScript(dir, rm, x string) string {
	return "cd -- " + shellQuote(dir) + ` 2>/dev/null || exit 0
printf %s '` + rm + `' | base64 -d | xargs -0 -r rm -rf -- || exit 71
printf %s '` + rm + `' | base64 -d | xargs -0 -r -n1 dirname -z -- | sort -zu | xargs -0 -r rmdir -p --ignore-fail-on-non-empty -- 2>/dev/null
printf %s '` + x + `' | base64 -d | xargs -0 -r chmod +x -- || exit 72
exit 0
`
}

// shellQuote quotes s for bash: in single quotes, each single quote inside closing the quotes,
// escaped, and opening them again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
