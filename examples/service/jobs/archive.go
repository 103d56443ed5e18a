package jobs

import (
	"context"
	"errors"
	"log/slog"
	"strconv"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/checkpoint"
)

// archiveBatch is how many events one batch of the archive copies.
const archiveBatch = 100

// Events is where the service keeps its events and their archive: tables
// on Postgres (PostgresEvents), a sorted set and a list on Redis
// (RedisEvents). The archive is append-only, as a warehouse export or a
// ledger is: an event copied twice is there twice.
type Events interface {
	// ArchiveBatch copies up to limit events whose IDs follow after, in ID
	// order, to the archive, saves the checkpoint (in the same transaction
	// where the store has them) and returns the last ID copied (after when
	// none) and how many.
	ArchiveBatch(ctx context.Context, after, limit int) (last, n int, err error)
}

// ArchiveEvents copies every event to the append-only archive, a batch
// at a time. Its timeout is short on purpose, as job-iteration's
// max_job_runtime is: each attempt runs for at most ten seconds and the
// next continues after the last saved batch, so the job never holds a
// worker long, and a deploy or a crashed worker costs at most a batch.
//
//cron:schedule "45 2 * * *" name=archive-events tz=UTC queue=maintenance timeout=10s retry=10
func (j *Jobs) ArchiveEvents(ctx context.Context, occ registry.Occurrence) error {
	if j.Events == nil {
		return errors.New("archive-events: no event store: the service runs without an engine")
	}
	slog.InfoContext(ctx, "archiving events", "key", occ.Key())
	err := checkpoint.Run(ctx, func(ctx context.Context, cursor string) (string, bool, error) {
		if err := j.throttle(ctx); err != nil {
			return "", false, err
		}
		after, _ := strconv.Atoi(cursor)
		last, n, err := j.Events.ArchiveBatch(ctx, after, archiveBatch)
		if err != nil {
			return "", false, err
		}
		return strconv.Itoa(last), n < archiveBatch, nil
	})
	if err != nil {
		return err
	}
	slog.InfoContext(ctx, "archived events", "key", occ.Key())
	return nil
}

// throttle waits ArchiveThrottle before a batch, leaving the store room
// for the service's own queries.
func (j *Jobs) throttle(ctx context.Context) error {
	if j.ArchiveThrottle <= 0 {
		return nil
	}
	// A pause, not a reading of the clock: a context that ends after the
	// throttle, or with ctx.
	wait, cancel := context.WithTimeout(ctx, j.ArchiveThrottle)
	defer cancel()
	<-wait.Done()
	return ctx.Err()
}
