package feed

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	fanout prometheus.Histogram
	notify prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		fanout: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sandman_sse_fanout_seconds",
			Help: "Time to render and queue one change for a founder's connections.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		notify: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sandman_sse_notify_lag_seconds",
			Help: "Time from NOTIFY receipt to the change being queued on every connection (a wait for a render worker included).", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
	}
	if reg != nil {
		reg.MustRegister(m.fanout, m.notify)
	}
	return m
}
