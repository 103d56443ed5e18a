package jobs

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/checkpoint"
)

// SoftDeletedRows is where the service keeps soft-deleted rows: a table on
// Postgres (PostgresRows), a sorted set on Redis (RedisRows), a map in
// tests (DB). main picks the one of its engine and hands it to the
// handlers through Jobs, never through a package global.
type SoftDeletedRows interface {
	// PurgeBatch removes up to limit rows soft-deleted before cutoff whose
	// IDs sort after after, in ID order, counts them with checkpoint.Add,
	// and returns the last ID removed ("" for none) and how many.
	PurgeBatch(ctx context.Context, after string, cutoff time.Time, limit int) (last string, n int, err error)
}

// DB keeps soft-deleted rows in memory, for tests.
type DB struct {
	mu          sync.Mutex
	softDeleted map[string]time.Time // row ID -> deleted_at
}

// NewDB returns an empty database.
func NewDB() *DB { return &DB{softDeleted: map[string]time.Time{}} }

// SoftDelete marks the row id deleted at t.
func (db *DB) SoftDelete(id string, t time.Time) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.softDeleted[id] = t
}

// PurgeBatch removes a batch as DELETE ... WHERE id > $1 AND deleted_at <
// $2 ORDER BY id LIMIT $3 would: a second run with the same cutoff removes
// nothing more.
func (db *DB) PurgeBatch(ctx context.Context, after string, cutoff time.Time, limit int) (string, int, error) {
	if err := ctx.Err(); err != nil {
		return "", 0, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	var ids []string
	for id, at := range db.softDeleted {
		if id > after && at.Before(cutoff) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	ids = ids[:min(len(ids), limit)]
	for _, id := range ids {
		delete(db.softDeleted, id)
	}
	checkpoint.Add(ctx, int64(len(ids)))
	if len(ids) == 0 {
		return "", 0, nil
	}
	return ids[len(ids)-1], len(ids), nil
}
