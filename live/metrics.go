package live

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	clients prometheus.Gauge
	dropped prometheus.Counter
	refused prometheus.Counter
	fanout  prometheus.Histogram
	notify  prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		clients: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sandman_sse_clients", Help: "Open SSE connections on this instance."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandman_sse_dropped_total", Help: "SSE connections dropped for falling behind."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandman_sse_refused_total",
			Help: "SSE connections refused because their founder had the most streams open on this instance."}),
		fanout: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sandman_sse_fanout_seconds",
			Help: "Time to render and queue one change for a founder's connections.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		notify: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sandman_sse_notify_lag_seconds",
			Help: "Time from NOTIFY receipt to the change being queued on every connection (a wait for a render worker included).", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
	}
	if reg != nil {
		reg.MustRegister(m.clients, m.dropped, m.refused, m.fanout, m.notify)
	}
	return m
}
