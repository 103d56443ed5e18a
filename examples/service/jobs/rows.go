package jobs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// PostgresRows keeps soft-deleted rows in the table example_soft_deleted.
// A batch's deletes and its checkpoint commit in one transaction
// (postgres.SaveCheckpoint): each row is purged by exactly one batch,
// whatever stops the run.
type PostgresRows struct{ Pool *pgxpool.Pool }

// CreateTable creates the table if it is not there.
func (p PostgresRows) CreateTable(ctx context.Context) error {
	return createTables(ctx, p.Pool, `CREATE TABLE IF NOT EXISTS example_soft_deleted (
		id text PRIMARY KEY, deleted_at timestamptz NOT NULL)`)
}

// createTables runs ddl, CREATE TABLE IF NOT EXISTS statements, holding a
// transaction-level advisory lock. Without it replicas starting together
// on a fresh database race: each finds no table, each creates it, and all
// but one fail on a unique index of the catalog. With it the later ones
// wait, then find the table.
func createTables(ctx context.Context, pool *pgxpool.Pool, ddl string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('belfry example tables'))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, ddl)
		return err
	})
}

// SoftDelete adds rows soft-deleted at t, keeping any already there.
func (p PostgresRows) SoftDelete(ctx context.Context, ids []string, t time.Time) error {
	_, err := p.Pool.Exec(ctx, `INSERT INTO example_soft_deleted (id, deleted_at) SELECT unnest($1::text[]), $2
		ON CONFLICT (id) DO NOTHING`, ids, t)
	return err
}

// PurgeBatch deletes a batch and saves the checkpoint in the same
// transaction.
func (p PostgresRows) PurgeBatch(ctx context.Context, after string, cutoff time.Time, limit int) (last string, n int, err error) {
	err = pgx.BeginFunc(ctx, p.Pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `WITH gone AS (
				DELETE FROM example_soft_deleted WHERE id IN (SELECT id FROM example_soft_deleted
					WHERE id > $1 AND deleted_at < $2 ORDER BY id LIMIT $3)
				RETURNING id)
			SELECT coalesce(max(id), ''), count(*) FROM gone`, after, cutoff, limit).Scan(&last, &n); err != nil {
			return err
		}
		checkpoint.Add(ctx, int64(n))
		return postgres.SaveCheckpoint(ctx, tx, cmpCursor(last, after), n < limit)
	})
	return last, n, err
}

// RedisRows keeps soft-deleted rows in a sorted set, row ID -> deleted_at
// (unix ms). A batch's removal and its checkpoint are two writes: a crash
// between them runs the batch again, which removes nothing more.
type RedisRows struct {
	Client redis.UniversalClient
	Key    string
}

// SoftDelete adds rows soft-deleted at t, keeping any already there.
func (r RedisRows) SoftDelete(ctx context.Context, ids []string, t time.Time) error {
	zs := make([]redis.Z, len(ids))
	for i, id := range ids {
		zs[i] = redis.Z{Score: float64(t.UnixMilli()), Member: id}
	}
	return r.Client.ZAddNX(ctx, r.Key, zs...).Err()
}

// purgeScript removes up to ARGV[2] members of KEYS[1] scored below
// ARGV[1], lowest first, and returns them.
var purgeScript = redis.NewScript(`
local ids = redis.call('ZRANGE', KEYS[1], '-inf', '(' .. ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]))
if #ids > 0 then
	redis.call('ZREM', KEYS[1], unpack(ids))
end
return ids
`)

// PurgeBatch removes the rows deleted longest ago before cutoff. The set
// holds only rows not yet purged, so after is not needed to find the next
// batch; the last ID is returned as the cursor all the same.
func (r RedisRows) PurgeBatch(ctx context.Context, after string, cutoff time.Time, limit int) (string, int, error) {
	ids, err := purgeScript.Run(ctx, r.Client, []string{r.Key}, strconv.FormatInt(cutoff.UnixMilli(), 10), limit).StringSlice()
	if err != nil {
		return "", 0, fmt.Errorf("purging %s: %w", r.Key, err)
	}
	checkpoint.Add(ctx, int64(len(ids)))
	if len(ids) == 0 {
		return "", 0, nil
	}
	return ids[len(ids)-1], len(ids), nil
}

// cmpCursor is the cursor after a batch: its last ID, or the one before
// when it removed nothing.
func cmpCursor(last, after string) string {
	if last == "" {
		return after
	}
	return last
}
