// E2B's SDK suite as run against sandboxd (run.sh copies this file into the SDK's package): the
// suite's unit project with a longer timeout, plus, with SANDBOXD_WILDCARD=1, a fetch that sends
// https://<port>-<id>.localhost:<p> to sandboxd as http (wildcard.setup.ts).
import { defineConfig } from 'vitest/config'
const wildcard = process.env.SANDBOXD_WILDCARD === '1'
export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    isolate: true,
    globals: false,
    testTimeout: 60_000,
    environment: 'node',
    setupFiles: [
      'tests/globalFetchFallback.setup.ts',
      ...(wildcard ? ['./sandboxd-wildcard.setup.ts'] : []),
    ],
    deps: { interopDefault: true },
    env: { ...(process.env as Record<string, string>) },
  },
})
