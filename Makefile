# Sandman. The two commands a newcomer needs: `make run` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
TOOLS     := .bin
SQLC      := $(TOOLS)/sqlc
STATICCHECK := $(TOOLS)/staticcheck
TEST_TIMEOUT ?= 20m

# System packages the suite and `make run` use: PostgreSQL 15's server; for sandboxd's isolation
# bubblewrap, e2fsprogs (mkfs.ext4: a disk image per sandbox) and mount/util-linux (loop mounts,
# setpriv for the tests' unprivileged sandboxd); Node.js and npm (sandboxd's one template is the
# host's tools: the starters run on them) and git and Python (the attack tests run them under the
# system-call filter); Chromium (browser tests).
PG_INITDB := /usr/lib/postgresql/15/bin/initdb

.PHONY: help run test test-quick check generate build previewproxy bench deps deps-run tools clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

run: deps-run build ## start PostgreSQL, sandboxd and Sandman with a demo founder
	@bin/devrun

# The tests of things that race (concurrent requests, two instances, the live hub and its feed)
# run under the race detector; everything else runs once without it.
RACY := ^Test(Concurrent|TwoInstances)

# The benchmarks' own checks (none lost, none applied twice, every stream reached, every resume
# intact, no request from an idle page…) run in `make test` too: each benchmark once, at the
# small sizes -short gives it (testkit.BenchSize), failing on a broken invariant; the targets
# they only report stay figures for `make bench`.
# -p 1 on the first pass: handlers and lifecycle each start dozens of instances, sandboxd
# sandboxes and (handlers) Chromium tabs; run side by side on two cores since the watch of dev
# servers came, their stream tests missed transient states (a build's first stage, a card's
# second render) that each package alone passes. A package at a time is about 14 minutes here.
test: deps ## run the whole test suite (real PostgreSQL, sandboxd and Chromium)
	$(GO) test -p 1 -timeout $(TEST_TIMEOUT) -skip '$(RACY)' ./...
	$(GO) test -timeout $(TEST_TIMEOUT) -race -run '$(RACY)' ./handlers ./lifecycle
	$(GO) test -timeout $(TEST_TIMEOUT) -race ./live ./feed
	$(GO) test -timeout 10m -short -run '^$$' -bench . -benchtime 1x ./...

# The quick lane, for a run while working: every package but sandboxd's own (their tests are
# its isolation), with SANDMAN_TEST_LANE=quick, which skips each test that starts a sandboxd
# (sandboxdtest.Start) or Chromium (apptest.NewBrowser), and the console's scale test (100,000
# sandboxes). Under CI=true those skips fail
# (testkit.NotInQuickLane): CI runs `make test`.
QUICK_PKGS = $(shell $(GO) list ./... | grep -v -e '^sandman/sandboxd' -e '^sandman/cmd/sandboxd$$')

test-quick: deps-run ## run the tests that need neither sandboxd's isolation nor Chromium (about a minute)
	SANDMAN_TEST_LANE=quick $(GO) test -timeout 5m $(QUICK_PKGS)

# -p 1: one package at a time, so no benchmark shares the two cores with another.
# The stream memory benchmarks run each in a process of its own: the runtime keeps the records of
# 10,000 streams' goroutines after they end, so a memory benchmark after another reuses them
# and counts less than a stream costs, and every later collection in that process marks them,
# which doubled the next benchmarks' tails (BENCHMARKS.md, "Short", 1 and 4).
bench: deps ## run the benchmarks (figures go in BENCHMARKS.md)
	$(GO) test -p 1 -run '^$$' -bench . -skip '^(BenchmarkSSEAppMemory|BenchmarkSSEMemory)$$' -benchtime 3s -timeout 30m ./...
	$(GO) test -run '^$$' -bench '^BenchmarkSSEMemory$$' -benchtime 3s -timeout 10m ./live
	$(GO) test -run '^$$' -bench '^BenchmarkSSEAppMemory$$' -benchtime 3s -timeout 10m ./handlers

build: previewproxy ## build bin/sandman, bin/sandboxd, bin/devrun and the sandboxes' preview proxy
	$(GO) build -o bin/ ./cmd/...

# The preview proxy runs inside each sandbox, uploaded with the app (docs/architecture.md, "The
# preview proxy"): a static Linux binary, whatever machine builds it.
PROXY_GOARCH ?= amd64
previewproxy: ## build bin/sandbox/previewproxy, static, for Linux sandboxes (PROXY_GOARCH=amd64)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(PROXY_GOARCH) $(GO) build -trimpath -ldflags='-s -w' -o bin/sandbox/previewproxy ./cmd/previewproxy

generate: $(SQLC) ## regenerate templ and sqlc output
	$(GO) tool templ generate -include-version=false
	$(SQLC) generate

check: $(SQLC) $(STATICCHECK) ## gofmt, vet, staticcheck, and generated code up to date
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	$(GO) tool templ fmt -fail views
	$(GO) tool templ generate -include-version=false
	$(SQLC) generate
	@if [ -n "$$(git status --porcelain -- views db)" ]; then \
		echo "generated code is stale: run 'make generate' and commit the result"; git status --short -- views db; exit 1; fi

tools: $(SQLC) $(STATICCHECK) ## build the pinned code generators and linters (tools/go.mod)

$(SQLC): tools/go.mod tools/go.sum
	cd tools && $(GO) build -o ../$(SQLC) github.com/sqlc-dev/sqlc/cmd/sqlc

$(STATICCHECK): tools/go.mod tools/go.sum
	cd tools && $(GO) build -o ../$(STATICCHECK) honnef.co/go/tools/cmd/staticcheck

deps-run: ## install PostgreSQL 15, bubblewrap, e2fsprogs, mount, Node.js and npm if missing
	@$(MAKE) --no-print-directory install-pkgs PKGS="$(if $(wildcard $(PG_INITDB)),,postgresql-15) $(if $(shell command -v bwrap),,bubblewrap) \
		$(if $(wildcard /usr/sbin/mkfs.ext4 /sbin/mkfs.ext4),,e2fsprogs) $(if $(wildcard /usr/bin/mount /bin/mount),,mount) \
		$(if $(wildcard /usr/bin/setpriv),,util-linux) $(if $(shell command -v node),,nodejs) $(if $(shell command -v npm),,npm) \
		$(if $(shell command -v git),,git) $(if $(shell command -v python3),,python3)"

deps: deps-run ## also install Chromium for the browser tests if missing
	@$(MAKE) --no-print-directory install-pkgs PKGS="$(if $(wildcard /usr/bin/chromium),,chromium)"

.PHONY: install-pkgs
install-pkgs:
	@pkgs="$(strip $(PKGS))"; [ -z "$$pkgs" ] && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing $$pkgs"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade $$pkgs >/dev/null; \
	else \
		echo "missing system packages: $$pkgs"; echo "install them, e.g. sudo apt-get install -y $$pkgs"; exit 1; \
	fi

clean: ## remove built binaries (keeps .data)
	rm -rf bin
