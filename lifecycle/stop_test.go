package lifecycle_test

import (
	"testing"

	"sandman/sandbox"
)

// A dev server that left its start command's process tree (it double-forked: the start command
// went on as another program) still holds the port when the next version is applied. The stop
// finds it through the port and stops it, so the next version's server is a new process, not
// the old one answering on.
func TestAServerThatLeftItsProcessTreeIsStoppedBeforeTheNextVersion(t *testing.T) {
	t.Parallel()
	v := appVersions(t, nil)
	u, _ := founder(t, v.pool, 5)
	p := healProject(t, v.testBundle, u.ID, sandbox.PauseMemory, "(node server.js &); exec sleep 100000")
	sb := v.buildRunning(t, u.ID, p.ID)
	v.waitApp(t, u.ID, sb.ID, sandbox.AppUp, appSeen)
	_, before := get(t, v.host, sb.PreviewURL, "/boot")
	v.change(t, u.ID, p.ID, map[string]string{"page.html": "<h1>Version 2</h1>\n"})
	v.waitHistory(t, u.ID, p.ID, "Version 2 is live")
	if st := v.waitApp(t, u.ID, sb.ID, sandbox.AppUp, appSeen); st.App.Version != 2 {
		t.Fatalf("the app: %+v, want up on version 2", st.App)
	}
	if _, after := get(t, v.host, sb.PreviewURL, "/boot"); after == before {
		t.Fatalf("version 2 is answered by the server started for version 1 (boot %q): the old server was not stopped", before)
	}
}
