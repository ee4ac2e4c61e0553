package handlers_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// quotaStack is a web instance whose founders may store quota bytes and have limit projects.
func quotaStack(t testing.TB, quota int64, limit int) *stack {
	t.Helper()
	return start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) {
		c.StorageQuota, c.ProjectLimit = quota, limit
	}})
}

// randomFile is n bytes nobody stored before, as the JSON API takes them.
func randomFile(t testing.TB, path string, n int) vfile {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return vfile{"path": path, "base64": base64.StdEncoding.EncodeToString(b)}
}

// storage is what the database holds of a founder's content: the sum it keeps, the sum of the
// content itself, and the rows a refused request must leave alone.
type storage struct {
	Counted, Actual                  int64
	Blobs, Versions, Files, Projects int
}

func (s *stack) storageOf(t testing.TB, email string) storage {
	t.Helper()
	var st storage
	err := s.Pool().QueryRow(t.Context(), `SELECT
		coalesce((SELECT f.stored_bytes FROM founder_storage f WHERE f.owner_id = u.id), 0),
		coalesce((SELECT sum(octet_length(b.content)) FROM blobs b WHERE b.owner_id = u.id), 0)::bigint,
		(SELECT count(*) FROM blobs b WHERE b.owner_id = u.id),
		(SELECT count(*) FROM versions v JOIN projects p ON p.id = v.project_id WHERE p.owner_id = u.id),
		(SELECT count(*) FROM version_files f JOIN projects p ON p.id = f.project_id WHERE p.owner_id = u.id),
		(SELECT count(*) FROM projects p WHERE p.owner_id = u.id)
		FROM users u WHERE u.email = $1`, email).Scan(&st.Counted, &st.Actual, &st.Blobs, &st.Versions, &st.Files, &st.Projects)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counted != st.Actual {
		t.Fatalf("the founder's stored bytes are counted as %d, their content is %d bytes", st.Counted, st.Actual)
	}
	return st
}

// A founder's unique content is bounded by the storage quota: a version through the API or the
// upload page, or a new project, that would take it past the quota is refused with 413 and a
// sentence that says where they stand and what to do, and stores nothing. Content they already
// have costs nothing (a restore stores nothing new, so it passes at the quota), and the
// dashboard shows what they store against the quota.
func TestAVersionPastTheStorageQuotaIsRefusedAndStoresNothing(t *testing.T) {
	t.Parallel()
	const quota = 1 << 20
	s := quotaStack(t, quota, 100)
	c := s.NewClient(t)
	const email = "quota@example.com"
	c.SignUp(email)
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"name": "Site", "starter": "static"}, &p), http.StatusCreated)
	for i := range 2 {
		r, _ := postVersion(t, c, p.ID, map[string]any{"files": []vfile{randomFile(t, fmt.Sprintf("public/big%d.bin", i), 300<<10)}}, nil)
		apptest.RequireStatus(t, r, http.StatusCreated)
	}
	before := s.storageOf(t, email)

	r, out := postVersion(t, c, p.ID, map[string]any{"files": []vfile{randomFile(t, "public/over.bin", 500<<10)}}, nil)
	apptest.RequireStatus(t, r, http.StatusRequestEntityTooLarge)
	want := fmt.Sprintf("This version would take your stored files to %s of your 1 MiB: nothing was stored.", sizeText(before.Counted+500<<10))
	if out.Code != "storage_quota" || !strings.HasPrefix(out.Error, want) {
		t.Fatalf("over the quota: %s %q, want storage_quota %q…", out.Code, out.Error, want)
	}
	if after := s.storageOf(t, email); after != before {
		t.Fatalf("a refused version stored something: before %+v, after %+v", before, after)
	}

	// The upload page says the same in its form, with the same status.
	page := c.Get("/projects/" + p.ID + "/versions/new")
	apptest.RequireStatus(t, page, http.StatusOK)
	body, ct := multipartBody(t, c.CSRF(), map[string]string{"message": "too big"},
		[]upFile{{name: "index.html", content: strings.Repeat("x", 500<<10)}})
	r = c.Do(http.MethodPost, "/projects/"+p.ID+"/versions", body, map[string]string{"Content-Type": ct})
	apptest.RequireStatus(t, r, http.StatusRequestEntityTooLarge)
	apptest.RequireContains(t, r.Body, "would take your stored files to")
	apptest.RequireContains(t, r.Body, "of your 1 MiB: nothing was stored.")
	if after := s.storageOf(t, email); after != before {
		t.Fatalf("a refused upload stored something: before %+v, after %+v", before, after)
	}

	// Filled to the byte, then a project of new content is refused, and a restore passes.
	r, _ = postVersion(t, c, p.ID, map[string]any{"files": []vfile{randomFile(t, "public/fill.bin", int(quota-before.Counted))}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	full := s.storageOf(t, email)
	if full.Counted != quota {
		t.Fatalf("filled to %d bytes, want %d", full.Counted, quota)
	}
	r = c.API(http.MethodPost, "/api/projects", map[string]string{"name": "More", "starter": "counter"}, nil)
	apptest.RequireStatus(t, r, http.StatusRequestEntityTooLarge)
	refused := apiError(t, r)
	if refused.Code != "storage_quota" || !strings.HasPrefix(refused.Error, "This project would take your stored files to") {
		t.Fatalf("a project past the quota: %s %q", refused.Code, refused.Error)
	}
	if after := s.storageOf(t, email); after != full {
		t.Fatalf("a refused project stored something: before %+v, after %+v", full, after)
	}
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+p.ID+"/versions/2/restore", map[string]any{}, nil), http.StatusCreated)

	usage := apptest.ByTestID(t, c.Get("/").Body, "usage").Text
	if want := "Stored files: 1 MiB of 1 MiB · Projects: 1 of 100"; strings.Join(strings.Fields(usage), " ") != want {
		t.Fatalf("the dashboard says %q, want %q", usage, want)
	}
}

// apiError is a JSON answer's error ({} for a success).
func apiError(t testing.TB, r apptest.Response) (out struct{ Code, Error string }) {
	t.Helper()
	if r.Status >= 300 {
		if err := json.Unmarshal([]byte(r.Body), &out); err != nil {
			t.Errorf("decode %q: %v", r.Body, err)
		}
	}
	return out
}

// sizeText is versions.QuotaSize's wording, for the figures these tests expect.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<20)), ".0") + " MiB"
	case n >= 1<<10:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<10)), ".0") + " KiB"
	}
	return fmt.Sprintf("%d bytes", n)
}

// Versions sent at once, each in a project of its own, that each fit but together do not: the
// quota holds across them (the founder's storage lock), so exactly as many are stored as fit,
// the rest are refused with 413, and the sum the database keeps is the content's.
func TestConcurrentVersionsNeverTogetherPassTheQuota(t *testing.T) {
	t.Parallel()
	const quota, each, writers = 1 << 20, 300 << 10, 8
	s := quotaStack(t, quota, 100)
	c := s.NewClient(t)
	const email = "quota-race@example.com"
	c.SignUp(email)
	ids := make([]string, writers)
	for i := range ids {
		var p struct{ ID string }
		apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"name": fmt.Sprint("Site ", i), "starter": "static"}, &p), http.StatusCreated)
		ids[i] = p.ID
	}
	before := s.storageOf(t, email)
	fit := int((quota - before.Counted) / each)
	files := make([]vfile, writers)
	for i := range files {
		files[i] = randomFile(t, "public/big.bin", each)
	}
	statuses := make([]int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			r, _ := postVersion(t, c, ids[i], map[string]any{"files": []vfile{files[i]}}, nil)
			statuses[i] = r.Status
		})
	}
	wg.Wait()
	stored, refused := 0, 0
	for _, st := range statuses {
		switch st {
		case http.StatusCreated:
			stored++
		case http.StatusRequestEntityTooLarge:
			refused++
		default:
			t.Fatalf("statuses %v: want only 201 and 413", statuses)
		}
	}
	after := s.storageOf(t, email)
	if stored != fit || after.Counted > quota || after.Counted != before.Counted+int64(stored*each) {
		t.Fatalf("%d versions of %d bytes at once, %d fit: %d stored, %d refused; the founder stores %d bytes of %d", writers, each, fit, stored, refused, after.Counted, quota)
	}
	testkit.Record(t, testkit.Scenario{ID: "storage-quota-race", Times: writers,
		Injected: fmt.Sprintf("%d versions of 300 KiB of new content at once, each in a project of its own, for a founder with a 1 MiB quota", writers),
		Result:   fmt.Sprintf("exactly the %d that fit stored, the rest 413 with nothing stored; the sum the database keeps equals the content's", fit)})
}

// A founder has at most the project limit, also when they create projects at once: the rest are
// refused with 409 and a sentence, and nothing of theirs is stored.
func TestAFounderHasAtMostTheProjectLimitAlsoAtOnce(t *testing.T) {
	t.Parallel()
	const limit, tries = 3, 8
	s := quotaStack(t, 1<<30, limit)
	c := s.NewClient(t)
	const email = "project-limit@example.com"
	c.SignUp(email)
	c.Get("/")
	type answer struct {
		status      int
		code, error string
	}
	answers := make([]answer, tries)
	var wg sync.WaitGroup
	for i := range tries {
		wg.Go(func() {
			r := c.API(http.MethodPost, "/api/projects", map[string]string{"name": fmt.Sprint("P", i), "starter": "counter"}, nil)
			out := apiError(t, r)
			answers[i] = answer{r.Status, out.Code, out.Error}
		})
	}
	wg.Wait()
	created := 0
	for _, a := range answers {
		switch {
		case a.status == http.StatusCreated:
			created++
		case a.status == http.StatusConflict && a.code == "project_limit" &&
			a.error == "You have 3 projects, the most one account may have: nothing was created. Make a new version of a project you have instead.":
		default:
			t.Fatalf("answers %+v: want 201 or 409 project_limit with its sentence", answers)
		}
	}
	if st := s.storageOf(t, email); created != limit || st.Projects != limit || st.Versions != limit {
		t.Fatalf("%d projects asked for at once with a limit of %d: %d created, %d stored with %d versions", tries, limit, created, st.Projects, st.Versions)
	}
	if usage := strings.Join(strings.Fields(apptest.ByTestID(t, c.Get("/").Body, "usage").Text), " "); !strings.HasSuffix(usage, "Projects: 3 of 3") {
		t.Fatalf("the dashboard says %q", usage)
	}
	testkit.Record(t, testkit.Scenario{ID: "project-limit-race", Times: tries,
		Injected: fmt.Sprintf("%d new projects at once for a founder with a limit of %d", tries, limit),
		Result:   "exactly 3 created; the rest 409 with a sentence, nothing stored"})
}
