package ops

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exposes the console's figures to Prometheus, read from the database at each scrape
// (every instance answers the same): sandman_sandboxes{state}, sandman_cost_dollars_per_hour and
// sandman_saved_dollars_total.
type Collector struct {
	s       *Service
	log     *slog.Logger
	states  *prometheus.Desc
	cost    *prometheus.Desc
	savings *prometheus.Desc
}

// NewCollector returns the console's Prometheus collector.
func NewCollector(s *Service, log *slog.Logger) *Collector {
	return &Collector{s: s, log: log,
		states: prometheus.NewDesc("sandman_sandboxes", "Sandboxes by state now (gone: ended in the last 24 hours, not by a rebuild).",
			[]string{"state"}, nil),
		cost: prometheus.NewDesc("sandman_cost_dollars_per_hour",
			"What the awake sandboxes cost per hour now, at SANDMAN_RATE_VCPU_HOUR and SANDMAN_RATE_GIB_HOUR.", nil, nil),
		savings: prometheus.NewDesc("sandman_saved_dollars_total",
			"What sleeping has saved since the figures were first kept, at the current rates (docs/operations.md).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.states
	ch <- c.cost
	ch <- c.savings
}

// Collect implements prometheus.Collector: a scrape that cannot read the database reports none
// of these rather than zeros.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := time.Now()
	sum, err := c.s.Summary(ctx, now)
	if err != nil {
		c.log.Warn("metrics: read the console's figures", "err", err)
		return
	}
	for state, n := range sum.States {
		ch <- prometheus.MustNewConstMetric(c.states, prometheus.GaugeValue, float64(n), state)
	}
	ch <- prometheus.MustNewConstMetric(c.cost, prometheus.GaugeValue, sum.CostPerHour)
	saved, err := c.s.SavedTotal(ctx, now)
	if err != nil {
		c.log.Warn("metrics: read the savings", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.savings, prometheus.CounterValue, saved)
}
