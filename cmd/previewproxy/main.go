// Command previewproxy runs inside a sandbox next to the app's dev server: the preview URL
// points at its port, it forwards every request to the app's port, and it adds one script tag
// to the app's HTML pages, a reporter that tells the page's errors to Sandman's page framing
// it. Websockets (Vite's hot reload), streams and every answer that is not a page pass
// untouched. --plain turns the script off. See docs/architecture.md, "The preview proxy".
//
// Each flag can come from the environment instead (PREVIEWPROXY_ and its name in capitals,
// dashes as underscores), as a sandbox's start command sets them.
//
// It is built static (CGO_ENABLED=0, `make previewproxy`) and uploaded with the app.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(context.Background(), os.Args[1:], os.Getenv, log); err != nil {
		fmt.Fprintln(os.Stderr, "previewproxy:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, log *slog.Logger) error {
	fs := flag.NewFlagSet("previewproxy", flag.ContinueOnError)
	env := func(name, def string) string {
		if v := getenv("PREVIEWPROXY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); v != "" {
			return v
		}
		return def
	}
	listen := fs.String("listen", env("listen", ""), "address to listen on, as :3001 (the port the preview URL points at)")
	target := fs.String("target", env("target", ""), "the app's address, as 127.0.0.1:3000 (or http://127.0.0.1:3000)")
	plain, _ := strconv.ParseBool(env("plain", "false"))
	fs.BoolVar(&plain, "plain", plain, "forward everything untouched: add no script")
	scriptURL := fs.String("script-url", env("script-url", ""), "src of the added script tag, instead of the reporter served at /__sandman/report.js")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" {
		return errors.New("no --listen address: give the port the preview URL points at, as :3001")
	}
	u, err := parseTarget(*target)
	if err != nil {
		return err
	}
	p, err := New(Config{Target: u, Plain: plain, ScriptURL: *scriptURL, Log: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	// No write timeout: streams and websockets last as long as the page.
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("forwarding", "listen", ln.Addr().String(), "target", u.Host, "script", !plain)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// parseTarget reads the app's address: host:port, :port or an http URL.
func parseTarget(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("no --target: give the app's address, as 127.0.0.1:3000")
	}
	if !strings.Contains(s, "://") {
		if strings.HasPrefix(s, ":") {
			s = "127.0.0.1" + s
		}
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.Port() == "" {
		return nil, fmt.Errorf("the target %q is not an address with a port, as 127.0.0.1:3000", s)
	}
	return &url.URL{Scheme: "http", Host: u.Host}, nil
}
