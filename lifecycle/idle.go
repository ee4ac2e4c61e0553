package lifecycle

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"sandman/db"
)

// The idle pause's deadline queue (docs/states.md, "Idle pause"). A running sandbox's deadline
// is its row's last activity plus the idle timeout, so the running rows, in order of last
// activity (an index of them: migration 00011), are the queue: nothing is queued per sandbox,
// and activity moves a deadline by the write it already makes. One loop, on one instance at a
// time, sleeps until the earliest deadline, claims every due sandbox in one transaction and
// queues its pause there; the pause job then pauses it as a click's does.

// idleQueueLock is the PostgreSQL advisory lock whose holder runs the queue's loop. It is held
// by the loop's own session, so it is let go the moment that session ends: a stop, a crash or a
// lost connection, and a waiting instance takes over at once.
const idleQueueLock int64 = 0x53616e646d616e01 // "Sandman" and 1

const (
	// idleBatch is the most sandboxes one claim takes; a full batch is followed at once by the
	// next.
	idleBatch = 500
	// idleTick is the shortest sleep between claims: deadlines a few milliseconds apart are
	// claimed together rather than one wake-up each, and a due row held by another transaction
	// (an activity report being written) is looked at again this soon, not in a busy loop.
	idleTick = 25 * time.Millisecond
	// idleMaxSleep is the longest the loop sleeps without news: it then looks again for what no
	// notification announces (a pause whose worker went away, pauseJobTimeout after it was asked
	// for; a row edited by hand).
	idleMaxSleep = 10 * time.Second
)

// idleWake tells the queue's loop, at tx's commit, that a deadline may now be nearer than the
// one it sleeps until: a sandbox runs again, or gave back a claim its activity made stale.
func idleWake(ctx context.Context, tx db.Tx) error {
	return tx.Notify(ctx, db.NotifyParams{Channel: db.IdleChannel})
}

// runIdleQueue runs the queue's loop whenever this instance holds the queue's lock, until ctx
// ends. Without the lock it waits for it: of any number of working instances, one claims.
func (s *Service) runIdleQueue(ctx context.Context) {
	for {
		err := s.idleQueue(ctx)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("idle queue interrupted; starting again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// idleQueue takes the queue's lock on a connection of its own, then claims due sandboxes and
// sleeps until the next deadline, woken early by IdleChannel, until ctx ends or the connection
// fails (the lock goes with it).
func (s *Service) idleQueue(ctx context.Context) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The lock is the session's: this connection never goes back to the pool, where it would
	// keep the lock for whoever borrowed it next.
	conn := pc.Hijack()
	defer func() {
		// Bounded: a database that stopped answering must not hold up the instance's stop.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	q := db.New(conn)
	if err := q.LockIdleQueue(ctx, idleQueueLock); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{db.IdleChannel}.Sanitize()); err != nil {
		return err
	}
	idle := s.cfg.IdleTimeout.Seconds()
	for {
		n, err := s.claimIdle(ctx, conn)
		if err != nil {
			return err
		}
		if n == idleBatch {
			continue
		}
		secs, err := q.NextIdleDeadline(ctx, db.NextIdleDeadlineParams{IdleSecs: idle, NoneSecs: idleMaxSleep.Seconds()})
		if err != nil {
			return err
		}
		wait := min(max(time.Duration(secs*float64(time.Second)), idleTick), idleMaxSleep)
		wctx, cancel := context.WithTimeout(ctx, wait)
		_, err = conn.WaitForNotification(wctx)
		cancel()
		if err != nil && (ctx.Err() != nil || !errors.Is(wctx.Err(), context.DeadlineExceeded)) {
			return err
		}
	}
}

// claimIdle claims the due sandboxes, earliest deadline first, and queues each one's idle pause
// in the same transaction: a claim is never without its job, nor a job without its claim.
func (s *Service) claimIdle(ctx context.Context, conn *pgx.Conn) (int, error) {
	var due []db.ClaimIdleSandboxesRow
	err := db.InTx(ctx, conn, func(tx db.Tx) error {
		var err error
		due, err = tx.ClaimIdleSandboxes(ctx, db.ClaimIdleSandboxesParams{IdleSecs: s.cfg.IdleTimeout.Seconds(),
			StaleSecs: pauseJobTimeout.Seconds(), MaxRows: idleBatch})
		if err != nil || len(due) == 0 {
			return err
		}
		jobs := make([]river.InsertManyParams, len(due))
		for i, d := range due {
			jobs[i] = river.InsertManyParams{Args: PauseArgs{SandboxID: d.ID, Version: d.Version, Idle: true}}
		}
		_, err = s.river.InsertManyTx(ctx, tx.Pgx(), jobs)
		return err
	})
	if err != nil {
		return 0, err
	}
	for _, d := range due {
		s.metrics.idleLag.Observe(max(d.LagSecs, 0))
	}
	return len(due), nil
}

// touchedSinceClaim reports whether someone looked at sb after its idle pause was asked for (the
// claim, or the pause job's last attempt): it is no longer due. Both times are the database's.
func touchedSinceClaim(sb db.Sandbox) bool {
	return sb.PauseRequestedAt != nil && sb.LastActiveAt.After(*sb.PauseRequestedAt)
}

// returnToIdleQueue gives back the claim of a sandbox touched since: the queue takes it again at
// its new deadline.
func (s *Service) returnToIdleQueue(ctx context.Context, sb db.Sandbox) error {
	return db.InTx(ctx, s.pool, func(tx db.Tx) error {
		if err := tx.ClearSandboxPauseRequested(ctx, db.ClearSandboxPauseRequestedParams{ID: sb.ID, Version: sb.Version}); err != nil {
			return err
		}
		return idleWake(ctx, tx)
	})
}
