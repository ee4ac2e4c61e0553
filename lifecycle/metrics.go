package lifecycle

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	orphansKilled prometheus.Counter
	visitorWakes  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		orphansKilled: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandman_orphans_killed_total",
			Help: "Provider sandboxes with Sandman's metadata that no sandbox row wanted, killed by the reconcile."}),
		visitorWakes: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandman_share_wakes_total",
			Help: "Resumes started by visitors of share links (one per wake-up, however many visitors asked)."}),
	}
	if reg != nil {
		reg.MustRegister(m.orphansKilled, m.visitorWakes)
	}
	return m
}
