package runtime

import (
	"context"
	"time"

	"github.com/belfry/belfry/runtime/internal/store"
)

// FamilySummary is a family as a list of schedules shows it: one row,
// whatever the number of members.
type FamilySummary struct {
	// Members is the number of members.
	Members int64
	// Next is the earliest next slot of any member after now, in that
	// member's zone; zero when the family has no member (or none fires
	// again). A paused member's slot counts: it comes due and is recorded
	// paused.
	Next time.Time
	// Buckets is the number of distinct (zone, expression) pairs among
	// the members: the leader's timer entries for the family.
	Buckets int
}

// FamilySummary returns the family's member count and its next run across
// members. It costs two reads whatever the member count: members sharing a
// zone and an expression share a bucket, and the next run is the earliest
// of the buckets' next slots, computed from the bucket index alone.
func (r *Runtime) FamilySummary(ctx context.Context, family string) (FamilySummary, error) {
	fam, err := r.family(family)
	if err != nil {
		return FamilySummary{}, err
	}
	var out FamilySummary
	if out.Members, err = r.store.MemberCount(ctx, family); err != nil {
		return out, err
	}
	buckets, err := r.store.BucketsChangedAfter(ctx, family, -1)
	if err != nil {
		return out, err
	}
	out.Buckets = len(buckets)
	now := r.clock.Now()
	for _, b := range buckets {
		s, err := fam.ForMember(store.SplitBucket(b.Bucket))
		if err != nil {
			continue // the engine does not schedule it either, and logs why
		}
		if next := s.Next(now); !next.IsZero() && (out.Next.IsZero() || next.Before(out.Next)) {
			out.Next = next.In(s.Location())
		}
	}
	return out, nil
}
