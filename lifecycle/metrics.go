package lifecycle

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	orphansKilled prometheus.Counter
	// resumeIntegrity counts resumes by what their integrity check found: intact, healed,
	// failed (the files could not be restored), unchecked (the check itself could not be made).
	resumeIntegrity *prometheus.CounterVec
	// filesRestored counts files uploaded again by a check, after a build's upload or a resume.
	filesRestored *prometheus.CounterVec
	visitorWakes  prometheus.Counter
	// idleLag is how late the idle queue claims each due sandbox: its deadline to its pause
	// being asked for.
	idleLag prometheus.Histogram
}

// Integrity outcomes (sandman_resume_integrity_total's outcome label).
const (
	integrityIntact    = "intact"
	integrityHealed    = "healed"
	integrityFailed    = "failed"
	integrityUnchecked = "unchecked"
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		orphansKilled: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandman_orphans_killed_total",
			Help: "Provider sandboxes with Sandman's metadata that no sandbox row wanted, killed by the reconcile."}),
		resumeIntegrity: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandman_resume_integrity_total",
			Help: "Resumes by what the integrity check found: intact, healed (files restored), failed (they could not be), unchecked (the check could not be made)."},
			[]string{"outcome"}),
		filesRestored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandman_integrity_files_restored_total",
			Help: "Stored files the provider lost or damaged, uploaded again by the integrity check, after a build's upload or a resume."},
			[]string{"after"}),
		visitorWakes: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandman_share_wakes_total",
			Help: "Resumes started by visitors of share links (one per wake-up, however many visitors asked)."}),
		idleLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sandman_idle_pause_lag_seconds",
			Help:    "Idle pauses asked for by the idle queue, by how long after the sandbox's idle deadline (one per deadline that passed).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}),
	}
	for _, o := range []string{integrityIntact, integrityHealed, integrityFailed, integrityUnchecked} {
		m.resumeIntegrity.WithLabelValues(o)
	}
	for _, a := range []string{"build", "resume"} {
		m.filesRestored.WithLabelValues(a)
	}
	if reg != nil {
		reg.MustRegister(m.orphansKilled, m.resumeIntegrity, m.filesRestored, m.visitorWakes, m.idleLag)
	}
	return m
}
