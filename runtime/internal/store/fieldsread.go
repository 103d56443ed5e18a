package store

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// A hash of a few hundred short fields is kept by Redis as a listpack
// (hash-max-listpack-entries, 512 by default), where finding a field is a
// walk from the start: an HMGET of 250 names from the 500-field hash of
// paused schedules compares 62,500 fields, 1.3–1.6 ms of Redis, and a list
// of 100,000 schedules made 400 of them of each such hash. Reading the hash
// whole walks it once. So a read of many names' fields from a hash that is
// small, or no larger than the names asked for, reads it whole; one of a few
// names, or from a large hash (a hash table, where HMGET finds each field at
// once), reads the names' fields in HMGETs of Chunk names.
const (
	// wholeReadFields bounds the hashes read whole. The read is an HSCAN
	// of that COUNT, which holds Redis for well under a millisecond and
	// returns a listpack, or a hash table that size, in one step; a hash
	// that grew past it since its HLEN is scanned on in further steps.
	wholeReadFields = 1000
	// listpackFields is Redis's default hash-max-listpack-entries: a hash
	// of no more fields may be a listpack.
	listpackFields = 512
	// wholeReadAsked is the fewest names for which a listpack is read
	// whole rather than walked once a name.
	wholeReadAsked = 32
)

// readsWhole reports whether the fields of asked names are read from a hash
// of size fields by reading it whole.
func readsWhole(size int64, asked int) bool {
	return size <= wholeReadFields && (size <= int64(asked) || size <= listpackFields && asked >= wholeReadAsked)
}

// fieldsRead is a read, queued on a pipeline, of the fields of some names
// from one hash: the hash's first HSCAN step when it is read whole (see
// readsWhole), else its HMGETs; nothing when the hash is empty.
type fieldsRead struct {
	key    string
	scan   *redis.ScanCmd
	chunks []*redis.SliceCmd
}

// queueFieldsRead queues on p the read of names' fields from the hash key,
// which held size fields a moment before.
func queueFieldsRead(ctx context.Context, p redis.Pipeliner, key string, names []string, size int64) fieldsRead {
	r := fieldsRead{key: key}
	switch {
	case size == 0 || len(names) == 0:
	case readsWhole(size, len(names)):
		r.scan = p.HScan(ctx, key, 0, "", wholeReadFields)
	default:
		for start := 0; start < len(names); start += Chunk {
			r.chunks = append(r.chunks, p.HMGet(ctx, key, names[start:min(start+Chunk, len(names))]...))
		}
	}
	return r
}

// each calls found with the position in names and the value of each of
// names the hash holds, after the pipeline ran. A whole read whose hash
// grew past one step meanwhile goes on scanning with rdb.
func (r fieldsRead) each(ctx context.Context, rdb redis.Cmdable, names []string, found func(i int, value string)) error {
	for c, cmd := range r.chunks {
		for k, v := range cmd.Val() {
			if str, ok := v.(string); ok {
				found(c*Chunk+k, str)
			}
		}
	}
	if r.scan == nil {
		return nil
	}
	pairs, cursor := r.scan.Val()
	values := make(map[string]string, len(pairs)/2)
	for {
		for k := 0; k+1 < len(pairs); k += 2 {
			values[pairs[k]] = pairs[k+1]
		}
		if cursor == 0 {
			break
		}
		var err error
		if pairs, cursor, err = rdb.HScan(ctx, r.key, cursor, "", wholeReadFields).Result(); err != nil {
			return err
		}
	}
	for i, name := range names {
		if v, ok := values[name]; ok {
			found(i, v)
		}
	}
	return nil
}
