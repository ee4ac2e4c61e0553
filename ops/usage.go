// Package ops holds the operator's console's figures (docs/operations.md): the fleet by state,
// what the awake sandboxes cost now, what sleeping saved, what needs a hand and how the
// provider's feeds are doing. Cost and savings are pure functions over a sandbox's stretches
// awake and asleep (usage_intervals), which lifecycle's apply records through Record in the
// transaction of each change; the console reads them back in a few indexed queries.
package ops

import (
	"time"

	"sandman/db"
	"sandman/sandbox"
)

// Rates are the provider's prices, in US dollars: SANDMAN_RATE_VCPU_HOUR, SANDMAN_RATE_GIB_HOUR.
type Rates struct {
	VCPUHour float64
	GiBHour  float64
}

// Size is a sandbox's size, what it is billed for while awake: SANDMAN_SANDBOX_VCPUS,
// SANDMAN_SANDBOX_MEMORY (a sandbox the provider reports another size for keeps its own).
type Size struct {
	VCPUs     int32
	MemoryMiB int32
}

// Config is the console's configuration.
type Config struct {
	Rates Rates
	Size  Size
}

// DefaultConfig is E2B's published 2026 prices and its default sandbox size.
func DefaultConfig() Config {
	return Config{Rates: Rates{VCPUHour: 0.0504, GiBHour: 0.0162}, Size: Size{VCPUs: 2, MemoryMiB: 512}}
}

// Usage is resources over time: awake (billed) and saved by sleeping.
type Usage struct {
	AwakeSeconds     float64 // sandbox-seconds awake, whatever their size (the chart's count)
	AwakeVCPUSeconds float64
	AwakeGiBSeconds  float64
	SavedVCPUSeconds float64
	SavedGiBSeconds  float64
}

// Add sums two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.AwakeSeconds + o.AwakeSeconds, u.AwakeVCPUSeconds + o.AwakeVCPUSeconds, u.AwakeGiBSeconds + o.AwakeGiBSeconds,
		u.SavedVCPUSeconds + o.SavedVCPUSeconds, u.SavedGiBSeconds + o.SavedGiBSeconds}
}

// Spent is what the awake part cost at these rates.
func (r Rates) Spent(u Usage) float64 { return r.dollars(u.AwakeVCPUSeconds, u.AwakeGiBSeconds) }

// Saved is what the sleeping part would have cost awake.
func (r Rates) Saved(u Usage) float64 { return r.dollars(u.SavedVCPUSeconds, u.SavedGiBSeconds) }

func (r Rates) dollars(vcpuSeconds, gibSeconds float64) float64 {
	return (vcpuSeconds*r.VCPUHour + gibSeconds*r.GiBHour) / 3600
}

// PerHour is what a size costs for an hour awake.
func (r Rates) PerHour(vcpus, memoryMiB float64) float64 {
	return vcpus*r.VCPUHour + memoryMiB/1024*r.GiBHour
}

// Interval is one stretch of a sandbox awake or asleep (a usage_intervals row).
type Interval struct {
	Kind  db.UsageKind
	Start time.Time
	End   time.Time // zero while open
	// CountsUntil caps what a sleep saves: the end of the lifetime the sandbox had when it was
	// paused. Past it the provider would have stopped the sandbox anyway, so sleeping longer
	// saves nothing more.
	CountsUntil time.Time
	VCPUs       int32
	MemoryMiB   int32
}

// IntervalOf is a stored stretch.
func IntervalOf(r db.UsageInterval) Interval {
	iv := Interval{Kind: r.Kind, Start: r.StartedAt, VCPUs: r.Vcpus, MemoryMiB: r.MemoryMib}
	if r.EndedAt != nil {
		iv.End = *r.EndedAt
	}
	if r.CountsUntil != nil {
		iv.CountsUntil = *r.CountsUntil
	}
	return iv
}

// Within is the stretch's usage inside [from, to), an open stretch counting until to. This is
// the definition of savings (docs/operations.md, "What savings are measured against"): a
// sleep saves its sandbox's size at the provider's rates from its pause to its resume (or its
// kill, or now), but no longer than the lifetime the sandbox would otherwise have run.
func (iv Interval) Within(from, to time.Time) Usage {
	end := iv.End
	if end.IsZero() || end.After(to) {
		end = to
	}
	if iv.Kind == db.UsageKindAsleep && iv.CountsUntil.Before(end) {
		end = iv.CountsUntil
	}
	start := iv.Start
	if start.Before(from) {
		start = from
	}
	if !end.After(start) {
		return Usage{}
	}
	s := end.Sub(start).Seconds()
	vcpu, gib := s*float64(iv.VCPUs), s*float64(iv.MemoryMiB)/1024
	if iv.Kind == db.UsageKindAsleep {
		return Usage{SavedVCPUSeconds: vcpu, SavedGiBSeconds: gib}
	}
	return Usage{AwakeSeconds: s, AwakeVCPUSeconds: vcpu, AwakeGiBSeconds: gib}
}

// HourUsage is a stretch's usage within one clock hour (UTC).
type HourUsage struct {
	Hour time.Time
	Usage
}

// Split cuts a closed stretch into the clock hours it covers, ascending: what the hourly rollup
// adds when the stretch closes. A sleep's hours stop at its CountsUntil.
func Split(iv Interval) []HourUsage {
	end := iv.End
	if iv.Kind == db.UsageKindAsleep && iv.CountsUntil.Before(end) {
		end = iv.CountsUntil
	}
	var out []HourUsage
	for h := iv.Start.UTC().Truncate(time.Hour); h.Before(end); h = h.Add(time.Hour) {
		if u := iv.Within(h, h.Add(time.Hour)); u != (Usage{}) {
			out = append(out, HourUsage{Hour: h, Usage: u})
		}
	}
	return out
}

// KindOf is the stretch a state belongs to: awake while the provider bills it (starting,
// running, resuming, unknown), asleep while it holds a snapshot (paused, resume_failed), none
// once gone.
func KindOf(s sandbox.Status) (db.UsageKind, bool) {
	switch s {
	case sandbox.Starting, sandbox.Running, sandbox.Resuming, sandbox.Unknown:
		return db.UsageKindAwake, true
	case sandbox.Paused, sandbox.ResumeFailed:
		return db.UsageKindAsleep, true
	}
	return "", false
}
