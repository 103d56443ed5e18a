package redisengine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/lease"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

var _ engine.Namespaces = (*Engine)(nil)

// identityScript publishes this replica's identity, prunes stale entries,
// and decides whose the namespace is: the identity recorded as its owner
// while any replica of that identity beats, else this one's.
//
//	KEYS[1] zset "<identity>|<replica>" -> last beat (Redis time, ms)
//	KEYS[2] owner identity
//	ARGV[1] identity, ARGV[2] replica, ARGV[3] staleness ms
//	returns {owner, previous owner if this call took it over or "", live members...}
var identityScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1] .. '|' .. ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local live = redis.call('ZRANGE', KEYS[1], 0, -1)
local owner = redis.call('GET', KEYS[2])
local took = ''
if owner ~= ARGV[1] then
  local alive = false
  if owner then
    for _, m in ipairs(live) do
      if string.sub(m, 1, #owner + 1) == owner .. '|' then alive = true end
    end
  end
  if not alive then
    took = owner or ''
    owner = ARGV[1]
    redis.call('SET', KEYS[2], owner)
  end
end
local out = {owner, took}
for _, m in ipairs(live) do out[#out + 1] = m end
return out
`)

// ClaimNamespace runs identityScript, bounded by the lease's call timeout.
func (e *Engine) ClaimNamespace(ctx context.Context, identity, replica string, stale time.Duration) (engine.NamespaceClaim, error) {
	cctx, cancel := context.WithTimeout(ctx, e.CallTimeout())
	defer cancel()
	res, err := lease.Obey(cctx, func(ctx context.Context) ([]any, error) {
		return identityScript.Run(ctx, e.Client, []string{e.Keys.Registries, e.Keys.Owner}, identity, replica, stale.Milliseconds()).Slice()
	})
	if err == nil && len(res) < 2 {
		err = fmt.Errorf("identity script: %d values, want at least 2", len(res))
	}
	if err != nil {
		return engine.NamespaceClaim{}, err
	}
	var c engine.NamespaceClaim
	c.Owner, _ = res[0].(string)
	c.TookFrom, _ = res[1].(string)
	for _, m := range res[2:] {
		member, _ := m.(string)
		if r, ok := replicaOf(member); ok {
			c.Live = append(c.Live, r)
		}
	}
	return c, nil
}

// replicaOf reads a Registries member, "<identity>|<replica>".
func replicaOf(member string) (engine.NamespaceReplica, bool) {
	at := strings.LastIndexByte(member, '|')
	if at < 0 {
		return engine.NamespaceReplica{}, false
	}
	return engine.NamespaceReplica{Identity: member[:at], Replica: member[at+1:]}, true
}

// ProbeNamespace reads namespace's lease, cursors and identities in one
// round trip, in the hash-tagged key layout and in the older one (a
// deployment of an earlier version still runs there until it is upgraded:
// layout.go).
func (e *Engine) ProbeNamespace(ctx context.Context, namespace string, names []string) (engine.NamespaceProbe, error) {
	layouts := []store.Keys{store.NewKeys(namespace), store.NewLegacyKeys(namespace)}
	leaseCmds := make([]*redis.StringCmd, len(layouts))
	cursorsCmds := make([]*redis.SliceCmd, len(layouts))
	identitiesCmds := make([]*redis.StringSliceCmd, len(layouts))
	_, err := lease.Obey(ctx, func(ctx context.Context) ([]redis.Cmder, error) {
		return e.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, keys := range layouts {
				leaseCmds[i] = p.Get(ctx, keys.Lease)
				cursorsCmds[i] = p.HMGet(ctx, keys.Cursors, names...)
				identitiesCmds[i] = p.ZRange(ctx, keys.Registries, 0, -1)
			}
			return nil
		})
	})
	if errors.Is(err, redis.Nil) {
		err = nil
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOPERM") {
			err = fmt.Errorf("%w: %w", engine.ErrNoAccess, err)
		}
		return engine.NamespaceProbe{}, err
	}
	p := engine.NamespaceProbe{HasCursor: make([]bool, len(names))}
	for i := range layouts {
		// The old lease's tombstone is no holder: that layout has moved.
		if v := leaseCmds[i].Val(); v != "" && v != legacyTombstone {
			p.LeaseHeld = true
		}
		for j, v := range cursorsCmds[i].Val() {
			p.HasCursor[j] = p.HasCursor[j] || v != nil
		}
		for _, m := range identitiesCmds[i].Val() {
			if r, ok := replicaOf(m); ok {
				p.Identities = append(p.Identities, r)
			}
		}
	}
	return p, nil
}
