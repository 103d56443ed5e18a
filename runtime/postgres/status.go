package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/jackc/pgx/v5"
)

// maxPauseWindows bounds the past pauses kept per schedule that its
// cursor has not passed.
const maxPauseWindows = 16

// pauseVersionSQL is the version of namespace $1's pauses, which every
// write of a pause or a pause window raises in its transaction (a trigger,
// migrations/007_pause_version.sql); 0 before the first.
const pauseVersionSQL = `SELECT coalesce((SELECT version FROM belfry_pause_version WHERE namespace = $1), 0)`

// PauseStates reads the names' pauses and their past pause windows.
func (e *Engine) PauseStates(ctx context.Context, names []string) ([]*engine.Pause, [][]engine.PauseWindow, error) {
	pauses, windows, _, err := e.pauseStates(ctx, names, false)
	return pauses, windows, err
}

// PauseStatesAhead is PauseStates with the namespace's pause version as
// the token: read first, so a pause or resume that the states show but the
// version does not only makes an enqueue plan again, and none that the
// states miss goes unnoticed.
func (e *Engine) PauseStatesAhead(ctx context.Context, names []string) ([]*engine.Pause, [][]engine.PauseWindow, string, error) {
	pauses, windows, version, err := e.pauseStates(ctx, names, true)
	return pauses, windows, strconv.FormatInt(version, 10), err
}

// pauseStates reads the names' pauses and windows, and with versioned the
// pause version before them.
func (e *Engine) pauseStates(ctx context.Context, names []string, versioned bool) ([]*engine.Pause, [][]engine.PauseWindow, int64, error) {
	// One round trip for every read: the leader reads them when a slot
	// comes due, before its enqueue, unless it read them ahead.
	byName := map[string]*engine.Pause{}
	windows := map[string][]engine.PauseWindow{}
	b := &pgx.Batch{}
	var version int64
	if versioned {
		b.Queue(pauseVersionSQL, e.ns).QueryRow(func(row pgx.Row) error { return row.Scan(&version) })
	}
	b.Queue(`SELECT schedule, reason, actor, belfry_ms(paused_at) FROM belfry_pause WHERE namespace = $1 AND schedule = ANY($2)`,
		e.ns, names).Query(func(rows pgx.Rows) error {
		var name string
		var p engine.Pause
		_, err := pgx.ForEachRow(rows, []any{&name, &p.Reason, &p.Actor, &p.At}, func() error {
			cp := p
			byName[name] = &cp
			return nil
		})
		return err
	})
	b.Queue(`SELECT schedule, belfry_ms(paused_at), belfry_ms(resumed_at) FROM belfry_pause_window
		WHERE namespace = $1 AND schedule = ANY($2) ORDER BY resumed_at`, e.ns, names).Query(func(rows pgx.Rows) error {
		var name string
		var w engine.PauseWindow
		_, err := pgx.ForEachRow(rows, []any{&name, &w.From, &w.To}, func() error {
			windows[name] = append(windows[name], w)
			return nil
		})
		return err
	})
	if err := e.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, 0, err
	}
	pauses, ws := make([]*engine.Pause, len(names)), make([][]engine.PauseWindow, len(names))
	for i, n := range names {
		pauses[i], ws[i] = byName[n], windows[n]
	}
	return pauses, ws, version, nil
}

// pausesOf reads the pauses of names, every pause for nil names.
func (e *Engine) pausesOf(ctx context.Context, names []string) (map[string]*engine.Pause, error) {
	q := `SELECT schedule, reason, actor, belfry_ms(paused_at) FROM belfry_pause WHERE namespace = $1`
	args := []any{e.ns}
	if names != nil {
		q += ` AND schedule = ANY($2)`
		args = append(args, names)
	}
	rows, err := e.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out := map[string]*engine.Pause{}
	var name string
	var p engine.Pause
	_, err = pgx.ForEachRow(rows, []any{&name, &p.Reason, &p.Actor, &p.At}, func() error {
		cp := p
		out[name] = &cp
		return nil
	})
	return out, err
}

// AllPauses is every pause held.
func (e *Engine) AllPauses(ctx context.Context) (map[string]*engine.Pause, error) {
	return e.pausesOf(ctx, nil)
}

// SetPause pauses a schedule; a pause in place keeps its start and takes
// the new reason and actor.
func (e *Engine) SetPause(ctx context.Context, name string, p engine.Pause) error {
	// In a transaction of the engine's (READ COMMITTED): the pause's
	// trigger raises the namespace's pause version, one row that
	// concurrent pauses update.
	return e.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO belfry_pause (namespace, schedule, reason, actor, paused_at) VALUES ($1, $2, $3, $4, belfry_at($5))
			ON CONFLICT (namespace, schedule) DO UPDATE SET reason = EXCLUDED.reason, actor = EXCLUDED.actor`, e.ns, name, p.Reason, p.Actor, p.At)
		return err
	})
}

// ClearPause resumes a schedule, notes when (last_resume, at) and keeps
// the pause's window, ending at the database's time, so that a leader
// that reaches the slots due in it after the resume records them paused.
// Windows the schedule's cursor has passed go, and at most
// maxPauseWindows of the newest stay.
func (e *Engine) ClearPause(ctx context.Context, name string, at int64) (bool, error) {
	var was bool
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		var pausedAt int64
		err := tx.QueryRow(ctx, `DELETE FROM belfry_pause WHERE namespace = $1 AND schedule = $2 RETURNING belfry_ms(paused_at)`,
			e.ns, name).Scan(&pausedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		was = true
		b := &pgx.Batch{}
		b.Queue(counterSetSQL, e.ns, []string{name}, []string{"last_resume"}, []int64{at})
		b.Queue(`INSERT INTO belfry_pause_window (namespace, schedule, paused_at, resumed_at) VALUES ($1, $2, belfry_at($3), clock_timestamp())
			ON CONFLICT DO NOTHING`, e.ns, name, pausedAt)
		b.Queue(`DELETE FROM belfry_pause_window w WHERE w.namespace = $1 AND w.schedule = $2 AND (
				w.resumed_at <= (SELECT slot FROM belfry_cursor WHERE namespace = $1 AND schedule = $2 AND member = '')
				OR w.resumed_at < (SELECT min(resumed_at) FROM (SELECT resumed_at FROM belfry_pause_window
					WHERE namespace = $1 AND schedule = $2 ORDER BY resumed_at DESC LIMIT $3) newest))`, e.ns, name, maxPauseWindows)
		return tx.SendBatch(ctx, b).Close()
	})
	return was, err
}

// Stats is every schedule's counters that are not 0.
func (e *Engine) Stats(ctx context.Context) (map[string]map[string]int64, error) {
	rows, err := e.pool.Query(ctx, `SELECT schedule, counter, value FROM belfry_counter WHERE namespace = $1 AND value <> 0`, e.ns)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]int64{}
	var name, counter string
	var v int64
	_, err = pgx.ForEachRow(rows, []any{&name, &counter, &v}, func() error {
		if out[name] == nil {
			out[name] = map[string]int64{}
		}
		out[name][counter] = v
		return nil
	})
	return out, err
}

// StatFields reads the given counters of each name, 0 where unset.
func (e *Engine) StatFields(ctx context.Context, names, fields []string) ([][]int64, error) {
	out := make([][]int64, len(names))
	flat := make([]int64, len(names)*len(fields))
	at := positions(names)
	for i := range names {
		out[i] = flat[i*len(fields) : (i+1)*len(fields)]
	}
	field := make(map[string]int, len(fields))
	for j, f := range fields {
		field[f] = j
	}
	if len(names) == 0 || len(fields) == 0 {
		return out, nil
	}
	rows, err := e.pool.Query(ctx, `SELECT schedule, counter, value FROM belfry_counter
		WHERE namespace = $1 AND schedule = ANY($2) AND counter = ANY($3)`, e.ns, names, fields)
	if err != nil {
		return nil, err
	}
	var name, counter string
	var v int64
	_, err = pgx.ForEachRow(rows, []any{&name, &counter, &v}, func() error {
		for _, i := range at[name] {
			out[i][field[counter]] = v
		}
		return nil
	})
	return out, err
}

// positions maps each of names to where it is in names (a name asked for
// twice is answered twice).
func positions(names []string) map[string][]int {
	at := make(map[string][]int, len(names))
	for i, n := range names {
		at[n] = append(at[n], i)
	}
	return at
}

// ScheduleData reads, for each name, its newest n records, the counters
// asked for, its pause and its execution state (from known when given).
func (e *Engine) ScheduleData(ctx context.Context, names []string, n int, fields []string, known *engine.Problems) ([]engine.ScheduleData, error) {
	out := make([]engine.ScheduleData, len(names))
	at := positions(names)
	stats, err := e.StatFields(ctx, names, fields)
	if err != nil {
		return nil, err
	}
	pauses, err := e.pausesOf(ctx, names)
	if err != nil {
		return nil, err
	}
	for i, name := range names {
		out[i].Stats, out[i].Pause = stats[i], pauses[name]
	}
	if n > 0 {
		rows, err := e.pool.Query(ctx, `SELECT `+recordColumns+` FROM (SELECT DISTINCT unnest($2::text[]) AS name) s,
			LATERAL (SELECT * FROM belfry_record WHERE namespace = $1 AND schedule = s.name ORDER BY score DESC LIMIT $3) r
			ORDER BY r.schedule, r.score DESC`, e.ns, names, n)
		if err != nil {
			return nil, err
		}
		recs, err := pgx.CollectRows(rows, scanRecord)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			for _, i := range at[r.Schedule] {
				out[i].Recent = append(out[i].Recent, r)
			}
		}
	}
	if known != nil {
		for i, name := range names {
			out[i].FailingSince, _ = strconv.ParseInt(known.Failing[name], 10, 64)
			out[i].Active = known.Active[name]
		}
		return out, nil
	}
	rows, err := e.pool.Query(ctx, `SELECT schedule, coalesce(belfry_ms(failing_since), 0), coalesce(active, '') FROM belfry_execution
		WHERE namespace = $1 AND schedule = ANY($2)`, e.ns, names)
	if err != nil {
		return nil, err
	}
	var name, active string
	var failing int64
	_, err = pgx.ForEachRow(rows, []any{&name, &failing, &active}, func() error {
		for _, i := range at[name] {
			out[i].FailingSince, out[i].Active = failing, active
		}
		return nil
	})
	return out, err
}

// Problems is what is paused, failing or running.
func (e *Engine) Problems(ctx context.Context) (engine.Problems, error) {
	p := engine.Problems{Paused: map[string]string{}, Failing: map[string]string{}, Active: map[string]string{}}
	pauses, err := e.pausesOf(ctx, nil)
	if err != nil {
		return p, err
	}
	for name, pause := range pauses {
		b, _ := json.Marshal(pause)
		p.Paused[name] = string(b)
	}
	rows, err := e.pool.Query(ctx, `SELECT schedule, belfry_ms(failing_since), active FROM belfry_execution WHERE namespace = $1`, e.ns)
	if err != nil {
		return p, err
	}
	var name string
	var failing *int64
	var active *string
	_, err = pgx.ForEachRow(rows, []any{&name, &failing, &active}, func() error {
		if failing != nil {
			p.Failing[name] = strconv.FormatInt(*failing, 10)
		}
		if active != nil {
			p.Active[name] = *active
		}
		return nil
	})
	return p, err
}

// backfilledFlag notes that the failing index was built from the records.
const backfilledFlag = "failing_backfilled"

// Backfilled says whether MarkBackfilled ran on this namespace.
func (e *Engine) Backfilled(ctx context.Context) (bool, error) {
	var ok bool
	err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM belfry_flag WHERE namespace = $1 AND flag = $2)`, e.ns, backfilledFlag).Scan(&ok)
	return ok, err
}

// MarkBackfilled notes that the failing index was built.
func (e *Engine) MarkBackfilled(ctx context.Context) error {
	_, err := e.pool.Exec(ctx, `INSERT INTO belfry_flag (namespace, flag) VALUES ($1, $2) ON CONFLICT DO NOTHING`, e.ns, backfilledFlag)
	return err
}

// MarkFailing marks a schedule failing since atMS unless a worker already
// did.
func (e *Engine) MarkFailing(ctx context.Context, name string, atMS int64) error {
	_, err := e.pool.Exec(ctx, `INSERT INTO belfry_execution (namespace, schedule, failing_since) VALUES ($1, $2, belfry_at($3))
		ON CONFLICT (namespace, schedule) DO UPDATE SET failing_since = coalesce(belfry_execution.failing_since, EXCLUDED.failing_since)`,
		e.ns, name, atMS)
	return err
}
