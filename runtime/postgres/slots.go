package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// errFencedOut is a write refused because its term ended.
var errFencedOut = fmt.Errorf("%w: the term ended", engine.ErrNotLeader)

// fenceSQL counts 1 when term $2 is still the namespace's live term, 0
// otherwise: the check every fenced write makes, once, first in its own
// transaction. FOR SHARE holds the lease row until the transaction ends,
// so that a takeover (an UPDATE of that row) waits for a write its check
// let through: no write of a term commits after the next term began. A
// takeover that came first is seen, and the write refused whole.
const fenceSQL = `SELECT count(*) FROM (SELECT 1 FROM belfry_leader
    WHERE namespace = $1 AND term = $2 AND expires_at > clock_timestamp() FOR SHARE) AS live`

// parseHandedOut reads a number the engine handed out as a string: a term
// (Current) or a pause version (PauseStatesAhead's token). Any other string
// is -1, which no term and no version is: a write that names it matches
// none.
func parseHandedOut(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// checkFence fails with errFencedOut unless term is the live term, read in
// tx.
func (e *Engine) checkFence(ctx context.Context, tx pgx.Tx, term string) error {
	var live int
	if err := tx.QueryRow(ctx, fenceSQL, e.ns, parseHandedOut(term)).Scan(&live); err != nil {
		return err
	}
	if live == 0 {
		return errFencedOut
	}
	return nil
}

// occurrenceArgs are a River job's args: the occurrence's payload as it
// is (registry.EncodeOccurrence's JSON), under the schedule's name as
// the job's kind.
type occurrenceArgs struct {
	kind    string
	payload json.RawMessage
}

func (a occurrenceArgs) Kind() string                 { return a.kind }
func (a occurrenceArgs) MarshalJSON() ([]byte, error) { return a.payload, nil }
func (a *occurrenceArgs) UnmarshalJSON(b []byte) error {
	a.payload = append(a.payload[:0], b...)
	return nil
}

// jobMetadata is what a River job carries besides its args: belfry_key
// (occ.Key(), so riverui and SQL show which occurrence a job is), the
// occurrence ID, and the headers the enqueue's observer asked for.
type jobMetadata struct {
	Key     string            `json:"belfry_key"`
	ID      string            `json:"belfry_id"`
	Headers map[string]string `json:"belfry_headers,omitempty"`
}

// slotFreeSQL is the scheduled occurrences, of IDs $2, that have no slot
// row yet as far as committed rows show: those whose jobs an enqueue
// prepares. It decides nothing (slotInsertSQL does); it spares the jobs of
// slots already taken, as a new leader's repeat of its predecessor's last
// slots is. A slot's row is found by its occurrence ID, which names the
// slot, one probe of the occurrence index each (OFFSET 0 keeps the planner
// from making it a join of its choosing, as in membersByKeySQL): by the
// slot's own columns the planner may pick the retention index, and read
// every row of the slot for each one.
const slotFreeSQL = `
SELECT u.id FROM unnest($2::text[]) AS u(id)
WHERE NOT EXISTS (SELECT 1 FROM belfry_slot s WHERE s.namespace = $1 AND s.occurrence_id = u.id OFFSET 0)`

// slotInsertSQL inserts the slots' rows of the scheduled occurrences with
// their River jobs' IDs, each once whoever tries, kept until their slot
// plus their task's Retention at least (keep, ms; see PruneSlots), and
// returns the IDs of the rows that went in (the transaction's fenceSQL,
// not the insert, checks the term). Rows go in key order, so that two
// planners inserting the same slots wait for each other rather than
// deadlock.
const slotInsertSQL = `
INSERT INTO belfry_slot (namespace, schedule, member, slot, occurrence_id, keep_until, job_id)
SELECT $1, u.schedule, u.member, to_timestamp(u.slot), u.id, to_timestamp(u.slot) + u.keep * interval '1 millisecond', u.job
FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[]) AS u(schedule, member, slot, id, keep, job)
ORDER BY u.schedule, u.member, u.slot
ON CONFLICT DO NOTHING
RETURNING occurrence_id`

// manualInsertSQL is slotInsertSQL for manual runs, keyed by their
// occurrence ID and kept from their insert.
const manualInsertSQL = `
INSERT INTO belfry_manual (namespace, schedule, member, slot, occurrence_id, keep_until)
SELECT $1, u.schedule, u.member, u.slot, u.id, clock_timestamp() + u.keep * interval '1 millisecond'
FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::bigint[]) AS u(schedule, member, slot, id, keep)
ORDER BY u.id
ON CONFLICT DO NOTHING
RETURNING occurrence_id`

// cursorRaiseSQL raises schedules' cursors (never lowers them) and sets
// the last enqueued ID of those whose slot is at least the cursor.
const cursorRaiseSQL = `
INSERT INTO belfry_cursor AS c (namespace, schedule, member, slot, last_id)
SELECT $1, u.schedule, '', to_timestamp(u.slot), u.last_id FROM unnest($2::text[], $3::bigint[], $4::text[]) AS u(schedule, slot, last_id)
ORDER BY u.schedule
ON CONFLICT (namespace, schedule, member) DO UPDATE SET
    last_id = CASE WHEN EXCLUDED.last_id <> '' AND EXCLUDED.slot >= c.slot THEN EXCLUDED.last_id ELSE c.last_id END,
    slot = greatest(c.slot, EXCLUDED.slot),
    updated_at = now()`

// familyShareSQL holds, until the enqueue commits, the lock of each
// family ($2) whose members' slots it inserts, shared with other
// enqueues. SetMembers takes a family's lock alone (familyLockSQL) before
// it asks whether a moved member's slot was enqueued (its change floor):
// it waits for an enqueue under way, and then sees its slot rows, rather
// than miss an uncommitted one. A lock a family, not a lock a member's
// row: locking a row writes its page and the write-ahead log, once for
// each member of a page. Families are locked in name order.
const familyShareSQL = `SELECT count(pg_advisory_xact_lock_shared(` + familyLockKey + `))
    FROM (SELECT f FROM unnest($2::text[]) AS u(f) ORDER BY f) AS u`

// familyLockKey is the advisory lock key of family f in namespace $1:
// a hash, so a service's own advisory locks may share a key with it, which
// makes one wait for the other, never wrong.
const familyLockKey = `hashtextextended('belfry family ' || length($1) || ':' || $1 || ':' || f, 0)`

// familyLockSQL takes family $2's lock alone (see familyShareSQL).
const familyLockSQL = `SELECT pg_advisory_xact_lock(` + familyLockKey + `) FROM (VALUES ($2::text)) AS u(f)`

// EnqueueAll inserts, in one transaction, each item's row in the slot
// table (a scheduled occurrence, by schedule, member and slot) or in
// belfry_manual (a manual run, by its ID), with ON CONFLICT DO NOTHING,
// and commits River's job only with a row that went in; the items'
// cursors rise in the same transaction. A scheduled slot's job is
// inserted first, for a slot with no committed row (slotFreeSQL), and its
// row then carries the job's ID: a row that another transaction took
// meanwhile takes the job out again before the commit. Under fence the transaction first checks that
// fence's term is the live one, holding the lease row (fenceSQL): a late
// transaction of an ended term is refused whole, rows, jobs and cursors,
// and a takeover waits for a transaction its check let through.
func (e *Engine) EnqueueAll(ctx context.Context, fence *engine.Fence, items []engine.Enqueue) []engine.Result {
	results := make([]engine.Result, len(items))
	occs := make([]registry.Occurrence, len(items))
	var live []int
	for i, it := range items {
		occ, err := registry.DecodeOccurrence(it.Task.Payload)
		if err == nil && occ.ID != it.Task.ID {
			err = fmt.Errorf("task %s carries occurrence %s", it.Task.ID, occ.ID)
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		occs[i] = occ
		live = append(live, i)
	}
	if len(live) == 0 {
		return results
	}
	var term any      // NULL: unfenced
	var pauses *int64 // nil: the pauses were read when the slots came due
	if fence != nil {
		term = parseHandedOut(fence.Term)
		if fence.Pauses != "" {
			v := parseHandedOut(fence.Pauses)
			pauses = &v
		}
	}
	inserted, err := engine.Obey(ctx, func(ctx context.Context) (map[string]bool, error) {
		return e.enqueueTx(ctx, term, pauses, items, occs, live)
	})
	if errors.Is(err, errFencedOut) && fence != nil {
		fence.Reject()
	}
	for _, i := range live {
		switch id := items[i].Task.ID; {
		case err != nil:
			results[i].Err = err
		case inserted[id]:
			results[i].Inserted = true
			delete(inserted, id) // the same ID twice is inserted once
		}
	}
	return results
}

// enqueueTx is EnqueueAll's transaction; it returns the IDs inserted.
// With pauses (the pause version the slots were planned with) it inserts
// nothing once the version moved.
func (e *Engine) enqueueTx(ctx context.Context, term any, pauses *int64, items []engine.Enqueue, occs []registry.Occurrence, live []int) (map[string]bool, error) {
	var manual struct {
		schedules, members, ids []string
		keep                    []int64
		at                      []any
	}
	var slotIDs []string
	var marks struct {
		schedules, lastIDs []string
		slots              []int64
	}
	var families []string
	for _, i := range live {
		occ := occs[i]
		if occ.Manual {
			manual.schedules, manual.members, manual.ids = append(manual.schedules, occ.Schedule), append(manual.members, occ.Member), append(manual.ids, occ.ID)
			manual.at, manual.keep = append(manual.at, occ.Slot), append(manual.keep, items[i].Task.Retention.Milliseconds())
		} else {
			slotIDs = append(slotIDs, occ.ID)
		}
		if occ.Member != "" && !slices.Contains(families, occ.Schedule) {
			families = append(families, occ.Schedule) // a page is of one family, mostly
		}
		if m := items[i].Cursor; m.Schedule != "" && term != nil {
			marks.schedules, marks.slots, marks.lastIDs = append(marks.schedules, m.Schedule), append(marks.slots, m.Slot), append(marks.lastIDs, m.LastID)
		}
	}
	inserted := map[string]bool{}
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		termLive := 1
		if term != nil {
			b.Queue(fenceSQL, e.ns, term).QueryRow(func(row pgx.Row) error { return row.Scan(&termLive) })
		}
		var pausesNow int64
		if pauses != nil {
			b.Queue(pauseVersionSQL, e.ns).QueryRow(func(row pgx.Row) error { return row.Scan(&pausesNow) })
		}
		if len(families) > 0 {
			b.Queue(familyShareSQL, e.ns, families)
		}
		collect := func(into map[string]bool) func(pgx.Rows) error {
			return func(rows pgx.Rows) error {
				var id string
				_, err := pgx.ForEachRow(rows, []any{&id}, func() error { into[id] = true; return nil })
				return err
			}
		}
		free := map[string]bool{}
		if len(slotIDs) > 0 {
			b.Queue(slotFreeSQL, e.ns, slotIDs).Query(collect(free))
		}
		if len(manual.ids) > 0 {
			b.Queue(manualInsertSQL, e.ns, manual.schedules, manual.members, manual.at, manual.ids, manual.keep).Query(collect(inserted))
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if termLive == 0 {
			// The rows inserted after the check go with the rollback.
			return errFencedOut
		}
		if pauses != nil && pausesNow != *pauses {
			// A pause or resume committed since the slots were planned:
			// they are planned again, and this transaction rolls back.
			return engine.ErrPausesChanged
		}
		// A job for each manual row that went in and each free slot, each
		// ID once.
		var params []river.InsertManyParams
		var order []int
		seen := map[string]bool{}
		for _, i := range live {
			t := items[i].Task
			if seen[t.ID] || !(occs[i].Manual && inserted[t.ID] || !occs[i].Manual && free[t.ID]) {
				continue
			}
			seen[t.ID] = true
			meta, err := json.Marshal(jobMetadata{Key: occs[i].Key(), ID: t.ID, Headers: t.Headers})
			if err != nil {
				return err
			}
			params = append(params, river.InsertManyParams{Args: occurrenceArgs{kind: t.Type, payload: t.Payload},
				InsertOpts: &river.InsertOpts{Queue: t.Queue, MaxAttempts: t.MaxRetry + 1, Metadata: meta}})
			order = append(order, i)
		}
		if len(params) == 0 {
			if len(marks.schedules) == 0 {
				return nil
			}
			s, sl, l := raisedCursors(marks.schedules, marks.slots, marks.lastIDs)
			_, err := tx.Exec(ctx, cursorRaiseSQL, e.ns, s, sl, l)
			return err
		}
		res, err := e.river.InsertManyTx(ctx, tx, params)
		if err != nil {
			return fmt.Errorf("inserting River jobs: %w", err)
		}
		var take struct {
			schedules, members, ids []string
			unix, keep, jobs        []int64
		}
		var manualIDs []string
		var manualJobs []int64
		jobOf := map[string]int64{}
		for k, r := range res {
			i := order[k]
			occ, id := occs[i], items[i].Task.ID
			if occ.Manual {
				manualIDs, manualJobs = append(manualIDs, id), append(manualJobs, r.Job.ID)
				continue
			}
			jobOf[id] = r.Job.ID
			take.schedules, take.members, take.ids = append(take.schedules, occ.Schedule), append(take.members, occ.Member), append(take.ids, id)
			take.unix, take.keep, take.jobs = append(take.unix, occ.Slot.Unix()), append(take.keep, items[i].Task.Retention.Milliseconds()), append(take.jobs, r.Job.ID)
		}
		b = &pgx.Batch{}
		if len(take.ids) > 0 {
			b.Queue(slotInsertSQL, e.ns, take.schedules, take.members, take.unix, take.ids, take.keep, take.jobs).Query(collect(inserted))
		}
		if len(manualIDs) > 0 {
			b.Queue(`UPDATE belfry_manual m SET job_id = u.job FROM unnest($2::text[], $3::bigint[]) AS u(id, job)
				WHERE m.namespace = $1 AND m.occurrence_id = u.id`, e.ns, manualIDs, manualJobs)
		}
		if len(marks.schedules) > 0 {
			s, sl, l := raisedCursors(marks.schedules, marks.slots, marks.lastIDs)
			b.Queue(cursorRaiseSQL, e.ns, s, sl, l)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		// A slot that a transaction committed after the look above took
		// its row first: its job goes, in this transaction, never seen
		// by a worker (nor committed).
		var lost []int64
		for _, id := range take.ids {
			if !inserted[id] {
				lost = append(lost, jobOf[id])
			}
		}
		if len(lost) == 0 {
			return nil
		}
		tag, err := tx.Exec(ctx, `DELETE FROM river_job WHERE id = ANY($1)`, lost)
		if err == nil && tag.RowsAffected() != int64(len(lost)) {
			err = fmt.Errorf("deleting the River jobs of %d slots taken meanwhile: %d deleted", len(lost), tag.RowsAffected())
		}
		return err
	})
	return inserted, err
}

// raisedCursors folds marks of the same schedule into one: the highest
// slot, with the last ID of the newest mark that carried one (marks come
// in rising order), so that one statement raises each cursor once.
func raisedCursors(schedules []string, slots []int64, lastIDs []string) ([]string, []int64, []string) {
	at := map[string]int{}
	var s []string
	var sl []int64
	var l []string
	for i, name := range schedules {
		k, ok := at[name]
		if !ok {
			at[name] = len(s)
			s, sl, l = append(s, name), append(sl, slots[i]), append(l, lastIDs[i])
			continue
		}
		sl[k] = max(sl[k], slots[i])
		if lastIDs[i] != "" {
			l[k] = lastIDs[i]
		}
	}
	return s, sl, l
}

// Cursors reads the schedules' cursors.
func (e *Engine) Cursors(ctx context.Context, names []string) ([]int64, []bool, error) {
	cursors, ok := make([]int64, len(names)), make([]bool, len(names))
	rows, err := e.pool.Query(ctx, `SELECT schedule, extract(epoch FROM slot)::bigint FROM belfry_cursor
		WHERE namespace = $1 AND member = '' AND schedule = ANY($2)`, e.ns, names)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]int64{}
	var name string
	var slot int64
	if _, err := pgx.ForEachRow(rows, []any{&name, &slot}, func() error { byName[name] = slot; return nil }); err != nil {
		return nil, nil, err
	}
	for i, n := range names {
		cursors[i], ok[i] = byName[n]
	}
	return cursors, ok, nil
}

// InitCursors starts the schedules that have no cursor from now, noting
// when each was first seen; fenced.
func (e *Engine) InitCursors(ctx context.Context, term string, now int64, names []string) error {
	return e.inTx(ctx, func(tx pgx.Tx) error {
		if err := e.checkFence(ctx, tx, term); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `WITH ins AS (
				INSERT INTO belfry_cursor (namespace, schedule, member, slot)
				SELECT $1, n, '', to_timestamp($2) FROM unnest($3::text[]) AS n
				ON CONFLICT DO NOTHING RETURNING schedule)
			INSERT INTO belfry_counter (namespace, schedule, counter, value)
			SELECT $1, schedule, 'first_seen', $2 * 1000 FROM ins
			ON CONFLICT (namespace, schedule, counter) DO UPDATE SET value = EXCLUDED.value`, e.ns, now, names)
		return err
	})
}

// Commit writes the schedules' steps, fenced by term: cursors (never
// lowered), last IDs, records and counters, in one transaction.
func (e *Engine) Commit(ctx context.Context, term string, items []engine.Commit) error {
	return e.inTx(ctx, func(tx pgx.Tx) error {
		if err := e.checkFence(ctx, tx, term); err != nil {
			return err
		}
		b := &pgx.Batch{}
		var schedules, lastIDs []string
		var slots []int64
		for _, it := range items {
			schedules, slots, lastIDs = append(schedules, it.Name), append(slots, it.Cursor), append(lastIDs, it.LastID)
		}
		if len(schedules) > 0 {
			s, sl, l := raisedCursors(schedules, slots, lastIDs)
			b.Queue(cursorRaiseSQL, e.ns, s, sl, l)
		}
		e.queueRecords(b, items)
		e.queueCounts(b, items)
		return tx.SendBatch(ctx, b).Close()
	})
}

// LastID is the schedule's last enqueued occurrence ID.
func (e *Engine) LastID(ctx context.Context, name string) (string, error) {
	var id string
	err := e.pool.QueryRow(ctx, `SELECT last_id FROM belfry_cursor WHERE namespace = $1 AND schedule = $2 AND member = ''`, e.ns, name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// CommitFamily writes a family's step, fenced by term: each member's
// cursor and newest occurrence (members deleted meanwhile get none), the
// family's records and counters, and the bucket's cursor.
func (e *Engine) CommitFamily(ctx context.Context, term, family string, fam engine.Commit, ms []engine.MemberCommit, bucket, bucketCursor string) error {
	return e.inTx(ctx, func(tx pgx.Tx) error {
		if err := e.checkFence(ctx, tx, term); err != nil {
			return err
		}
		b := &pgx.Batch{}
		if len(ms) > 0 {
			at := map[string]int{}
			var keys, cursors, lasts []string
			var lastSlots []int64
			for _, m := range ms {
				if k, ok := at[m.Member]; ok {
					cursors[k] = m.Cursor
					if m.Last != "" && m.LastSlot > lastSlots[k] {
						lasts[k], lastSlots[k] = m.Last, m.LastSlot
					}
					continue
				}
				at[m.Member] = len(keys)
				keys, cursors, lasts, lastSlots = append(keys, m.Member), append(cursors, m.Cursor), append(lasts, m.Last), append(lastSlots, m.LastSlot)
			}
			// A member's cursor only rises (by its slot, "<slot> ..."), as
			// the bucket's does: a step computed from older state never
			// moves a cursor back.
			b.Queue(`UPDATE belfry_member m SET
					cursor = CASE WHEN m.cursor IS NULL OR split_part(u.c, ' ', 1)::bigint >= split_part(m.cursor, ' ', 1)::bigint THEN u.c ELSE m.cursor END,
					last = CASE WHEN u.l <> '' AND (m.last_slot IS NULL OR m.last_slot < u.s) THEN u.l ELSE m.last END,
					last_slot = CASE WHEN u.l <> '' AND (m.last_slot IS NULL OR m.last_slot < u.s) THEN u.s ELSE m.last_slot END
				FROM unnest($3::text[], $4::text[], $5::text[], $6::bigint[]) AS u(k, c, l, s)
				WHERE m.namespace = $1 AND m.family = $2 AND m.key = u.k`, e.ns, family, keys, cursors, lasts, lastSlots)
		}
		if bucketCursor != "" {
			slot, err := strconv.ParseInt(bucketCursor, 10, 64)
			if err != nil {
				return fmt.Errorf("bucket cursor %q: %w", bucketCursor, err)
			}
			b.Queue(`INSERT INTO belfry_bucket_cursor (namespace, family, bucket, slot) VALUES ($1, $2, $3, $4)
				ON CONFLICT (namespace, family, bucket) DO UPDATE SET slot = greatest(belfry_bucket_cursor.slot, EXCLUDED.slot)`, e.ns, family, bucket, slot)
		}
		fam.Name = family
		e.queueRecords(b, []engine.Commit{fam})
		e.queueCounts(b, []engine.Commit{fam})
		if b.Len() == 0 {
			return nil
		}
		return tx.SendBatch(ctx, b).Close()
	})
}

// BucketCursors reads the buckets' cursors, 0 for none.
func (e *Engine) BucketCursors(ctx context.Context, family string, buckets []string) ([]int64, error) {
	rows, err := e.pool.Query(ctx, `SELECT bucket, slot FROM belfry_bucket_cursor WHERE namespace = $1 AND family = $2 AND bucket = ANY($3)`,
		e.ns, family, buckets)
	if err != nil {
		return nil, err
	}
	byBucket := map[string]int64{}
	var bucket string
	var slot int64
	if _, err := pgx.ForEachRow(rows, []any{&bucket, &slot}, func() error { byBucket[bucket] = slot; return nil }); err != nil {
		return nil, err
	}
	out := make([]int64, len(buckets))
	for i, bk := range buckets {
		out[i] = byBucket[bk]
	}
	return out, nil
}

// jobStateSQL is the state of the River job of an occurrence ID, through
// the row that inserted it.
const jobStateSQL = `
SELECT j.state::text FROM (
    SELECT job_id FROM belfry_slot WHERE namespace = $1 AND occurrence_id = $2
    UNION ALL SELECT job_id FROM belfry_manual WHERE namespace = $1 AND occurrence_id = $2
) o JOIN river_job j ON j.id = o.job_id LIMIT 1`

// jobState is the state of id's River job, "" when there is none (never
// inserted, or deleted by River's cleaner).
func (e *Engine) jobState(ctx context.Context, id string) (string, error) {
	return engine.Obey(ctx, func(ctx context.Context) (string, error) {
		var state string
		err := e.pool.QueryRow(ctx, jobStateSQL, e.ns, id).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", nil
		}
		return state, err
	})
}

// CancelTask cancels id's River job for overlap=replace (River's
// JobCancel): a running one has its ctx cancelled and ends cancelled, not
// retried; one still waiting is cancelled at once.
func (e *Engine) CancelTask(ctx context.Context, _, id string) error {
	var jobID int64
	err := e.pool.QueryRow(ctx, `SELECT job_id FROM belfry_slot WHERE namespace = $1 AND occurrence_id = $2 AND job_id IS NOT NULL
    UNION ALL SELECT job_id FROM belfry_manual WHERE namespace = $1 AND occurrence_id = $2 AND job_id IS NOT NULL LIMIT 1`, e.ns, id).Scan(&jobID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = e.river.JobCancel(ctx, jobID)
	if errors.Is(err, river.ErrNotFound) {
		return nil
	}
	return err
}

// ReplacedBy reads the record's replaced_by column.
func (e *Engine) ReplacedBy(ctx context.Context, id string) (string, error) {
	var by string
	err := e.pool.QueryRow(ctx, `SELECT replaced_by FROM belfry_record WHERE namespace = $1 AND occurrence_id = $2`, e.ns, id).Scan(&by)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return by, err
}

// TaskExists reports whether id's River job is in, whatever its state.
func (e *Engine) TaskExists(ctx context.Context, _, id string) (bool, error) {
	state, err := e.jobState(ctx, id)
	return state != "", err
}

// TaskRunning reports whether id's River job is yet to finish: pending,
// scheduled, available, running or waiting to retry.
func (e *Engine) TaskRunning(ctx context.Context, _, id string) (bool, error) {
	state, err := e.jobState(ctx, id)
	switch state {
	case "pending", "scheduled", "available", "running", "retryable":
		return true, err
	}
	return false, err
}
