package jobs

import (
	"context"
	"sync"
	"time"
)

// DB stands in for the service's database pool. main opens one and hands it
// to the handlers that need it through Jobs (see NewRegistry), never through
// a package global, so a test can give each run a database of its own.
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

// PurgeDeletedBefore removes the rows soft-deleted before cutoff and
// returns how many it removed, as DELETE ... WHERE deleted_at < $1 would:
// a second run with the same cutoff removes nothing more.
func (db *DB) PurgeDeletedBefore(ctx context.Context, cutoff time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	n := 0
	for id, at := range db.softDeleted {
		if at.Before(cutoff) {
			delete(db.softDeleted, id)
			n++
		}
	}
	return n, nil
}
