package ops

import (
	"context"
	"time"

	"sandman/db"
)

// shards spreads the hourly rollup of one hour over this many rows, so transactions closing
// stretches at once rarely wait for each other.
const shards = 16

func shardOf(sb db.Sandbox) int16 { return int16(sb.ID[15] % shards) }

// Record keeps the sandbox's stretches in step with a change of its state, in the change's
// transaction: a move between awake, asleep and gone closes the open stretch (adding its hours
// to the rollup) and opens the next. before is nil for a new sandbox. Moves within a class
// (running → unknown, paused → resume_failed) change nothing.
func Record(ctx context.Context, tx db.Tx, before *db.Sandbox, after db.Sandbox, now time.Time) error {
	to, opens := KindOf(after.Status)
	var closed *db.UsageInterval
	if before != nil {
		from, open := KindOf(before.Status)
		if open == opens && from == to {
			return nil
		}
		if open {
			iv, err := tx.CloseUsageInterval(ctx, db.CloseUsageIntervalParams{SandboxID: after.ID, EndedAt: now})
			switch {
			case err == nil:
				closed = &iv
				if err := addHours(ctx, tx, shardOf(after), Split(IntervalOf(iv))); err != nil {
					return err
				}
			case !db.IsNotFound(err):
				return err
			}
		}
	}
	if !opens {
		return nil
	}
	p := db.OpenUsageIntervalParams{SandboxID: after.ID, Kind: to, StartedAt: now, Vcpus: after.Vcpus, MemoryMib: after.MemoryMib}
	if to == db.UsageKindAsleep {
		until := countsUntil(after, closed, now)
		p.CountsUntil = &until
	}
	return tx.OpenUsageInterval(ctx, p)
}

// countsUntil is where a sleep starting now stops saving: the end of the lifetime the sandbox
// had when it was paused (its end_at; a pause leaves it as it was), or when the row has none,
// the start of the stretch awake it leaves plus the lifetime the provider gives at each start.
// Never before now: a sleep past its lifetime saves nothing.
func countsUntil(sb db.Sandbox, awake *db.UsageInterval, now time.Time) time.Time {
	var end time.Time
	switch {
	case sb.EndAt != nil:
		end = *sb.EndAt
	case awake != nil:
		end = awake.StartedAt.Add(time.Duration(sb.LifetimeSeconds) * time.Second)
	}
	if end.Before(now) {
		return now
	}
	return end
}

func addHours(ctx context.Context, tx db.Tx, shard int16, hours []HourUsage) error {
	if len(hours) == 0 {
		return nil
	}
	p := db.AddUsageHoursParams{Shard: shard}
	for _, h := range hours {
		p.Hours = append(p.Hours, h.Hour)
		p.AwakeSeconds = append(p.AwakeSeconds, h.AwakeSeconds)
		p.AwakeVcpuSeconds = append(p.AwakeVcpuSeconds, h.AwakeVCPUSeconds)
		p.AwakeGibSeconds = append(p.AwakeGibSeconds, h.AwakeGiBSeconds)
		p.SavedVcpuSeconds = append(p.SavedVcpuSeconds, h.SavedVCPUSeconds)
		p.SavedGibSeconds = append(p.SavedGibSeconds, h.SavedGiBSeconds)
	}
	return tx.AddUsageHours(ctx, p)
}
