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
// to the rollup) and opens the next, in one statement (MoveUsageInterval, which also sets where
// a sleep stops saving). before is nil for a new sandbox. Moves within a class (running →
// unknown, paused → resume_failed) change nothing.
func Record(ctx context.Context, tx db.Tx, before *db.Sandbox, after db.Sandbox, now time.Time) error {
	p := db.MoveUsageIntervalParams{SandboxID: after.ID, Now: now, EndAt: after.EndAt, LifetimeSeconds: after.LifetimeSeconds,
		Vcpus: after.Vcpus, MemoryMib: after.MemoryMib}
	to, opens := KindOf(after.Status)
	if opens {
		p.Kind = &to
	}
	if before != nil {
		from, open := KindOf(before.Status)
		if open == opens && from == to {
			return nil
		}
		p.Close = open
	}
	if !p.Close && !opens {
		return nil
	}
	closed, err := tx.MoveUsageInterval(ctx, p)
	if db.IsNotFound(err) {
		return nil // nothing was open
	}
	if err != nil {
		return err
	}
	return addHours(ctx, tx, shardOf(after), Split(IntervalOf(db.UsageInterval(closed))))
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
