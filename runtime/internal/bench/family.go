package main

import (
	"context"
	"fmt"
	"github.com/belfry/belfry/runtime/internal/store"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/redis/go-redis/v9"
)

// familyResult is what benchFamily measures on one family of many members
// across many zones.
type familyResult struct {
	Members, Zones, SpikeMembers int
	// Upserts is members written per second by Families.SetMany in bulk.
	Upserts float64
	// RedisBytesPerMember is used_memory's growth per member written plus
	// the state a member has once it had a slot (its cursor and newest
	// occurrence, by MEMORY USAGE).
	RedisBytesPerMember float64
	// ProcessBytesPerMember is the leader's heap growth per member, after
	// it loaded the family and handled a spike.
	ProcessBytesPerMember float64
	// Takeover is from Run (no other holder) to the first enqueue of a
	// slot that came due before it.
	Takeover time.Duration
	// Spike is from a slot of SpikeMembers members in one zone to its last
	// enqueue, with the leader already leading.
	Spike time.Duration
	// Duplicates counts enqueues beyond one per (member, slot).
	Duplicates int
}

// summary is the family's part of the bench summary line.
func (f familyResult) summary() string {
	return fmt.Sprintf("family_takeover_s=%.3f family_spike20k_s=%.3f family_upserts_s=%.0f family_proc_bytes_member=%.0f family_redis_bytes_member=%.0f family_dup=%d",
		f.Takeover.Seconds(), f.Spike.Seconds(), f.Upserts, f.ProcessBytesPerMember, f.RedisBytesPerMember, f.Duplicates)
}

// familyZones lists up to n IANA zones of this host's zoneinfo, sorted.
func familyZones(n int) ([]string, error) {
	root := "/usr/share/zoneinfo"
	var zones []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name, _ := filepath.Rel(root, path)
		first := strings.SplitN(name, "/", 2)[0]
		if !strings.Contains(name, "/") || strings.ContainsAny(name, ".") || first == "posix" || first == "right" || first == "Etc" {
			return nil
		}
		if _, err := registry.LoadZone(name); err == nil {
			zones = append(zones, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing zones in %s: %w", root, err)
	}
	slices.Sort(zones)
	if len(zones) < n {
		return nil, fmt.Errorf("%s has %d zones; want %d", root, len(zones), n)
	}
	return zones[:n], nil
}

// benchFamily measures one family of members across zones on the Redis
// at addr: spike of them in UTC due every period (whole seconds dividing a
// minute; long enough to write the members in), the rest weekly in the
// other zones (not due during the run).
func benchFamily(addr string, members, zones, spike int, period time.Duration) (familyResult, error) {
	ctx := context.Background()
	res := familyResult{Members: members, Zones: zones, SpikeMembers: spike}
	zoneNames, err := familyZones(zones - 1)
	if err != nil {
		return res, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	defer rdb.Close()
	ns, queue := "famb"+strconv.FormatInt(time.Now().UnixNano(), 36), "famq"
	const family = "weekly-report"
	reg := registry.MustNew(registry.Schedule{Name: family, Expr: "0 9 * * MON", Zone: "UTC", Per: "tenant", Queue: queue,
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	newRuntime := func() (*runtime.Runtime, error) {
		return runtime.New(reg, runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: 2 * time.Second, Logger: quietLogger()})
	}
	writer, err := newRuntime()
	if err != nil {
		return res, err
	}

	before, err := usedMemory(ctx, rdb)
	if err != nil {
		return res, err
	}
	ms := make([]runtime.Member, members)
	for i := range ms {
		ms[i] = runtime.Member{Key: fmt.Sprintf("tenant-%06d", i)}
		if i < spike {
			ms[i].Zone, ms[i].Expr = "UTC", fmt.Sprintf("*/%d * * * * *", int(period.Seconds()))
		} else {
			ms[i].Zone = zoneNames[i%len(zoneNames)]
		}
	}
	// Written just after a slot of the spike members, so that the first
	// slot they have is the takeover's below, not also the one before.
	waitPastSlot(period, 100*time.Millisecond)
	start := time.Now()
	for lo := 0; lo < len(ms); lo += 10000 {
		if err := writer.Families().SetMany(ctx, family, ms[lo:min(lo+10000, len(ms))]); err != nil {
			return res, err
		}
	}
	upsert := time.Since(start)
	res.Upserts = float64(members) / upsert.Seconds()
	if limit := period / 2; upsert > limit { // the rest of the period is the next slot's margin
		return res, fmt.Errorf("writing %d members took %s; the spike slots need it under %s", members, upsert, limit)
	}
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return res, err
	}
	res.RedisBytesPerMember = float64(after-before) / float64(members)
	ms = nil

	goruntime.GC()
	var heapBefore goruntime.MemStats
	goruntime.ReadMemStats(&heapBefore)

	// Takeover: the spike members' slot has just passed and no replica
	// has handled it; the leader starts now.
	slot := waitPastSlot(period, 300*time.Millisecond)
	leader, err := newRuntime()
	if err != nil {
		return res, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	started := time.Now()
	go func() { leader.Run(runCtx); close(done) }()
	defer func() { cancel(); <-done }()
	pending := "asynq:{" + queue + "}:pending"
	first, err := waitLen(ctx, rdb, pending, 1, 10*time.Second)
	if err != nil {
		return res, fmt.Errorf("takeover: %w", err)
	}
	res.Takeover = first.Sub(started)
	if _, err := waitLen(ctx, rdb, pending, int64(spike), period); err != nil {
		return res, fmt.Errorf("takeover spike of %s: %w", slot.Format(time.TimeOnly), err)
	}

	// Spike while leading: the next slot, a period on.
	next := slot.Add(period)
	last, err := waitLen(ctx, rdb, pending, int64(2*spike), time.Until(next)+period)
	if err != nil {
		return res, fmt.Errorf("spike: %w", err)
	}
	res.Spike = last.Sub(next)
	// Anything beyond one per member and slot shows up meanwhile.
	time.Sleep(2 * time.Second)
	if n, err := rdb.LLen(ctx, pending).Result(); err == nil {
		res.Duplicates = int(n) - 2*spike
	}

	// What the leader keeps per member once it has had a slot (its cursor
	// and newest occurrence), measured on the members that had one.
	fk := store.KeyPrefix(ns) + "fam:{" + family + "}:"
	var stateBytes int64
	for _, key := range []string{fk + "c", fk + "last"} {
		n, err := rdb.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			return res, err
		}
		stateBytes += n
	}
	if handled, err := rdb.HLen(ctx, fk+"c").Result(); err == nil && handled > 0 {
		res.RedisBytesPerMember += float64(stateBytes) / float64(handled)
	}

	goruntime.GC()
	var heapAfter goruntime.MemStats
	goruntime.ReadMemStats(&heapAfter)
	res.ProcessBytesPerMember = float64(int64(heapAfter.HeapAlloc)-int64(heapBefore.HeapAlloc)) / float64(members)
	return res, nil
}

// waitPastSlot sleeps until just after the next multiple of period (by
// after) and returns that multiple.
func waitPastSlot(period, after time.Duration) time.Time {
	slot := time.Now().Truncate(period).Add(period)
	time.Sleep(time.Until(slot.Add(after)))
	return slot
}

// waitLen polls key's list length until it reaches n and returns when.
func waitLen(ctx context.Context, rdb *redis.Client, key string, n int64, within time.Duration) (time.Time, error) {
	deadline := time.Now().Add(within)
	for {
		l, err := rdb.LLen(ctx, key).Result()
		if err != nil {
			return time.Time{}, err
		}
		if l >= n {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s holds %d after %s; want %d", key, l, within, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// familyMain runs benchFamily alone: BENCH_FAMILY=1 go run ./runtime/internal/bench.
func familyMain() error {
	srv, err := startRedis()
	if err != nil {
		return err
	}
	defer srv.stop()
	res, err := benchFamily(srv.addr, 100000, 300, 20000, 30*time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "family: %d members, %d zones, %d due at once\nbench: %s\n", res.Members, res.Zones, res.SpikeMembers, res.summary())
	return nil
}
