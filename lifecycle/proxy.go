package lifecycle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"sandman/apperr"
	"sandman/db"
	"sandman/e2b"
	"sandman/sandbox"
)

// The preview proxy in each sandbox (docs/architecture.md, "The preview proxy"): the preview URL
// points at its port and it forwards to the app's. Readiness and the app's state follow the
// app's own port and process; the proxy is started beside the dev server and outlives it (it
// answers its own 502 page while the app is down), until the sandbox ends.

// ProxyPort is the port of the preview proxy in every sandbox, the one the preview URL names:
// next to envd's (49983), out of the way of the ports apps choose.
const ProxyPort = 49984

// proxyDir holds the proxy's binary, named by its SHA-256 so that a new one never overwrites
// the one running, its pid file and its log: outside the app's directory, which the app's files
// and commands own.
const proxyDir = "/home/user/.sandman"

// proxyMissing is ensureProxyScript's exit code (its "exit 3") when the binary it should run is not there
// whole: the caller uploads it and runs the script again.
const proxyMissing = 3

// ensureProxyScript starts the proxy unless the one of the pid file runs already with the same
// binary, target port and mode (MODE); one that differs is stopped first (SIGTERM, then SIGKILL
// 3 s later). It exits once the new proxy listens, 4 with its log if it does not within 5 s.
// It needs sh, cat, sha256sum, chmod, seq and sleep.
const ensureProxyScript = startTime + `mkdir -p ` + proxyDir + ` && cd ` + proxyDir + ` || exit 1
b=previewproxy-$SUM
mode="$SUM $TARGET $PLAIN"
running() { [ -n "$2" ] && [ "$(start_time "$1")" = "$2" ]; }
if read -r p started m < previewproxy.pid 2>/dev/null && running "$p" "$started"; then
  [ "$m" = "$mode" ] && exit 0
else
  p=
fi
[ "$(sha256sum "$b" 2>/dev/null)" = "$SUM  $b" ] || { rm -f "$b"; exit 3; }
chmod 755 "$b" || exit 1
if [ -n "$p" ]; then
  kill "$p" 2>/dev/null
  for _ in $(seq 30); do running "$p" "$started" || break; sleep 0.1; done
  running "$p" "$started" && kill -KILL "$p" 2>/dev/null
fi
hex=$(printf '%04X' "$LISTEN")
listening() {
  for f in /proc/net/tcp /proc/net/tcp6; do
    while read -r _ local _ st _; do
      [ "$st" = 0A ] && [ "${local##*:}" = "$hex" ] && return 0
    done < "$f"
  done 2>/dev/null
  return 1
}
PREVIEWPROXY_LISTEN=":$LISTEN" PREVIEWPROXY_TARGET="127.0.0.1:$TARGET" PREVIEWPROXY_PLAIN="$PLAIN" \
  setsid "./$b" > previewproxy.log 2>&1 < /dev/null &
p=$!
echo "$p $(start_time "$p") $mode" > previewproxy.pid
for _ in $(seq 50); do
  if listening && running "$p" "$(start_time "$p")"; then
    for f in previewproxy-*; do [ "$f" = "$b" ] || rm -f "$f"; done
    exit 0
  fi
  sleep 0.1
done
cat previewproxy.log
exit 4
`

// proxyBinary is the proxy's binary as Sandman has it (SANDMAN_PREVIEW_PROXY), read again when
// the file changes (a rebuild), so that sandboxes get the new one at their next start.
type proxyBinary struct {
	path string

	mu      sync.Mutex
	size    int64
	mod     time.Time
	content []byte
	sum     string
}

// load returns the binary's content and SHA-256 (hex).
func (b *proxyBinary) load() ([]byte, string, error) {
	fi, err := os.Stat(b.path)
	if err != nil {
		return nil, "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.content == nil || fi.Size() != b.size || !fi.ModTime().Equal(b.mod) {
		content, err := os.ReadFile(b.path)
		if err != nil {
			return nil, "", err
		}
		sum := sha256.Sum256(content)
		b.content, b.sum, b.size, b.mod = content, hex.EncodeToString(sum[:]), fi.Size(), fi.ModTime()
	}
	return b.content, b.sum, nil
}

// previewURL is the URL the founder and visitors see: the proxy's port when Sandman runs one,
// else the app's.
func (s *Service) previewURL(p providerSandbox, port int32) string {
	if s.proxy != nil {
		port = ProxyPort
	}
	return s.provider.PreviewURL(e2b.Sandbox{ID: p.ID, Domain: p.Domain}, int(port))
}

// appURL is the app's own port in sb, which readiness checks ask: the proxy answers whether or
// not the app does.
func (s *Service) appURL(sb db.Sandbox, port int32) string {
	return s.provider.PreviewURL(e2b.Sandbox{ID: deref(sb.ProviderID), Domain: sb.ProviderDomain}, int(port))
}

// ensureProxy makes the proxy run in the sandbox in front of project's port, with the reporter
// as the project's switch says: one command when it runs already, an upload of the binary
// first when the sandbox does not have this one. Nothing without SANDMAN_PREVIEW_PROXY.
func (s *Service) ensureProxy(ctx context.Context, h sandboxHandle, project db.Project) error {
	if s.proxy == nil {
		return nil
	}
	content, sum, err := s.proxy.load()
	if err != nil {
		return fmt.Errorf("read the preview proxy (SANDMAN_PREVIEW_PROXY): %w", err)
	}
	if s.cfg.UploadTimeout > 0 { // an upload of the binary at most, and a command
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.UploadTimeout)
		defer cancel()
	}
	for uploaded := false; ; uploaded = true {
		p, err := s.provider.StartProcess(ctx, h, e2b.ProcessParams{Command: ensureProxyScript, Cwd: "/home/user", Tag: "sandman-proxy",
			Envs: map[string]string{"SUM": sum, "LISTEN": strconv.Itoa(ProxyPort), "TARGET": strconv.Itoa(int(project.Port)),
				"PLAIN": strconv.FormatBool(!project.PreviewReporter)}})
		if err != nil {
			return fmt.Errorf("start the preview proxy: %w", err)
		}
		res, err := p.Wait(ctx)
		switch {
		case err != nil:
			return fmt.Errorf("start the preview proxy: %w", err)
		case res.ExitCode == 0:
			return nil
		case res.ExitCode == proxyMissing && !uploaded:
			if err := s.providerUpload(ctx, h, []e2b.File{{Path: proxyDir + "/previewproxy-" + sum, Content: content}}); err != nil {
				return fmt.Errorf("upload the preview proxy: %w", err)
			}
		default:
			return fmt.Errorf("the preview proxy did not start (exit %d): %s", res.ExitCode, tail(res.Stdout+res.Stderr, 300))
		}
	}
}

// SetPreviewReporter turns the project's preview reporter on or off (docs/architecture.md, "The
// preview proxy"). A running preview's proxy is switched at once; one that sleeps is at its
// wake, since each start of the app ensures the proxy in the project's mode.
func (s *Service) SetPreviewReporter(ctx context.Context, owner, projectID uuid.UUID, on bool) (db.Project, error) {
	p, err := s.q.SetProjectPreviewReporter(ctx, db.SetProjectPreviewReporterParams{ID: projectID, OwnerID: owner, PreviewReporter: on})
	if db.IsNotFound(err) {
		return p, apperr.NotFound("Project")
	}
	if err != nil || s.proxy == nil {
		return p, err
	}
	sb, err := s.q.GetCurrentSandboxByProject(ctx, projectID)
	if db.IsNotFound(err) || err == nil && (sb.Status != sandbox.Running || sb.ProviderID == nil) {
		return p, nil
	}
	if err != nil {
		return p, err
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := s.ensureProxy(pctx, s.handleOf(sb), p); err != nil {
		// The switch is stored: the preview's next start applies it.
		s.log.Warn("switch the preview proxy of a running preview", "sandbox_id", sb.ID, "err", err)
	}
	return p, nil
}
