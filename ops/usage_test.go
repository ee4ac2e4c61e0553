package ops

import (
	"math"
	"testing"
	"time"

	"sandman/db"
)

// What sleeping saves, on a table of sleeps with hand-computed amounts (docs/operations.md,
// "What savings are measured against"). A sandbox of 2 vCPUs and 512 MiB costs
// 2 × $0.0504 + 0.5 × $0.0162 = $0.1089 an hour awake at the default rates.
func TestSavingsArithmetic(t *testing.T) {
	t.Parallel()
	at := func(day, h, m int) time.Time { return time.Date(2026, 1, day, h, m, 0, 0, time.UTC) }
	rates, size := DefaultConfig().Rates, DefaultConfig().Size
	sleep := func(start, end, countsUntil time.Time) Interval {
		return Interval{Kind: db.UsageKindAsleep, Start: start, End: end, CountsUntil: countsUntil, VCPUs: size.VCPUs, MemoryMiB: size.MemoryMiB}
	}
	day := [2]time.Time{at(2, 0, 0), at(3, 0, 0)} // Jan 2, midnight to midnight
	tests := []struct {
		name      string
		iv        Interval
		from, to  time.Time // the period; an open sleep counts until to ("now")
		wantSaved float64
		wantSpent float64
	}{
		{"open, half an hour so far", sleep(at(2, 10, 0), time.Time{}, at(2, 11, 0)), day[0], at(2, 10, 30), 0.05445, 0},
		{"closed by a resume after 20 min", sleep(at(2, 10, 0), at(2, 10, 20), at(2, 11, 0)), day[0], day[1], 0.0363, 0},
		{"capped at the lifetime it had left (45 min of a 4 h sleep)", sleep(at(2, 10, 0), at(2, 14, 0), at(2, 10, 45)), day[0], day[1], 0.081675, 0},
		{"open and capped: an hour asleep, 15 min of lifetime left", sleep(at(2, 10, 0), time.Time{}, at(2, 10, 15)), day[0], at(2, 11, 0), 0.027225, 0},
		{"spanning midnight: only the half hour after it is Jan 2's", sleep(at(1, 23, 30), at(2, 0, 30), at(2, 2, 0)), day[0], day[1], 0.05445, 0},
		{"spanning midnight: the half hour before it is Jan 1's", sleep(at(1, 23, 30), at(2, 0, 30), at(2, 2, 0)), at(1, 0, 0), day[0], 0.05445, 0},
		{"killed while asleep after 10 min", sleep(at(2, 10, 0), at(2, 10, 10), at(2, 11, 0)), day[0], day[1], 0.01815, 0},
		{"paused past its lifetime: saves nothing", sleep(at(2, 10, 0), at(2, 12, 0), at(2, 10, 0)), day[0], day[1], 0, 0},
		{"before the period: nothing", sleep(at(1, 10, 0), at(1, 11, 0), at(1, 12, 0)), day[0], day[1], 0, 0},
		{"awake half an hour: spent, not saved",
			Interval{Kind: db.UsageKindAwake, Start: at(2, 10, 0), End: at(2, 10, 30), VCPUs: size.VCPUs, MemoryMiB: size.MemoryMiB}, day[0], day[1], 0, 0.05445},
		{"a bigger sandbox (8 vCPUs, 2 GiB) asleep an hour",
			Interval{Kind: db.UsageKindAsleep, Start: at(2, 10, 0), End: at(2, 11, 0), CountsUntil: at(2, 12, 0), VCPUs: 8, MemoryMiB: 2048}, day[0], day[1], 0.4356, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := tt.iv.Within(tt.from, tt.to)
			if got := rates.Saved(u); math.Abs(got-tt.wantSaved) > 1e-9 {
				t.Errorf("saved $%.6f, want $%.6f", got, tt.wantSaved)
			}
			if got := rates.Spent(u); math.Abs(got-tt.wantSpent) > 1e-9 {
				t.Errorf("spent $%.6f, want $%.6f", got, tt.wantSpent)
			}
			if tt.iv.End.IsZero() {
				return
			}
			// The hourly rollup of a closed stretch adds up to the same amounts.
			var sum Usage
			for _, h := range Split(tt.iv) {
				if !h.Hour.Before(tt.from) && h.Hour.Before(tt.to) {
					sum = sum.Add(h.Usage)
				}
			}
			if math.Abs(rates.Saved(sum)-tt.wantSaved) > 1e-9 || math.Abs(rates.Spent(sum)-tt.wantSpent) > 1e-9 {
				t.Errorf("its hours add up to saved $%.6f, spent $%.6f", rates.Saved(sum), rates.Spent(sum))
			}
		})
	}
}

// A stretch is cut at clock hours, and the pieces start on the hour.
func TestSplitCutsAtHours(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 23, 30, 0, 0, time.UTC)
	iv := Interval{Kind: db.UsageKindAwake, Start: start, End: start.Add(90 * time.Minute), VCPUs: 1, MemoryMiB: 1024}
	hours := Split(iv)
	want := []struct {
		hour    time.Time
		seconds float64
	}{{start.Truncate(time.Hour), 1800}, {start.Add(30 * time.Minute), 3600}}
	if len(hours) != len(want) {
		t.Fatalf("%d pieces, want %d: %+v", len(hours), len(want), hours)
	}
	for i, w := range want {
		if !hours[i].Hour.Equal(w.hour) || hours[i].AwakeSeconds != w.seconds || hours[i].AwakeGiBSeconds != w.seconds {
			t.Errorf("piece %d: %v %vs, want %v %vs", i, hours[i].Hour, hours[i].AwakeSeconds, w.hour, w.seconds)
		}
	}
}
