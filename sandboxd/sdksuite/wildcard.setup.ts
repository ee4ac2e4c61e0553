// What a TLS front on a wildcard domain gives: every https://<port>-<id>.localhost:<p>/
// the SDK or a test fetches reaches sandboxd's sandbox address over plain http, routed by the
// same host name (sent as the E2b-Sandbox-* headers, since fetch may not set Host).
const orig = globalThis.fetch
globalThis.fetch = (async (input: any, init?: any) => {
  const url = new URL(typeof input === 'string' || input instanceof URL ? String(input) : input.url)
  const m = url.hostname.match(/^(\d+)-([a-z0-9]+)\.localhost$/)
  if (!m) return orig(input, init)
  const target = `http://localhost:${url.port}${url.pathname}${url.search}`
  if (typeof input === 'string' || input instanceof URL) {
    const headers = new Headers(init?.headers)
    headers.set('E2b-Sandbox-Id', m[2])
    headers.set('E2b-Sandbox-Port', m[1])
    return orig(target, { ...init, headers })
  }
  const req = new Request(target, input)
  const headers = new Headers(init?.headers ?? req.headers)
  headers.set('E2b-Sandbox-Id', m[2])
  headers.set('E2b-Sandbox-Port', m[1])
  return orig(new Request(req, { ...init, headers }))
}) as typeof fetch
