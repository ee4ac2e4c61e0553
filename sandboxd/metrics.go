package sandboxd

import (
	"net/http"
	"strconv"
	"time"

	"sandman/sandboxd/machine"
	"sandman/sandboxd/store"
	"sandman/sandboxd/wire"
)

// Metrics are measured as the provider does: every running sandbox every 5 s (its bucket,
// Config.MetricsInterval), the last 720 samples (an hour) kept in memory and answered by
// GET /sandboxes/{id}/metrics.
const metricsKept = 720

type metricSample struct {
	at     time.Time
	usage  machine.Usage
	cpuPct float64
}

// sandboxMetric is the provider's SandboxMetric.
type sandboxMetric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int       `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

func (s *Server) sampleMetrics() {
	t := time.NewTicker(s.cfg.MetricsInterval)
	defer t.Stop()
	for {
		select {
		case <-s.baseCtx.Done():
			return
		case <-t.C:
			s.sampleOnce()
		}
	}
}

func (s *Server) sampleOnce() {
	s.mu.Lock()
	var running []*sandbox
	for _, sb := range s.sandboxes {
		if !sb.gone && sb.rec.State == store.StateRunning {
			running = append(running, sb)
		}
	}
	s.mu.Unlock()
	for _, sb := range running {
		// A sandbox in a transition is measured at the next tick.
		if !sb.op.TryLock() {
			continue
		}
		m := sb.vm
		sb.op.Unlock()
		var u machine.Usage
		if m != nil {
			if !m.Alive() {
				continue
			}
			u = m.Usage()
		}
		sb.recordMetric(now(), u)
	}
}

// recordMetric keeps one sample, its CPU share reckoned against the previous one.
func (sb *sandbox) recordMetric(at time.Time, u machine.Usage) {
	sb.metricsMu.Lock()
	defer sb.metricsMu.Unlock()
	smp := metricSample{at: at, usage: u}
	if n := len(sb.metrics); n > 0 {
		last := sb.metrics[n-1]
		wall := at.Sub(last.at)
		if wall > 0 && u.CPUNanos >= last.usage.CPUNanos {
			smp.cpuPct = float64(u.CPUNanos-last.usage.CPUNanos) / float64(wall.Nanoseconds()) / float64(machine.CPUCount) * 100
		}
	}
	sb.metrics = append(sb.metrics, smp)
	if len(sb.metrics) > metricsKept {
		sb.metrics = append(sb.metrics[:0], sb.metrics[len(sb.metrics)-metricsKept:]...)
	}
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	id, ok := sandboxIDParam(w, r)
	if !ok {
		return
	}
	bound := func(name string, def int64) (int64, bool) {
		v := r.URL.Query().Get(name)
		if v == "" {
			return def, true
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			wire.WriteError(w, http.StatusBadRequest, name+" must be a Unix time in seconds")
			return 0, false
		}
		return n, true
	}
	start, ok := bound("start", 0)
	if !ok {
		return
	}
	end, ok := bound("end", now().Unix())
	if !ok {
		return
	}
	s.mu.Lock()
	sb := s.sandboxes[id]
	if sb != nil && sb.gone {
		sb = nil
	}
	s.mu.Unlock()
	if sb == nil {
		writeOpError(w, notFound(id))
		return
	}
	memTotal, diskTotal := int64(s.iso.MemoryMB())<<20, int64(s.iso.DiskMB())<<20
	out := []sandboxMetric{}
	sb.metricsMu.Lock()
	for _, m := range sb.metrics {
		if t := m.at.Unix(); t < start || t > end {
			continue
		}
		disk := diskTotal
		if m.usage.DiskSize > 0 {
			disk = m.usage.DiskSize
		}
		out = append(out, sandboxMetric{
			Timestamp: m.at, TimestampUnix: m.at.Unix(), CPUCount: machine.CPUCount, CPUUsedPct: m.cpuPct,
			MemUsed: m.usage.MemUsed, MemTotal: memTotal, MemCache: m.usage.MemCache,
			DiskUsed: m.usage.DiskUsed, DiskTotal: disk,
		})
	}
	sb.metricsMu.Unlock()
	wire.WriteJSON(w, http.StatusOK, out)
}
