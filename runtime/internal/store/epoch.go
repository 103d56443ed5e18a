package store

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// replaceEpochScript sets the store's epoch to a new one while the lease is
// held: after a recorded loss, so that the store as it was before the loss
// (an old primary promoted again before it caught up) shows as another
// loss, whose token alone may not go back. Fenced.
//
//	KEYS[1] lease, KEYS[2] epoch
//	ARGV[1] lease value, ARGV[2] the new epoch
//	returns 1, or 0 if the lease is not held.
var replaceEpochScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
return 1
`)

// ReplaceEpoch sets the store's epoch to epoch while leaseValue holds the
// lease; ErrNotLeader when it does not.
func (s *Store) ReplaceEpoch(ctx context.Context, leaseValue, epoch string) error {
	n, err := s.Acks.Run(ctx, s.rdb, replaceEpochScript, []string{s.Keys.Lease, s.Keys.Epoch}, leaseValue, epoch).Int()
	if err != nil {
		return err
	}
	if n != 1 {
		return ErrNotLeader
	}
	return nil
}
