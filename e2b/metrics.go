package e2b

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

type metrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	retries  *prometheus.CounterVec

	// failed counts this client's failed calls by operation (CallErrors), apart from the
	// shared registry's counters, which another client may feed too.
	mu     sync.Mutex
	failed map[string]int64
}

func newMetrics(reg prometheus.Registerer, breakerState func() gobreaker.State) *metrics {
	m := &metrics{
		failed: map[string]int64{},
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
	o := outcome(err)
	m.calls.WithLabelValues(op, o).Inc()
	switch o {
	case "ok", "not_found", "conflict", "canceled":
		// Answers of a healthy provider, or a caller that gave up.
	default:
		m.mu.Lock()
		m.failed[op]++
		m.mu.Unlock()
	}
	m.duration.WithLabelValues(op).Observe(took.Seconds())
}
