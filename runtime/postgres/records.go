package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/jackc/pgx/v5"
)

// Every statement that writes many rows writes them in key order, so that
// transactions writing the same rows (the leader's commit, a worker's
// step) wait for each other rather than deadlock.

// recordUpsertSQL writes the leader's or an operator's records: a record
// already written (a fast worker recorded it running, or its result)
// keeps its outcome, and every record takes its place (score) in its
// schedule's history. A missed, skipped or paused slot was never
// enqueued: its time is when it was recorded.
const recordUpsertSQL = `
INSERT INTO belfry_record AS r (namespace, occurrence_id, schedule, member, slot, manual, outcome, actor, enqueued_at, recorded_at, score, error)
SELECT $1, u.id, u.schedule, u.member, to_timestamp(u.slot), u.manual, u.outcome, u.actor,
       CASE WHEN u.outcome IN ('missed', 'skipped', 'paused', 'buffered') THEN NULL ELSE belfry_at(u.at) END,
       CASE WHEN u.outcome IN ('missed', 'skipped', 'paused', 'buffered') THEN belfry_at(u.at) END,
       u.score, u.error
FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::bool[], $7::text[], $8::text[], $9::bigint[], $10::bigint[], $11::text[])
    AS u(id, schedule, member, slot, manual, outcome, actor, at, score, error)
ORDER BY u.id
ON CONFLICT (namespace, occurrence_id) DO UPDATE SET
    schedule = EXCLUDED.schedule, slot = EXCLUDED.slot, manual = EXCLUDED.manual,
    enqueued_at = coalesce(EXCLUDED.enqueued_at, r.enqueued_at),
    recorded_at = coalesce(EXCLUDED.recorded_at, r.recorded_at),
    actor = CASE WHEN EXCLUDED.actor <> '' THEN EXCLUDED.actor ELSE r.actor END,
    member = CASE WHEN EXCLUDED.member <> '' THEN EXCLUDED.member ELSE r.member END,
    error = CASE WHEN EXCLUDED.error <> '' THEN EXCLUDED.error ELSE r.error END,
    score = EXCLUDED.score, updated_at = now()`

// trimSQL keeps each schedule's history at its limit, the newest kept.
const trimSQL = `
DELETE FROM belfry_record r
USING unnest($2::text[], $3::int[]) AS s(name, lim),
      LATERAL (SELECT occurrence_id FROM belfry_record WHERE namespace = $1 AND schedule = s.name
               ORDER BY score DESC OFFSET s.lim) old
WHERE r.namespace = $1 AND r.occurrence_id = old.occurrence_id`

// counterAddSQL adds to counts, keeps a last_* time at the later of the
// two and first_seen at the earlier.
const counterAddSQL = `
INSERT INTO belfry_counter AS c (namespace, schedule, counter, value)
SELECT $1, u.schedule, u.counter, u.value FROM unnest($2::text[], $3::text[], $4::bigint[]) AS u(schedule, counter, value)
ORDER BY u.schedule, u.counter
ON CONFLICT (namespace, schedule, counter) DO UPDATE SET value = CASE
    WHEN c.counter LIKE 'last\_%' THEN greatest(c.value, EXCLUDED.value)
    WHEN c.counter = 'first_seen' THEN CASE WHEN c.value = 0 OR (EXCLUDED.value <> 0 AND EXCLUDED.value < c.value) THEN EXCLUDED.value ELSE c.value END
    ELSE c.value + EXCLUDED.value END`

// counterSetSQL sets counters.
const counterSetSQL = `
INSERT INTO belfry_counter (namespace, schedule, counter, value)
SELECT $1, u.schedule, u.counter, u.value FROM unnest($2::text[], $3::text[], $4::bigint[]) AS u(schedule, counter, value)
ORDER BY u.schedule, u.counter
ON CONFLICT (namespace, schedule, counter) DO UPDATE SET value = EXCLUDED.value`

// queueRecords queues the writes of items' records and the trims of
// their histories on b.
func (e *Engine) queueRecords(b *pgx.Batch, items []engine.Commit) {
	at := map[string]int{}
	var ids, schedules, members, outcomes, actors, errs []string
	var slots, ats, scores []int64
	var manuals []bool
	var trimmed []string
	var limits []int32
	for _, it := range items {
		if len(it.Recs) > 0 && !slices.Contains(trimmed, it.Name) {
			trimmed, limits = append(trimmed, it.Name), append(limits, int32(e.limitOf(it.Name)))
		}
		for _, r := range it.Recs {
			k, ok := at[r.ID]
			if !ok {
				k = len(ids)
				at[r.ID] = k
				ids, schedules, members, outcomes, actors, errs = append(ids, ""), append(schedules, ""), append(members, ""), append(outcomes, ""), append(actors, ""), append(errs, "")
				slots, ats, scores, manuals = append(slots, 0), append(ats, 0), append(scores, 0), append(manuals, false)
				outcomes[k] = r.Outcome // the first write's outcome stands
			}
			ids[k], schedules[k], slots[k], manuals[k], ats[k], scores[k] = r.ID, it.Name, r.Slot, r.Manual, r.At, r.Score
			if r.Member != "" {
				members[k] = r.Member
			}
			if r.Actor != "" {
				actors[k] = r.Actor
			}
			if r.Error != "" {
				errs[k] = r.Error
			}
		}
	}
	if len(ids) == 0 {
		return
	}
	b.Queue(recordUpsertSQL, e.ns, ids, schedules, members, slots, manuals, outcomes, actors, ats, scores, errs)
	b.Queue(trimSQL, e.ns, trimmed, limits)
}

// queueCounts queues items' counter changes on b, folded into one change
// a schedule and counter.
func (e *Engine) queueCounts(b *pgx.Batch, items []engine.Commit) {
	type key struct{ schedule, counter string }
	folded := map[key]int64{}
	var order []key
	for _, it := range items {
		for c, n := range it.Counts {
			k := key{it.Name, c}
			old, ok := folded[k]
			if !ok {
				order = append(order, k)
				folded[k] = n
				continue
			}
			switch {
			case strings.HasPrefix(c, "last_"):
				folded[k] = max(old, n)
			case c == "first_seen":
				if old == 0 || (n != 0 && n < old) {
					folded[k] = n
				}
			default:
				folded[k] = old + n
			}
		}
	}
	if len(order) == 0 {
		return
	}
	var schedules, counters []string
	var values []int64
	for _, k := range order {
		schedules, counters, values = append(schedules, k.schedule), append(counters, k.counter), append(values, folded[k])
	}
	b.Queue(counterAddSQL, e.ns, schedules, counters, values)
}

// RecordManual records an operator's occurrence and counts it.
func (e *Engine) RecordManual(ctx context.Context, item engine.Commit) error {
	return e.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		e.queueRecords(b, []engine.Commit{item})
		e.queueCounts(b, []engine.Commit{item})
		if b.Len() == 0 {
			return nil
		}
		return tx.SendBatch(ctx, b).Close()
	})
}

// executionColumns are the record fields a worker's step writes, and how
// each is stored.
var executionColumns = map[string]columnKind{
	"outcome": textColumn, "error": textColumn, "replica": textColumn, "actor": textColumn, "member": textColumn,
	"max_retry": intColumn, "duration_ms": intColumn, "replaced_by": textColumn,
	"started_at": timeColumn, "finished_at": timeColumn, "enqueued_at": timeColumn, "recorded_at": timeColumn,
	"manual": boolColumn,
}

type columnKind int

const (
	textColumn columnKind = iota
	intColumn
	timeColumn // unix ms, 0 for none
	boolColumn // "1" for true
)

// RecordExecution writes a step of a worker's run: the counters always
// (the attempt ran), and the record unless a later attempt's stands (a
// handler that outlived its timeout returning while its retry runs). A
// worker may write before the leader's commit, or after the record left
// the history, so the record takes its place in the history (by slot)
// when it has none, and the history is trimmed as a commit trims it.
func (e *Engine) RecordExecution(ctx context.Context, x engine.Execution) error {
	cols := []string{"namespace", "occurrence_id", "schedule", "slot", "score", "attempt"}
	vals := []string{"$1", "$2", "$3", "to_timestamp($4)", "$5", "$6"}
	args := []any{e.ns, x.ID, x.Schedule, x.Slot.Unix(), x.Slot.UnixMilli(), x.Attempt}
	sets := []string{"schedule = EXCLUDED.schedule", "slot = EXCLUDED.slot", "attempt = EXCLUDED.attempt", "updated_at = now()"}
	for i := 0; i+1 < len(x.Fields); i += 2 {
		name, _ := x.Fields[i].(string)
		kind, ok := executionColumns[name]
		if !ok || slices.Contains(cols, name) {
			continue
		}
		v := x.Fields[i+1]
		args = append(args, nil)
		p := "$" + strconv.Itoa(len(args))
		switch kind {
		case textColumn:
			args[len(args)-1] = fmt.Sprint(v)
		case intColumn:
			args[len(args)-1] = toInt64(v)
			p += "::bigint"
		case timeColumn:
			args[len(args)-1] = toInt64(v)
			p = "belfry_at(NULLIF(" + p + "::bigint, 0))"
		case boolColumn:
			args[len(args)-1] = fmt.Sprint(v) == "1" || fmt.Sprint(v) == "true"
		}
		cols, vals = append(cols, name), append(vals, p)
		sets = append(sets, name+" = EXCLUDED."+name)
	}
	if !slices.Contains(cols, "outcome") {
		return fmt.Errorf("execution step of %s carries no outcome", x.ID)
	}
	b := &pgx.Batch{}
	var counts, lasts []string
	if x.Count != "" {
		counts = append(counts, x.Count)
	}
	for _, l := range []string{x.Last, x.AlsoLast} {
		if l != "" {
			lasts = append(lasts, l)
		}
	}
	if len(counts) > 0 {
		b.Queue(counterAddSQL, e.ns, []string{x.Schedule}, counts, []int64{1})
	}
	if len(lasts) > 0 {
		schedules, values := make([]string, len(lasts)), make([]int64, len(lasts))
		for i := range lasts {
			schedules[i], values[i] = x.Schedule, x.At.UnixMilli()
		}
		b.Queue(counterSetSQL, e.ns, schedules, lasts, values)
	}
	b.Queue(`INSERT INTO belfry_record AS r (`+strings.Join(cols, ", ")+`) VALUES (`+strings.Join(vals, ", ")+`)
		ON CONFLICT (namespace, occurrence_id) DO UPDATE SET `+strings.Join(sets, ", ")+`
		WHERE coalesce(r.attempt, -1) <= EXCLUDED.attempt`, args...)
	b.Queue(trimSQL, e.ns, []string{x.Schedule}, []int32{int32(e.limitOf(x.Schedule))})
	return e.inTx(ctx, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
}

func toInt64(v any) int64 {
	switch v := v.(type) {
	case int:
		return int64(v)
	case int64:
		return v
	case int32:
		return int64(v)
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	n, _ := strconv.ParseInt(fmt.Sprint(v), 10, 64)
	return n
}

// NoteExecution keeps the schedule's execution state in step with a
// worker's step: a start or a retry marks it active, a final failure
// failing, a success clears both.
func (e *Engine) NoteExecution(ctx context.Context, name, outcome string, atMS int64) error {
	var err error
	switch outcome {
	case "running", "retrying":
		_, err = e.pool.Exec(ctx, `INSERT INTO belfry_execution (namespace, schedule, active) VALUES ($1, $2, $3)
			ON CONFLICT (namespace, schedule) DO UPDATE SET active = EXCLUDED.active`, e.ns, name, outcome)
	case "failed":
		_, err = e.pool.Exec(ctx, `INSERT INTO belfry_execution (namespace, schedule, failing_since) VALUES ($1, $2, belfry_at($3))
			ON CONFLICT (namespace, schedule) DO UPDATE SET failing_since = EXCLUDED.failing_since, active = NULL`, e.ns, name, atMS)
	case "succeeded":
		_, err = e.pool.Exec(ctx, `DELETE FROM belfry_execution WHERE namespace = $1 AND schedule = $2`, e.ns, name)
	}
	return err
}

// ForgetExecution drops the schedule's execution state.
func (e *Engine) ForgetExecution(ctx context.Context, name string) (int64, error) {
	var n int64
	err := e.pool.QueryRow(ctx, `WITH gone AS (DELETE FROM belfry_execution WHERE namespace = $1 AND schedule = $2
			RETURNING (failing_since IS NOT NULL)::int + (active IS NOT NULL)::int AS fields)
		SELECT coalesce(sum(fields), 0) FROM gone`, e.ns, name).Scan(&n)
	return n, err
}

// History is the schedule's newest n record IDs, newest first.
func (e *Engine) History(ctx context.Context, name string, n int) ([]string, error) {
	rows, err := e.pool.Query(ctx, `SELECT occurrence_id FROM belfry_record WHERE namespace = $1 AND schedule = $2
		ORDER BY score DESC LIMIT $3`, e.ns, name, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// recordColumns are what scanRecord reads, in its order.
const recordColumns = `occurrence_id, schedule, outcome, error, replica, extract(epoch FROM slot)::bigint, manual,
    coalesce(belfry_ms(enqueued_at), 0), coalesce(belfry_ms(started_at), 0), coalesce(belfry_ms(finished_at), 0),
    coalesce(belfry_ms(recorded_at), 0), duration_ms, coalesce(attempt, 0), max_retry, actor, member`

func scanRecord(row pgx.CollectableRow) (engine.Record, error) {
	var r engine.Record
	err := row.Scan(&r.ID, &r.Schedule, &r.Outcome, &r.Error, &r.Replica, &r.Slot, &r.Manual,
		&r.EnqueuedAt, &r.StartedAt, &r.FinishedAt, &r.RecordedAt, &r.DurationMS, &r.Attempt, &r.MaxRetry, &r.Actor, &r.Member)
	return r, err
}

// Records reads the records of ids, in their order, skipping any gone.
func (e *Engine) Records(ctx context.Context, ids []string) ([]engine.Record, error) {
	rows, err := e.pool.Query(ctx, `SELECT `+recordColumns+` FROM belfry_record WHERE namespace = $1 AND occurrence_id = ANY($2)`, e.ns, ids)
	if err != nil {
		return nil, err
	}
	recs, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]engine.Record, len(recs))
	for _, r := range recs {
		byID[r.ID] = r
	}
	out := make([]engine.Record, 0, len(recs))
	for _, id := range ids {
		if r, ok := byID[id]; ok {
			out = append(out, r)
			delete(byID, id)
		}
	}
	return out, nil
}

// Known lists every schedule with a cursor, a pause or counters.
func (e *Engine) Known(ctx context.Context) ([]string, error) {
	rows, err := e.pool.Query(ctx, `SELECT schedule FROM belfry_cursor WHERE namespace = $1 AND member = ''
		UNION SELECT schedule FROM belfry_pause WHERE namespace = $1
		UNION SELECT schedule FROM belfry_counter WHERE namespace = $1`, e.ns)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Forget removes every trace of a schedule (and of a family's members)
// but its slot rows, which the slot table's retention removes.
func (e *Engine) Forget(ctx context.Context, name string) (int64, error) {
	var n int64
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		for _, q := range []string{
			`DELETE FROM belfry_cursor WHERE namespace = $1 AND schedule = $2`,
			`DELETE FROM belfry_counter WHERE namespace = $1 AND schedule = $2`,
			`DELETE FROM belfry_record WHERE namespace = $1 AND schedule = $2`,
			`DELETE FROM belfry_member WHERE namespace = $1 AND family = $2`,
			`DELETE FROM belfry_bucket WHERE namespace = $1 AND family = $2`,
			`DELETE FROM belfry_bucket_cursor WHERE namespace = $1 AND family = $2`,
			// Last: deleting a pause raises the namespace's pause version
			// (a trigger), held until the commit, which stalls every pause
			// and resume of the namespace meanwhile.
			`DELETE FROM belfry_pause WHERE namespace = $1 AND schedule = $2`,
			`DELETE FROM belfry_pause_window WHERE namespace = $1 AND schedule = $2`,
		} {
			tag, err := tx.Exec(ctx, q, e.ns, name)
			if err != nil {
				return err
			}
			n += tag.RowsAffected()
		}
		return nil // a pause deleted raised the pause version (a trigger)
	})
	return n, err
}

// lostKept bounds the losses kept.
const lostKept = 20

// RecordLost keeps a loss, newest first.
func (e *Engine) RecordLost(ctx context.Context, l engine.LostWrites) error {
	body, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return e.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO belfry_lost (namespace, body) VALUES ($1, $2)`, e.ns, body); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM belfry_lost WHERE namespace = $1 AND id NOT IN
			(SELECT id FROM belfry_lost WHERE namespace = $1 ORDER BY id DESC LIMIT $2)`, e.ns, lostKept)
		return err
	})
}

// Lost lists the kept losses, newest first.
func (e *Engine) Lost(ctx context.Context) ([]engine.LostWrites, error) {
	rows, err := e.pool.Query(ctx, `SELECT body FROM belfry_lost WHERE namespace = $1 ORDER BY id DESC`, e.ns)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (engine.LostWrites, error) {
		var l engine.LostWrites
		var body []byte
		if err := row.Scan(&body); err != nil {
			return l, err
		}
		return l, json.Unmarshal(body, &l)
	})
}
