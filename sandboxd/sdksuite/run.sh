#!/bin/bash
# Runs E2B's JavaScript SDK tests (e2b-dev/E2B at b8029973, packages/js-sdk) against a sandboxd
# of its own, for the test files that concern what sandboxd serves (docs/sandboxd.md, "What the
# provider's SDKs get"). Needs node ≥ 20 and npm; not part of `make test`.
#
#   sandboxd/sdksuite/run.sh <E2B checkout at b8029973> [wildcard|documented] [vitest args…]
#
# wildcard (the default): https://<port>-<id>.localhost:<p>/ reaches sandboxd over http, as a TLS
# front on a wildcard domain gives; documented: the SDK configured as README.md says.
set -euo pipefail
e2b=$(cd "${1:?the path of an E2B checkout at b8029973}" && pwd); shift
mode=${1:-wildcard}; shift || true
here=$(cd "$(dirname "$0")" && pwd); repo=$(cd "$here/../.." && pwd)
# Below the ephemeral port range, so no outgoing connection of another program holds them.
api=127.0.0.1:29182 sbx=127.0.0.1:29183
work=$(mktemp -d)
chmod 0755 "$work" # the sandboxes' users reach their state through it
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT

(cd "$e2b" && [ -d node_modules ] || npx --yes pnpm@10 install --filter 'e2b...' --config.engine-strict=false)
cp "$here/vitest.sandboxd.mts" "$e2b/packages/js-sdk/vitest.sandboxd.mts"
cp "$here/wildcard.setup.ts" "$e2b/packages/js-sdk/sandboxd-wildcard.setup.ts"

(cd "$repo" && go build -o "$work/sandboxd" ./cmd/sandboxd)
export E2B_API_KEY=e2b_$(openssl rand -hex 20)
# As root, a uid range of its own: another sandboxd (make run's) may hold the default one.
"$work/sandboxd" --state-dir "$work/state" --api-addr $api --sandbox-addr $sbx \
  --uid-base 2100000000 --memory-limit 1073741824 >"$work/sandboxd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -fs "http://$api/health" >/dev/null && break; sleep 0.1; done
curl -fs "http://$api/health" >/dev/null || { echo "sandboxd did not start:"; cat "$work/sandboxd.log"; exit 1; }

export E2B_API_URL=http://$api E2B_DOMAIN=localhost:${sbx##*:}
if [ "$mode" = documented ]; then export E2B_SANDBOX_URL=http://$sbx; else export SANDBOXD_WILDCARD=1; fi
cd "$e2b/packages/js-sdk"
npx vitest run --config vitest.sandboxd.mts "$@" \
  tests/api/{info,kill,list,snapshot}.test.ts \
  tests/sandbox/{connect,create,host,kill,lifecyclePayload,metrics,secure,snapshot,timeout}.test.ts \
  tests/sandbox/{commands,files,git,pty}
