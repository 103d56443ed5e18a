package jobs

import (
	"context"
	"fmt"
	"strconv"

	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// PostgresEvents keeps events in example_event and their archive in
// example_event_archive, one row per copy. A batch's copies and its
// checkpoint commit in one transaction (postgres.SaveCheckpoint): each
// event is archived exactly once, whatever stops the run.
type PostgresEvents struct{ Pool *pgxpool.Pool }

// CreateTables creates the tables if they are not there.
func (p PostgresEvents) CreateTables(ctx context.Context) error {
	return createTables(ctx, p.Pool, `CREATE TABLE IF NOT EXISTS example_event (id int PRIMARY KEY);
		CREATE TABLE IF NOT EXISTS example_event_archive (event_id int NOT NULL, archived_at timestamptz NOT NULL DEFAULT now())`)
}

// Seed adds events 1 to n, keeping any already there.
func (p PostgresEvents) Seed(ctx context.Context, n int) error {
	_, err := p.Pool.Exec(ctx, `INSERT INTO example_event (id) SELECT generate_series(1, $1) ON CONFLICT (id) DO NOTHING`, n)
	return err
}

// ArchiveBatch copies a batch and saves the checkpoint in the same
// transaction.
func (p PostgresEvents) ArchiveBatch(ctx context.Context, after, limit int) (last, n int, err error) {
	err = pgx.BeginFunc(ctx, p.Pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `WITH copied AS (
				INSERT INTO example_event_archive (event_id)
				SELECT id FROM example_event WHERE id > $1 ORDER BY id LIMIT $2
				RETURNING event_id)
			SELECT coalesce(max(event_id), $1), count(*) FROM copied`, after, limit).Scan(&last, &n); err != nil {
			return err
		}
		checkpoint.Add(ctx, int64(n))
		return postgres.SaveCheckpoint(ctx, tx, strconv.Itoa(last), n < limit)
	})
	return last, n, err
}

// RedisEvents keeps event IDs in the sorted set Key (scored by ID) and
// appends each copy to the list Key+":archive". A batch's copies and its
// checkpoint are two writes: a crash between them copies that batch again
// (at least once per batch).
type RedisEvents struct {
	Client redis.UniversalClient
	Key    string
}

// ArchiveKey is the list the archive appends to.
func (r RedisEvents) ArchiveKey() string { return r.Key + ":archive" }

// Seed adds events 1 to n, keeping any already there.
func (r RedisEvents) Seed(ctx context.Context, n int) error {
	zs := make([]redis.Z, n)
	for i := range zs {
		zs[i] = redis.Z{Score: float64(i + 1), Member: i + 1}
	}
	return r.Client.ZAddNX(ctx, r.Key, zs...).Err()
}

// archiveScript appends to KEYS[2] the members of KEYS[1] scored above
// ARGV[1], up to ARGV[2] of them in order, and returns them.
var archiveScript = redis.NewScript(`
local ids = redis.call('ZRANGE', KEYS[1], '(' .. ARGV[1], '+inf', 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]))
if #ids > 0 then
	redis.call('RPUSH', KEYS[2], unpack(ids))
end
return ids
`)

// ArchiveBatch copies the batch after after; its keys share a hash tag,
// so that the script runs on a Redis Cluster too.
func (r RedisEvents) ArchiveBatch(ctx context.Context, after, limit int) (int, int, error) {
	ids, err := archiveScript.Run(ctx, r.Client, []string{r.Key, r.ArchiveKey()}, after, limit).StringSlice()
	if err != nil {
		return 0, 0, fmt.Errorf("archiving %s: %w", r.Key, err)
	}
	checkpoint.Add(ctx, int64(len(ids)))
	if len(ids) == 0 {
		return after, 0, nil
	}
	last, err := strconv.Atoi(ids[len(ids)-1])
	return last, len(ids), err
}
