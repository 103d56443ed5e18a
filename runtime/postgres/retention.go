package postgres

import (
	"context"
	"time"

	"github.com/belfry/belfry/runtime/engine"
)

// SlotRetentionDefault is how long slot rows are kept by default: far
// longer than any schedule's grace plus a skew margin.
const SlotRetentionDefault = 24 * time.Hour

// pruneEvery is how often the leader prunes the slot table.
const pruneEvery = time.Minute

// PruneSlots deletes the slot rows that can no longer be attempted (see
// the package doc's retention rule): those whose slot is older than keep
// by the database's clock and whose own keep_until (slot plus the task's
// Retention, which the core sizes to the slot's grace, misfire window and
// skew) has passed, but never the newest row of a schedule or member,
// which misfire=latest may attempt until the next slot; and the
// manual-run rows inserted more than keep ago whose keep_until has
// passed. keep is a floor under every row's own window. It deletes in
// batches, each committed, until none is left or ctx ends, and returns
// the rows deleted.
func (e *Engine) PruneSlots(ctx context.Context, keep time.Duration) (int64, error) {
	n, err := e.pruneBatches(ctx, `DELETE FROM belfry_slot WHERE ctid = ANY(ARRAY(
		SELECT s.ctid FROM belfry_slot s WHERE s.namespace = $1
			AND s.slot < clock_timestamp() - $2 * interval '1 millisecond'
			AND (s.keep_until IS NULL OR s.keep_until < clock_timestamp())
			AND EXISTS (SELECT 1 FROM belfry_slot newer WHERE newer.namespace = s.namespace AND newer.schedule = s.schedule
				AND newer.member = s.member AND newer.slot > s.slot)
		LIMIT $3))`, e.ns, keep.Milliseconds())
	if err != nil {
		return n, err
	}
	manual, err := e.pruneBatches(ctx, `DELETE FROM belfry_manual WHERE ctid = ANY(ARRAY(
		SELECT ctid FROM belfry_manual WHERE namespace = $1
			AND inserted_at < clock_timestamp() - $2 * interval '1 millisecond'
			AND (keep_until IS NULL OR keep_until < clock_timestamp())
		LIMIT $3))`, e.ns, keep.Milliseconds())
	return n + manual, err
}

// pruneBatch is how many rows one statement of a prune deletes: a
// backlog goes in many short statements, each committed, rather than in
// one that a time limit could end before it committed anything.
const pruneBatch = 5000

// pruneBudget bounds one round of prunes; a backlog left over is taken
// up by the next round, from where this one stopped.
const pruneBudget = pruneEvery / 2

// pruneBatches runs deleteSQL, which deletes at most $3 rows of namespace
// $1 older than $2 ms, until it deletes fewer than a batch or ctx ends,
// and returns the rows deleted.
func (e *Engine) pruneBatches(ctx context.Context, deleteSQL string, ns string, olderMS int64) (int64, error) {
	var n int64
	for {
		tag, err := e.pool.Exec(ctx, deleteSQL, ns, olderMS, pruneBatch)
		if err != nil {
			return n, err
		}
		n += tag.RowsAffected()
		if tag.RowsAffected() < pruneBatch {
			return n, nil
		}
	}
}

// recordPruneEvery is how often the leader deletes expired records: a
// record outlives its TTL by at most this long. Far rarer than the slot
// prune: the TTL is days.
const recordPruneEvery = time.Hour

// PruneRecords deletes the records whose last write is older than the
// runtime's record TTL (engine.Config.RecordTTL) by the database's clock,
// as the Redis engine's records expire: a record leaves with its history's
// trim, and a schedule that stopped writing records (removed from the
// code, or firing less often than the TTL) keeps none past it. It returns
// the records deleted.
func (e *Engine) PruneRecords(ctx context.Context) (int64, error) {
	return e.pruneBatches(ctx, `DELETE FROM belfry_record WHERE ctid = ANY(ARRAY(
		SELECT ctid FROM belfry_record WHERE namespace = $1
			AND updated_at < clock_timestamp() - $2 * interval '1 millisecond'
		LIMIT $3))`, e.ns, e.rt.RecordTTL.Milliseconds())
}

// PruneProgress deletes the progress of occurrences not written for
// engine.ProgressRetention by the database's clock, as the Redis engine's
// progress expires, and then the unfinished work of scopes whose
// occurrence's progress is gone: a next occurrence that took that up
// would start it over from nothing. It returns the progress rows deleted.
func (e *Engine) PruneProgress(ctx context.Context) (int64, error) {
	n, err := e.pruneBatches(ctx, `DELETE FROM belfry_progress WHERE ctid = ANY(ARRAY(
		SELECT ctid FROM belfry_progress WHERE namespace = $1
			AND updated_at < clock_timestamp() - $2 * interval '1 millisecond'
		LIMIT $3))`, e.ns, engine.ProgressRetention.Milliseconds())
	if err != nil {
		return n, err
	}
	_, err = e.pool.Exec(ctx, `DELETE FROM belfry_unfinished u WHERE u.namespace = $1
		AND NOT EXISTS (SELECT 1 FROM belfry_progress p WHERE p.namespace = u.namespace AND p.occurrence_id = u.occurrence_id)`, e.ns)
	return n, err
}

// pruneIfDue has the leader prune the slot table about every pruneEvery,
// and the records and progress about every recordPruneEvery.
func (l *election) pruneIfDue(ctx context.Context) {
	l.mu.Lock()
	now := time.Now()
	slots := l.term != 0 && now.Sub(l.lastPrune) >= pruneEvery
	if slots {
		l.lastPrune = now
	}
	records := l.term != 0 && now.Sub(l.lastRecordPrune) >= recordPruneEvery
	if records {
		l.lastRecordPrune = now
	}
	l.mu.Unlock()
	if !slots && !records {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(ctx, pruneBudget)
		defer cancel()
		if records {
			if _, err := l.e.PruneRecords(ctx); err != nil {
				l.e.log.Warn("could not delete expired records; it is tried again later", "err", err)
			}
			if _, err := l.e.PruneProgress(ctx); err != nil {
				l.e.log.Warn("could not delete expired progress; it is tried again later", "err", err)
			}
		}
		if !slots {
			return
		}
		if _, err := l.e.PruneSlots(ctx, l.e.slotRetention); err != nil {
			l.e.log.Warn("could not prune the slot table; it is tried again later", "err", err)
		}
		// Heartbeats of replicas gone long ago are of no use to anyone.
		if _, err := l.e.pruneBatches(ctx, `DELETE FROM belfry_replica WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM belfry_replica WHERE namespace = $1 AND seen_at < clock_timestamp() - $2 * interval '1 millisecond'
			LIMIT $3))`, l.e.ns, l.e.slotRetention.Milliseconds()); err != nil {
			l.e.log.Warn("could not prune old heartbeats; it is tried again later", "err", err)
		}
	}()
}
