package store

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The execution state: two small hashes the worker side keeps so that every
// schedule's status can be read without reading every schedule's history.
// Each holds only the schedules it names — failing ones, and ones with an
// attempt under way — so reading them costs what is wrong, not what is
// declared.
//
//	<ns>:failing  hash schedule -> unix ms of the final failure that made it failing
//	<ns>:active   hash schedule -> "running" or "retrying": an attempt started (or
//	              waits to retry) after the schedule's last finished one

// Failing is the hash of schedules whose last finished occurrence failed.
func (k Keys) Failing() string { return k.Prefix + "failing" }

// Active is the hash of schedules with an attempt running or waiting to
// retry.
func (k Keys) Active() string { return k.Prefix + "active" }

// NoteExecution keeps the execution state of name in step with a worker's
// step, in one transaction: a start or a retry marks it active, a final
// failure marks it failing, a success clears both. The last step written
// wins, so the state follows the order in which attempts ended.
func (s *Store) NoteExecution(ctx context.Context, name, outcome string, atMS int64) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		switch outcome {
		case "running", "retrying":
			p.HSet(ctx, s.Keys.Active(), name, outcome)
		case "failed":
			p.HSet(ctx, s.Keys.Failing(), name, atMS)
			p.HDel(ctx, s.Keys.Active(), name)
		case "succeeded":
			p.HDel(ctx, s.Keys.Failing(), name)
			p.HDel(ctx, s.Keys.Active(), name)
		}
		return nil
	})
	return err
}

// ForgetExecution drops name's execution state (see Forget).
func (s *Store) ForgetExecution(ctx context.Context, name string) (int64, error) {
	var failing, active *redis.IntCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		failing = p.HDel(ctx, s.Keys.Failing(), name)
		active = p.HDel(ctx, s.Keys.Active(), name)
		return nil
	})
	return failing.Val() + active.Val(), err
}

// problems are the keys of the three problem hashes, in Problems' order.
func (k Keys) problems() [3]string { return [...]string{k.Paused, k.Failing(), k.Active()} }

// Problems reads the three problem hashes, in one round trip while each is
// small. Their size is the number of schedules paused, failing or running,
// whatever the number declared; when that is large (100,000 schedules due
// at once are all running for a moment) they are read in HSCAN steps, so
// that no single call holds Redis for long.
func (s *Store) Problems(ctx context.Context) (Problems, error) {
	keys := s.Keys.problems()
	found := make([]map[string]string, len(keys))
	cursors := make([]uint64, len(keys))
	for i := range keys {
		found[i] = map[string]string{}
	}
	first := true
	for first || slices.ContainsFunc(cursors, func(c uint64) bool { return c != 0 }) {
		cmds := make([]*redis.ScanCmd, len(keys))
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, key := range keys {
				if first || cursors[i] != 0 {
					cmds[i] = p.HScan(ctx, key, cursors[i], "", scanCount)
				}
			}
			return nil
		})
		if err != nil {
			return Problems{}, err
		}
		for i, cmd := range cmds {
			if cmd == nil {
				continue
			}
			pairs, next := cmd.Val()
			for k := 0; k+1 < len(pairs); k += 2 {
				found[i][pairs[k]] = pairs[k+1]
			}
			cursors[i] = next
		}
		first = false
	}
	return Problems{Paused: found[0], Failing: found[1], Active: found[2]}, nil
}

// StatFields reads the given counters of each of names: out[i][j] is
// counter fields[j] of names[i], 0 where unset. It reads in HMGETs of at
// most Chunk names each, so no single call holds Redis for long, pipelined
// over up to statReaders connections at once, so that decoding the replies
// of many schedules is spread over the cores.
func (s *Store) StatFields(ctx context.Context, names, fields []string) ([][]int64, error) {
	if err := s.settleCounters(ctx); err != nil {
		return nil, err
	}
	out := counterRows(len(names), fields)
	per := max(Chunk, (len(names)+statReaders-1)/statReaders)
	per = (per + Chunk - 1) / Chunk * Chunk // whole chunks, so positions stay simple
	errs := make(chan error, statReaders)
	var wg sync.WaitGroup
	for start := 0; start < len(names); start += per {
		part := names[start:min(start+per, len(names))]
		wg.Go(func() {
			var cmds []*redis.SliceCmd
			_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				cmds = s.queueStatFields(ctx, p, part)
				return nil
			})
			if err != nil {
				errs <- err
				return
			}
			statFieldsInto(out[start:], cmds, pickCounters(fields))
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return out, nil
}

// statReaders bounds the connections one StatFields read uses at once.
const statReaders = 4

// queueStatFields queues the HMGETs of the counters of names on p, Chunk
// names each.
func (s *Store) queueStatFields(ctx context.Context, p redis.Pipeliner, names []string) []*redis.SliceCmd {
	var cmds []*redis.SliceCmd
	for start := 0; start < len(names); start += Chunk {
		cmds = append(cmds, p.HMGet(ctx, s.Keys.Counters(), names[start:min(start+Chunk, len(names))]...))
	}
	return cmds
}

// statFieldsInto parses the replies of queueStatFields into out, a row a
// name.
func statFieldsInto(out [][]int64, cmds []*redis.SliceCmd, pick counterPicker) {
	for c, cmd := range cmds {
		for k, v := range cmd.Val() {
			if str, ok := v.(string); ok {
				pick.into(str, out[c*Chunk+k])
			}
		}
	}
}

// ParsePause decodes a stored pause, nil if it is not one.
func ParsePause(raw string) *Pause {
	var p Pause
	if json.Unmarshal([]byte(raw), &p) != nil {
		return nil
	}
	return &p
}

// ScheduleData reads, for each of names, its newest n records, the given
// counters, its pause and its execution state, in two pipelined round
// trips (the records' IDs and the rest, then the records) after one that
// holds settleCounters' EXISTS and the sizes of the three problem hashes:
// the cost is that of the names asked for and of what is wrong, whatever
// the number of schedules. A read of many parts passes what it read of the
// problem hashes (see Problems) as known, and then none is read again.
func (s *Store) ScheduleData(ctx context.Context, names []string, n int, fields []string, known *Problems) ([]ScheduleData, error) {
	problems := s.Keys.problems()
	var reads [len(problems)]fieldsRead
	var sizes [len(problems)]*redis.IntCmd
	var askSizes func(redis.Pipeliner)
	if known != nil {
		reads = [...]fieldsRead{{known: known.Paused}, {known: known.Failing}, {known: known.Active}}
	} else {
		askSizes = func(p redis.Pipeliner) {
			for i, key := range problems {
				sizes[i] = p.HLen(ctx, key)
			}
		}
	}
	if err := s.settleCountersWith(ctx, askSizes); err != nil {
		return nil, err
	}
	var ids []*redis.StringSliceCmd
	var statCmds []*redis.SliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if n > 0 {
			for _, name := range names {
				ids = append(ids, p.ZRevRange(ctx, s.Keys.History(name), 0, int64(n)-1))
			}
		}
		statCmds = s.queueStatFields(ctx, p, names)
		if known == nil {
			for i, key := range problems {
				reads[i] = queueFieldsRead(ctx, p, key, names, sizes[i].Val())
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleData, len(names))
	stats := counterRows(len(names), fields)
	for i := range out {
		out[i].Stats = stats[i]
	}
	statFieldsInto(stats, statCmds, pickCounters(fields))
	err = reads[0].each(ctx, s, names, func(i int, v string) { out[i].Pause = ParsePause(v) })
	if err == nil {
		err = reads[1].each(ctx, s, names, func(i int, v string) { out[i].FailingSince, _ = strconv.ParseInt(v, 10, 64) })
	}
	if err == nil {
		err = reads[2].each(ctx, s, names, func(i int, v string) { out[i].Active = v })
	}
	if err != nil {
		return nil, err
	}
	var all []string
	for _, c := range ids {
		all = append(all, c.Val()...)
	}
	if len(all) == 0 {
		return out, nil
	}
	recs, err := s.Records(ctx, all)
	index := make(map[string]int, len(names))
	for i, name := range names {
		index[name] = i
	}
	for _, r := range recs {
		if i, ok := index[r.Schedule]; ok {
			out[i].Recent = append(out[i].Recent, r)
		}
	}
	return out, err
}

// scanCount is how many fields one HSCAN step asks for.
const scanCount = 1000

// Known returns every schedule name the namespace holds state for: a
// cursor, a pause or counters. It reads the three hashes in HSCAN steps:
// one HKEYS of a hash of 100,000 schedules holds Redis past the 5 ms any
// one call may block it for.
func (s *Store) Known(ctx context.Context) ([]string, error) {
	if err := s.settleCounters(ctx); err != nil {
		return nil, err
	}
	found := map[string]struct{}{}
	byName := func(name, _ string) { found[name] = struct{}{} }
	if err := s.scanHash(ctx, s.Keys.Cursors, byName); err != nil {
		return nil, err
	}
	if err := s.scanHash(ctx, s.Keys.Paused, byName); err != nil {
		return nil, err
	}
	if err := s.scanHash(ctx, s.Keys.Counters(), byName); err != nil {
		return nil, err
	}
	return slices.Collect(maps.Keys(found)), nil
}

// scanHash calls each with every field and value of key, read in HSCAN
// steps of scanCount, each of which holds Redis for a moment whatever the
// size of the hash. A field may come more than once (HSCAN's guarantee
// allows it while Redis resizes the hash): each must take a repeat as the
// same field, not a new one.
func (s *Store) scanHash(ctx context.Context, key string, each func(field, value string)) error {
	return s.scanHashFrom(ctx, key, 0, each)
}

// scanHashFrom is scanHash going on from a cursor an earlier step returned.
func (s *Store) scanHashFrom(ctx context.Context, key string, cursor uint64, each func(field, value string)) error {
	for {
		// HSCAN with values: NOVALUES needs Redis 7.4.
		pairs, next, err := s.rdb.HScan(ctx, key, cursor, "", scanCount).Result()
		if err != nil {
			return err
		}
		for i := 0; i+1 < len(pairs); i += 2 {
			each(pairs[i], pairs[i+1])
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// backfilled is the key that says the namespace's failing hash was filled
// in from the history once.
func (k Keys) backfilled() string { return k.Failing() + ":backfilled" }

// Backfilled reports whether the failing hash was filled in from the
// history (see MarkBackfilled).
func (s *Store) Backfilled(ctx context.Context) (bool, error) {
	n, err := s.rdb.Exists(ctx, s.Keys.backfilled()).Result()
	return n == 1, err
}

// MarkBackfilled records that the failing hash was filled in from the
// history; replicas that start meanwhile may fill it in too, which
// MarkFailing makes harmless.
func (s *Store) MarkBackfilled(ctx context.Context) error {
	return s.rdb.Set(ctx, s.Keys.backfilled(), 1, 0).Err()
}

// MarkFailing marks name failing since atMS unless a worker already wrote
// its state.
func (s *Store) MarkFailing(ctx context.Context, name string, atMS int64) error {
	return s.rdb.HSetNX(ctx, s.Keys.Failing(), name, atMS).Err()
}
