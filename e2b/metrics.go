package e2b

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

type metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	retries  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, breakerState func() gobreaker.State) *metrics {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandman_e2b_calls_total",
			Help: "Calls to the sandbox provider (API and envd) by operation and outcome, retries included in one call.",
		}, []string{"op", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandman_e2b_call_duration_seconds",
			Help:    "Duration of calls to the sandbox provider, retries and waits included.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"op"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandman_e2b_retries_total",
			Help: "Retries of calls to the sandbox provider by operation and reason (transient, rate_limited).",
		}, []string{"op", "reason"}),
	}
	if reg == nil {
		return m
	}
	m.calls = registerOrReuse(reg, m.calls)
	m.duration = registerOrReuse(reg, m.duration)
	m.retries = registerOrReuse(reg, m.retries)
	// A GaugeFunc reads the breaker at scrape time: the open → half-open move happens lazily
	// inside gobreaker, so a gauge set on transitions would show "open" for too long.
	state := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sandman_e2b_circuit_state",
		Help: "State of the circuit breaker on the provider's API: 0 closed, 1 half-open, 2 open.",
	}, func() float64 { return float64(breakerState()) })
	// A second client on the same registry keeps the first one's gauge: there is one provider.
	_ = reg.Register(state)
	return m
}

// registerOrReuse lets several clients share one registry (tests, or a CLI making two).
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

func (m *metrics) observe(op string, err error, took time.Duration) {
	m.calls.WithLabelValues(op, outcome(err)).Inc()
	m.duration.WithLabelValues(op).Observe(took.Seconds())
}
