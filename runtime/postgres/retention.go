package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// SlotRetentionDefault is how long slot rows are kept by default: far
// longer than any schedule's grace plus a skew margin.
const SlotRetentionDefault = 24 * time.Hour

// pruneEvery is how often the leader prunes the slot table.
const pruneEvery = time.Minute

// PruneSlots deletes the slot rows that can no longer be attempted (see
// the package doc's retention rule): those whose slot is older than keep
// by the database's clock, but never the newest row of a schedule or
// member, which misfire=latest may attempt until the next slot; and the
// manual-run rows inserted more than keep ago. keep must exceed every
// schedule's grace plus the runtime's SkewMargin. It returns the rows
// deleted.
func (e *Engine) PruneSlots(ctx context.Context, keep time.Duration) (int64, error) {
	var n int64
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM belfry_slot s WHERE s.namespace = $1
			AND s.slot < clock_timestamp() - $2 * interval '1 millisecond'
			AND EXISTS (SELECT 1 FROM belfry_slot newer WHERE newer.namespace = s.namespace AND newer.schedule = s.schedule
				AND newer.member = s.member AND newer.slot > s.slot)`, e.ns, keep.Milliseconds())
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		tag, err = tx.Exec(ctx, `DELETE FROM belfry_manual WHERE namespace = $1 AND inserted_at < clock_timestamp() - $2 * interval '1 millisecond'`,
			e.ns, keep.Milliseconds())
		n += tag.RowsAffected()
		return err
	})
	return n, err
}

// recordPruneEvery is how often the leader deletes expired records: a
// record outlives its TTL by at most this long. Far rarer than the slot
// prune: the TTL is days, and finding expired records reads every record
// of the namespace.
const recordPruneEvery = time.Hour

// PruneRecords deletes the records whose last write is older than the
// runtime's record TTL (engine.Config.RecordTTL) by the database's clock,
// as the Redis engine's records expire: a record leaves with its history's
// trim, and a schedule that stopped writing records (removed from the
// code, or firing less often than the TTL) keeps none past it. It returns
// the records deleted.
func (e *Engine) PruneRecords(ctx context.Context) (int64, error) {
	tag, err := e.pool.Exec(ctx, `DELETE FROM belfry_record WHERE namespace = $1
		AND updated_at < clock_timestamp() - $2 * interval '1 millisecond'`, e.ns, e.rt.RecordTTL.Milliseconds())
	return tag.RowsAffected(), err
}

// pruneIfDue has the leader prune the slot table about every pruneEvery,
// and the records about every recordPruneEvery.
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
		ctx, cancel := context.WithTimeout(ctx, l.callTimeout())
		defer cancel()
		if records {
			if _, err := l.e.PruneRecords(ctx); err != nil {
				l.e.log.Warn("could not delete expired records; it is tried again later", "err", err)
			}
		}
		if !slots {
			return
		}
		if _, err := l.e.PruneSlots(ctx, l.e.slotRetention); err != nil {
			l.e.log.Warn("could not prune the slot table; it is tried again later", "err", err)
		}
		// Heartbeats of replicas gone long ago are of no use to anyone.
		if _, err := l.e.pool.Exec(ctx, `DELETE FROM belfry_replica WHERE namespace = $1 AND seen_at < clock_timestamp() - $2 * interval '1 millisecond'`,
			l.e.ns, l.e.slotRetention.Milliseconds()); err != nil {
			l.e.log.Warn("could not prune old heartbeats; it is tried again later", "err", err)
		}
	}()
}
