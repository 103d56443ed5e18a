package postgres

import (
	"context"
	"errors"

	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/jackc/pgx/v5"
)

var _ engine.Progress = (*Engine)(nil)

// progressColumns are what scanCheckpoint reads, in its order.
const progressColumns = `position, done, items, total, gen, claimed_by, belfry_ms(started_at), coalesce(belfry_ms(saved_at), 0)`

// scanCheckpoint reads progressColumns after the columns of before.
func scanCheckpoint(row pgx.Row, before ...any) (engine.Checkpoint, error) {
	var cp engine.Checkpoint
	err := row.Scan(append(before, &cp.Cursor, &cp.Done, &cp.Items, &cp.Total, &cp.Gen, &cp.By, &cp.StartedAt, &cp.UpdatedAt)...)
	return cp, err
}

// ClaimProgress raises the occurrence's claim generation, which fences
// every older attempt's save, and with scope not "" makes the occurrence
// its scope's unfinished work until it is done.
func (e *Engine) ClaimProgress(ctx context.Context, id, scope, by string, atMS int64) (cp engine.Checkpoint, err error) {
	err = e.inTx(ctx, func(tx pgx.Tx) error {
		cp, err = scanCheckpoint(tx.QueryRow(ctx, `INSERT INTO belfry_progress AS p (namespace, occurrence_id, gen, claimed_by, started_at)
			VALUES ($1, $2, 1, $3, belfry_at($4))
			ON CONFLICT (namespace, occurrence_id) DO UPDATE SET gen = p.gen + 1, claimed_by = EXCLUDED.claimed_by, updated_at = now()
			RETURNING `+progressColumns, e.ns, id, by, atMS))
		if err != nil || scope == "" || cp.Done {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO belfry_unfinished (namespace, scope, occurrence_id) VALUES ($1, $2, $3)
			ON CONFLICT (namespace, scope) DO UPDATE SET occurrence_id = EXCLUDED.occurrence_id`, e.ns, scope, id)
		return err
	})
	return cp, err
}

// saveProgressSQL writes a checkpoint if its generation ($8) is the
// newest claim's, and when it is done clears its scope's ($9) unfinished
// work if that is this occurrence. The update holds the progress row
// until the transaction ends, so a newer claim waits for it and then
// reads what it saved. It returns the rows written: 0 when fenced.
const saveProgressSQL = `WITH saved AS (
		UPDATE belfry_progress SET position = $3, done = $4, items = $5, total = $6, saved_at = belfry_at($7), updated_at = now()
		WHERE namespace = $1 AND occurrence_id = $2 AND gen = $8
		RETURNING occurrence_id
	), cleared AS (
		DELETE FROM belfry_unfinished u USING saved
		WHERE $4 AND u.namespace = $1 AND u.scope = $9 AND u.occurrence_id = saved.occurrence_id
	)
	SELECT count(*) FROM saved`

// saveProgress runs saveProgressSQL on q.
func (e *Engine) saveProgress(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id, scope string, cp engine.Checkpoint) error {
	var n int
	if err := q.QueryRow(ctx, saveProgressSQL, e.ns, id, cp.Cursor, cp.Done, cp.Items, cp.Total, cp.UpdatedAt, cp.Gen, scope).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return engine.ErrSuperseded
	}
	return nil
}

// SaveProgress writes cp as the occurrence's progress, fenced by cp.Gen.
func (e *Engine) SaveProgress(ctx context.Context, id, scope string, cp engine.Checkpoint) error {
	return e.saveProgress(ctx, e.pool, id, scope, cp)
}

// Progresses reads the saved progress of ids.
func (e *Engine) Progresses(ctx context.Context, ids []string) ([]engine.Checkpoint, []bool, error) {
	rows, err := e.pool.Query(ctx, `SELECT occurrence_id, `+progressColumns+` FROM belfry_progress
		WHERE namespace = $1 AND occurrence_id = ANY($2)`, e.ns, ids)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	at := make(map[string]int, len(ids))
	for i, id := range ids {
		at[id] = i
	}
	cps, ok := make([]engine.Checkpoint, len(ids)), make([]bool, len(ids))
	for rows.Next() {
		var id string
		cp, err := scanCheckpoint(rows, &id)
		if err != nil {
			return nil, nil, err
		}
		if i, found := at[id]; found {
			cps[i], ok[i] = cp, true
		}
	}
	return cps, ok, rows.Err()
}

// Unfinished is the scope's occurrence whose work is not done, "" for
// none.
func (e *Engine) Unfinished(ctx context.Context, scope string) (string, error) {
	var id string
	err := e.pool.QueryRow(ctx, `SELECT occurrence_id FROM belfry_unfinished WHERE namespace = $1 AND scope = $2`, e.ns, scope).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// ErrNoBatch is SaveCheckpoint's error outside a checkpoint.Run step of
// an occurrence the Postgres engine runs.
var ErrNoBatch = errors.New("postgres: SaveCheckpoint outside a checkpoint.Run step of a Postgres engine's occurrence")

// SaveCheckpoint saves the checkpoint of the batch ctx's step runs (in
// checkpoint.Run) in tx, the transaction that holds the batch's own
// effects: the batch and its progress commit together or not at all, so
// each batch's effects happen exactly once. Run then does not save it
// again. Call it last in tx, with the cursor the step returns; a commit
// that fails must make the step return its error.
//
// It returns an error that is engine.ErrSuperseded when a newer attempt
// of the occurrence has claimed its progress: roll tx back and return the
// error, and the stale attempt's batch leaves no trace.
func SaveCheckpoint(ctx context.Context, tx pgx.Tx, cursor string, done bool) error {
	b, ok := checkpoint.CurrentBatch(ctx)
	if !ok {
		return ErrNoBatch
	}
	e, ok := b.Store.(*Engine)
	if !ok {
		return ErrNoBatch
	}
	cp := b.Checkpoint(cursor, done)
	if err := e.saveProgress(ctx, tx, b.Key, b.Scope, cp); err != nil {
		return err
	}
	b.MarkSaved(cp)
	return nil
}
