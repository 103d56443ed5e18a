package store

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// A hash of a few hundred short fields is kept by Redis as a listpack
// (hash-max-listpack-entries, 512 by default), where finding a field is a
// walk from the start: an HMGET of 250 names from the 500-field hash of
// paused schedules compares 62,500 fields, and a list of 100,000 schedules
// made 400 of them of each such hash, the calls most often past the 5 ms
// budget on a busy host (BENCHMARKS.md, "Limits in the code"). Reading
// the hash whole walks it once. So a read of many names' fields from a
// hash that may be a listpack reads it whole; one of a few names, or from
// a larger hash (a hash table, where HMGET finds each field at once, and
// a few short calls are better than one long one), reads the names'
// fields in HMGETs of Chunk names. A snapshot of more schedules than one
// read takes reads the three problem hashes once, in HSCAN steps, for all
// its reads (see Problems and ScheduleData's known).
const (
	// listpackFields is Redis's default hash-max-listpack-entries: a hash
	// of no more fields may be a listpack. It is also the COUNT of a whole
	// read's HSCAN, which returns a listpack, or a hash table that size,
	// in one step; a hash that grew past it since its size was seen is
	// scanned on (scanHashFrom).
	listpackFields = 512
	// wholeReadAsked is the fewest names for which a listpack is read
	// whole rather than walked once a name.
	wholeReadAsked = 32
)

// readsWhole reports whether the fields of asked names are read from a hash
// of size fields by reading it whole.
func readsWhole(size int64, asked int) bool {
	return size <= listpackFields && (asked >= wholeReadAsked || size <= int64(asked))
}

// fieldsRead is a read of the fields of some names from one hash: the
// hash's first HSCAN step, queued on a pipeline, when it is read whole (see
// readsWhole), else its HMGETs; or the hash as the caller read it before
// (known). The size it is chosen by may be old: it decides how the hash is
// read, never whether, so a hash that was empty or small and has grown is
// still read whole.
type fieldsRead struct {
	key    string
	scan   *redis.ScanCmd
	chunks []*redis.SliceCmd
	known  map[string]string
}

// queueFieldsRead queues on p the read of names' fields from the hash key,
// which held size fields when last seen.
func queueFieldsRead(ctx context.Context, p redis.Pipeliner, key string, names []string, size int64) fieldsRead {
	r := fieldsRead{key: key}
	switch {
	case len(names) == 0:
	case readsWhole(size, len(names)):
		r.scan = p.HScan(ctx, key, 0, "", listpackFields)
	default:
		for start := 0; start < len(names); start += Chunk {
			r.chunks = append(r.chunks, p.HMGet(ctx, key, names[start:min(start+Chunk, len(names))]...))
		}
	}
	return r
}

// each calls found with the position in names and the value of each of
// names the hash holds, after the pipeline ran. A whole read whose hash
// grew past one step meanwhile goes on scanning it through s.
func (r fieldsRead) each(ctx context.Context, s *Store, names []string, found func(i int, value string)) error {
	for c, cmd := range r.chunks {
		for k, v := range cmd.Val() {
			if str, ok := v.(string); ok {
				found(c*Chunk+k, str)
			}
		}
	}
	values := r.known
	if r.scan != nil {
		pairs, cursor := r.scan.Val()
		values = make(map[string]string, len(pairs)/2)
		add := func(field, value string) { values[field] = value }
		for k := 0; k+1 < len(pairs); k += 2 {
			add(pairs[k], pairs[k+1])
		}
		if cursor != 0 {
			if err := s.scanHashFrom(ctx, r.key, cursor, add); err != nil {
				return err
			}
		}
	}
	if len(values) == 0 {
		return nil
	}
	for i, name := range names {
		if v, ok := values[name]; ok {
			found(i, v)
		}
	}
	return nil
}
