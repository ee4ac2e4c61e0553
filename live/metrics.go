package live

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	clients prometheus.Gauge
	dropped prometheus.Counter
	refused prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		clients: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sandman_sse_clients", Help: "Open SSE connections on this instance."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandman_sse_dropped_total", Help: "SSE connections dropped for falling behind."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandman_sse_refused_total",
			Help: "SSE connections refused because one of their caps (a founder's, a share link's, a client address's streams) was full on this instance."}),
	}
	if reg != nil {
		reg.MustRegister(m.clients, m.dropped, m.refused)
	}
	return m
}
