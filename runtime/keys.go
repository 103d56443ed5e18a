package runtime

// keys names everything the runtime stores in Redis under its namespace.
// Keys are not hash-tagged: asynq itself is not Redis Cluster-safe.
type keys struct {
	lease    string // string "<replica>|<token>", PX = lease TTL
	token    string // counter: the fencing token of each new lease
	released string // pub/sub channel: a holder let go, followers try now
	replicas string // zset replica -> last heartbeat (Redis time, ms)
	cursors  string // hash schedule -> last slot handled (unix s)
	lastID   string // hash schedule -> last enqueued occurrence ID
	stats    string // hash "<schedule>:<counter>" -> count or unix ms
	prefix   string // + "occ:<id>" (hash per occurrence), "hist:<name>" (zset of ids)
}

func newKeys(ns string) keys {
	p := ns + ":"
	return keys{
		lease:    p + "lease",
		token:    p + "lease:token",
		released: p + "lease:released",
		replicas: p + "replicas",
		cursors:  p + "cursors",
		lastID:   p + "lastid",
		stats:    p + "stats",
		prefix:   p,
	}
}

func (k keys) occurrence(id string) string { return k.prefix + "occ:" + id }
func (k keys) history(name string) string  { return k.prefix + "hist:" + name }
