package postgres

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/jackc/pgx/v5"
)

// A family's members are rows of belfry_member: zone and expr as given
// ('' for the family's), since (no slot at or before it runs), the
// member's pause, and the leader's cursor and the member's newest
// occurrence as package engine encodes them. belfry_bucket lists each
// (zone, expr) that has members with the version of the change that last
// put one there; belfry_family_version counts every change.

// memberColumns are what scanMember reads.
const memberColumns = `key, extract(epoch FROM since)::bigint, paused, zone, expr`

func scanMember(row pgx.CollectableRow) (engine.MemberValue, error) {
	var m engine.MemberValue
	err := row.Scan(&m.Key, &m.Since, &m.Paused, &m.Zone, &m.Expr)
	return m, err
}

// membersByKeySQL is the rows m of the family $2's members whose keys $3
// lists, looked up one key at a time through the primary key. OFFSET 0
// keeps the planner from turning the lookups into a join of its choosing:
// on a table not analyzed since it filled, and in the generic plan of a
// statement run often, it takes the family for a few rows and compares
// every member with every key (as it does "key = ANY($3)").
const membersByKeySQL = ` unnest($3::text[]) AS u(k) CROSS JOIN LATERAL
	(SELECT * FROM belfry_member WHERE namespace = $1 AND family = $2 AND key = u.k OFFSET 0) AS m`

// membersForUpdateSQL is membersByKeySQL with each row locked FOR UPDATE,
// in key order, each key once.
const membersForUpdateSQL = ` (SELECT DISTINCT k FROM unnest($3::text[]) AS u(k) ORDER BY k) AS u CROSS JOIN LATERAL
	(SELECT * FROM belfry_member WHERE namespace = $1 AND family = $2 AND key = u.k FOR UPDATE OFFSET 0) AS m`

// bumpVersionSQL counts a change to the namespace's members.
const bumpVersionSQL = `INSERT INTO belfry_family_version (namespace, version) VALUES ($1, 1)
	ON CONFLICT (namespace) DO UPDATE SET version = belfry_family_version.version + 1 RETURNING version`

// dropEmptyBucketsSQL removes the family's buckets left without members.
const dropEmptyBucketsSQL = `DELETE FROM belfry_bucket b WHERE b.namespace = $1 AND b.family = $2
	AND NOT EXISTS (SELECT 1 FROM belfry_member m WHERE m.namespace = $1 AND m.family = $2 AND m.zone = b.zone AND m.expr = b.expr)`

// SetMembers creates or updates members in one transaction that reads
// them (locked) and writes them, so what floor is given is what the write
// replaces: a member whose zone or expression changes takes floor's since
// (SinceIfTask when the slot floor names was enqueued by then). Without
// floor a member must keep its zone and expression (ErrMembersBusy if it
// has others now). A paused member keeps the pause it has (its reason,
// actor and start) unless replacePauses; a member that runs has none.
func (e *Engine) SetMembers(ctx context.Context, family string, now int64, replacePauses bool, ms []engine.SetMember, floor engine.ChangeFloor) ([]bool, error) {
	created := make([]bool, len(ms))
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		var version int64
		if err := tx.QueryRow(ctx, bumpVersionSQL, e.ns).Scan(&version); err != nil {
			return err
		}
		keys := make([]string, len(ms))
		for i, m := range ms {
			keys[i] = m.Key
		}
		rows, err := tx.Query(ctx, `SELECT `+memberColumns+`, coalesce(cursor, ''), paused_at IS NOT NULL FROM`+membersForUpdateSQL,
			e.ns, family, keys)
		if err != nil {
			return err
		}
		type stored struct {
			v      engine.MemberValue
			cursor string
		}
		old := map[string]stored{}
		var s stored
		if _, err := pgx.ForEachRow(rows, []any{&s.v.Key, &s.v.Since, &s.v.Paused, &s.v.Zone, &s.v.Expr, &s.cursor, new(bool)}, func() error {
			old[s.v.Key] = s
			return nil
		}); err != nil {
			return err
		}
		// A key given twice is written as its last, and created (if new)
		// at its first, as writing them one after another would.
		last := make(map[string]int, len(ms))
		for i, m := range ms {
			if _, ok := last[m.Key]; !ok {
				_, had := old[m.Key]
				created[i] = !had
			}
			last[m.Key] = i
		}
		var since, pausedAt []int64
		var paused []bool
		var rowKeys, zones, exprs, reasons, actors []string
		// The moved members whose floor depends on whether a slot was
		// enqueued: asked all at once, below.
		type askedFloor struct {
			k int // the member's index in since
			f engine.Floor
		}
		var asked []askedFloor
		var taskIDs []string
		for i, m := range ms {
			if last[m.Key] != i {
				continue
			}
			rowKeys, zones, exprs, paused = append(rowKeys, m.Key), append(zones, m.Zone), append(exprs, m.Expr), append(paused, m.Paused)
			reasons, actors, pausedAt = append(reasons, m.Pause.Reason), append(actors, m.Pause.Actor), append(pausedAt, m.Pause.At)
			was, ok := old[m.Key]
			if !ok {
				since = append(since, now)
				continue
			}
			since = append(since, was.v.Since)
			k := len(since) - 1
			if engine.BucketOf(was.v.Zone, was.v.Expr) == engine.BucketOf(m.Zone, m.Expr) {
				continue
			}
			if floor == nil {
				return engine.ErrMembersBusy
			}
			cur, hasCursor := engine.ParseCursor(was.cursor)
			f := floor(m, was.v, cur, hasCursor)
			if f.TaskID == "" {
				since[k] = max(since[k], f.Since)
				continue
			}
			asked, taskIDs = append(asked, askedFloor{k, f}), append(taskIDs, f.TaskID)
		}
		if len(asked) > 0 {
			enqueued, err := e.slotsTaken(ctx, tx, family, taskIDs)
			if err != nil {
				return err
			}
			for _, a := range asked {
				to := a.f.Since
				if enqueued[a.f.TaskID] {
					to = a.f.SinceIfTask
				}
				since[a.k] = max(since[a.k], to)
			}
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO belfry_member AS m (namespace, family, key, zone, expr, paused, pause_reason, pause_actor, paused_at, since)
			SELECT $1, $2, u.key, u.zone, u.expr, u.paused, u.reason, u.actor,
			       CASE WHEN u.paused THEN belfry_at(u.paused_at) END, to_timestamp(u.since)
			FROM unnest($3::text[], $4::text[], $5::text[], $6::bool[], $7::text[], $8::text[], $9::bigint[], $10::bigint[])
			    AS u(key, zone, expr, paused, reason, actor, paused_at, since)
			ON CONFLICT (namespace, family, key) DO UPDATE SET
			    zone = EXCLUDED.zone, expr = EXCLUDED.expr, since = EXCLUDED.since, paused = EXCLUDED.paused, updated_at = now(),
			    pause_reason = CASE WHEN NOT EXCLUDED.paused THEN '' WHEN m.paused_at IS NULL OR $11::bool THEN EXCLUDED.pause_reason ELSE m.pause_reason END,
			    pause_actor = CASE WHEN NOT EXCLUDED.paused THEN '' WHEN m.paused_at IS NULL OR $11::bool THEN EXCLUDED.pause_actor ELSE m.pause_actor END,
			    paused_at = CASE WHEN NOT EXCLUDED.paused THEN NULL WHEN m.paused_at IS NULL OR $11::bool THEN EXCLUDED.paused_at ELSE m.paused_at END`,
			e.ns, family, rowKeys, zones, exprs, paused, reasons, actors, pausedAt, since, replacePauses)
		b.Queue(`INSERT INTO belfry_bucket (namespace, family, zone, expr, version)
			SELECT DISTINCT $1, $2, u.zone, u.expr, $5::bigint FROM unnest($3::text[], $4::text[]) AS u(zone, expr)
			ON CONFLICT (namespace, family, zone, expr) DO UPDATE SET version = EXCLUDED.version`, e.ns, family, zones, exprs, version)
		b.Queue(dropEmptyBucketsSQL, e.ns, family)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return nil, err
	}
	n := 0
	for _, c := range created {
		if c {
			n++
		}
	}
	e.analyzeMembers(ctx, n)
	return created, nil
}

// slotsTaken says which of the occurrences ids have a slot row, once an
// enqueue of family's slots under way has committed: it takes the
// family's lock alone first (see familyShareSQL), held until tx ends, so
// that the answer counts an enqueue under way rather than miss its
// uncommitted rows. One statement for every id: the lock stalls the
// family's enqueues while it is held.
func (e *Engine) slotsTaken(ctx context.Context, tx pgx.Tx, family string, ids []string) (map[string]bool, error) {
	if _, err := tx.Exec(ctx, familyLockSQL, e.ns, family); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, slotFreeSQL, e.ns, ids)
	if err != nil {
		return nil, err
	}
	taken := make(map[string]bool, len(ids))
	for _, id := range ids {
		taken[id] = true
	}
	var id string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error { delete(taken, id); return nil })
	return taken, err
}

// analyzeMembers has Postgres's statistics of belfry_member follow the
// insert of n members, when they grew it by a tenth or more (or it was
// never analyzed), as autovacuum would if it runs and has come round.
// Without them the planner takes a family for a few rows, and reads
// every member's row of it for each member a page looks up: the leader's
// pages of a large, new family would take seconds each. A role that does
// not own the table gets a warning from Postgres, not an error, and its
// analyze is left to autovacuum.
func (e *Engine) analyzeMembers(ctx context.Context, n int) {
	if n == 0 {
		return
	}
	var rows float64
	if err := e.pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'belfry_member'::regclass`).Scan(&rows); err != nil {
		e.log.Warn("reading belfry_member's statistics", "err", err)
		return
	}
	if rows >= 0 && float64(n)*10 < rows {
		return
	}
	if _, err := e.pool.Exec(ctx, `ANALYZE belfry_member`); err != nil {
		e.log.Warn("analyzing belfry_member after a bulk insert of members", "members", n, "err", err)
	}
}

// DeleteMember removes a member and its state but its records.
func (e *Engine) DeleteMember(ctx context.Context, family, key string) (bool, error) {
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		// The version's row first, then the member's, in SetMembers'
		// order: the other order could deadlock with it.
		if _, err := tx.Exec(ctx, bumpVersionSQL, e.ns); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM belfry_member WHERE namespace = $1 AND family = $2 AND key = $3`, e.ns, family, key)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errNoMember // no change to count
		}
		_, err = tx.Exec(ctx, dropEmptyBucketsSQL, e.ns, family)
		return err
	})
	if errors.Is(err, errNoMember) {
		return false, nil
	}
	return err == nil, err
}

// errNoMember rolls back a DeleteMember that found no member.
var errNoMember = errors.New("no such member")

// Members reads members by key; ok is false for unknown ones.
func (e *Engine) Members(ctx context.Context, family string, keys []string) ([]engine.MemberValue, []bool, error) {
	ms, ok, _, _, err := e.memberStates(ctx, family, keys, false)
	return ms, ok, err
}

// MemberStates reads members and their cursors together.
func (e *Engine) MemberStates(ctx context.Context, family string, keys []string) ([]engine.MemberValue, []bool, []engine.MemberCursor, []bool, error) {
	return e.memberStates(ctx, family, keys, true)
}

func (e *Engine) memberStates(ctx context.Context, family string, keys []string, cursors bool) ([]engine.MemberValue, []bool, []engine.MemberCursor, []bool, error) {
	n := len(keys)
	ms, mok, cs, cok := make([]engine.MemberValue, n), make([]bool, n), make([]engine.MemberCursor, n), make([]bool, n)
	rows, err := e.pool.Query(ctx, `SELECT `+memberColumns+`, coalesce(cursor, '') FROM`+membersByKeySQL, e.ns, family, keys)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	at := positions(keys)
	var m engine.MemberValue
	var cursor string
	if _, err := pgx.ForEachRow(rows, []any{&m.Key, &m.Since, &m.Paused, &m.Zone, &m.Expr, &cursor}, func() error {
		for _, i := range at[m.Key] {
			ms[i], mok[i] = m, true
			if cursors {
				cs[i], cok[i] = engine.ParseCursor(cursor)
			}
		}
		return nil
	}); err != nil {
		return nil, nil, nil, nil, err
	}
	return ms, mok, cs, cok, nil
}

// ScanMembers pages through a family's members in key order: a page's
// cursor is the last key it listed, so following the cursors lists each
// member present from the first page to the last exactly once, however
// many are added or removed between pages.
func (e *Engine) ScanMembers(ctx context.Context, family, cursor, substr string, limit int) ([]engine.MemberValue, string, error) {
	after := ""
	if cursor != "" {
		raw, ok := strings.CutPrefix(cursor, "k")
		b, err := base64.RawURLEncoding.DecodeString(raw)
		if !ok || err != nil || len(b) == 0 {
			return nil, "", engine.ErrBadCursor
		}
		after = string(b)
	}
	limit = max(limit, 1)
	rows, err := e.pool.Query(ctx, `SELECT `+memberColumns+` FROM belfry_member
		WHERE namespace = $1 AND family = $2 AND key > $3 AND ($4 = '' OR strpos(key, $4) > 0)
		ORDER BY key LIMIT $5`, e.ns, family, after, substr, limit+1)
	if err != nil {
		return nil, "", err
	}
	page, err := pgx.CollectRows(rows, scanMember)
	if err != nil || len(page) <= limit {
		return page, "", err
	}
	page = page[:limit]
	return page, "k" + base64.RawURLEncoding.EncodeToString([]byte(page[limit-1].Key)), nil
}

// MemberCount is the number of a family's members.
func (e *Engine) MemberCount(ctx context.Context, family string) (int64, error) {
	var n int64
	err := e.pool.QueryRow(ctx, `SELECT count(*) FROM belfry_member WHERE namespace = $1 AND family = $2`, e.ns, family).Scan(&n)
	return n, err
}

// FamilyVersion counts every change to the namespace's members.
func (e *Engine) FamilyVersion(ctx context.Context) (int64, error) {
	var v int64
	err := e.pool.QueryRow(ctx, `SELECT version FROM belfry_family_version WHERE namespace = $1`, e.ns).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// BucketsChangedAfter lists the family's buckets changed after version.
func (e *Engine) BucketsChangedAfter(ctx context.Context, family string, version int64) ([]engine.BucketVersion, error) {
	rows, err := e.pool.Query(ctx, `SELECT zone, expr, version FROM belfry_bucket WHERE namespace = $1 AND family = $2 AND version > $3
		ORDER BY version`, e.ns, family, version)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (engine.BucketVersion, error) {
		var zone, expr string
		var v engine.BucketVersion
		err := row.Scan(&zone, &expr, &v.Version)
		v.Bucket = engine.BucketOf(zone, expr)
		return v, err
	})
}

// BucketPage is up to n member keys of a bucket sorting after after.
func (e *Engine) BucketPage(ctx context.Context, family, bucket, after string, n int) ([]string, error) {
	zone, expr := engine.SplitBucket(bucket)
	rows, err := e.pool.Query(ctx, `SELECT key FROM belfry_member WHERE namespace = $1 AND family = $2 AND zone = $3 AND expr = $4
		AND key > $5 ORDER BY key LIMIT $6`, e.ns, family, zone, expr, after, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// SetMemberLast records a member's newest occurrence, for a member that
// still exists and a slot at least the one recorded.
func (e *Engine) SetMemberLast(ctx context.Context, family, key string, l engine.MemberLast) error {
	_, err := e.pool.Exec(ctx, `UPDATE belfry_member SET last = $4, last_slot = $5
		WHERE namespace = $1 AND family = $2 AND key = $3 AND (last_slot IS NULL OR last_slot <= $5)`,
		e.ns, family, key, engine.EncodeLast(l), l.Slot)
	return err
}

// MemberLasts reads members' newest occurrences.
func (e *Engine) MemberLasts(ctx context.Context, family string, keys []string) ([]engine.MemberLast, []bool, error) {
	out, ok := make([]engine.MemberLast, len(keys)), make([]bool, len(keys))
	rows, err := e.pool.Query(ctx, `SELECT key, last FROM`+membersByKeySQL+` WHERE last IS NOT NULL`,
		e.ns, family, keys)
	if err != nil {
		return nil, nil, err
	}
	at := positions(keys)
	var key, last string
	_, err = pgx.ForEachRow(rows, []any{&key, &last}, func() error {
		for _, i := range at[key] {
			out[i], ok[i] = engine.ParseLast(last)
		}
		return nil
	})
	return out, ok, err
}

// MemberPauses reads the pauses of members; nil for those that run.
func (e *Engine) MemberPauses(ctx context.Context, family string, keys []string) ([]*engine.Pause, error) {
	out := make([]*engine.Pause, len(keys))
	rows, err := e.pool.Query(ctx, `SELECT key, pause_reason, pause_actor, belfry_ms(paused_at) FROM`+membersByKeySQL+` WHERE paused`, e.ns, family, keys)
	if err != nil {
		return nil, err
	}
	at := positions(keys)
	var key string
	var p engine.Pause
	_, err = pgx.ForEachRow(rows, []any{&key, &p.Reason, &p.Actor, &p.At}, func() error {
		for _, i := range at[key] {
			cp := p
			out[i] = &cp
		}
		return nil
	})
	return out, err
}
