// Package store is the runtime's state in Redis: the names of its keys, the
// Lua scripts that write scheduler state and the ledger, and the encoding of
// what they hold. It knows nothing of leases or schedules beyond their names;
// the lease package owns the lease's own scripts.
//
// Keys are not hash-tagged, so the runtime does not run on Redis Cluster:
// its scripts, the fenced enqueue above all, touch keys in several slots.
// (asynq's own keys share their queue's hash tag and do work there.)
package store

// Keys names everything the runtime stores under one namespace.
type Keys struct {
	Lease    string // string "<replica>|<instance>|<token>", PX = lease TTL
	Token    string // counter: the fencing token of each new lease
	Released string // pub/sub channel: a holder let go, followers try now
	Replicas string // zset replica -> last heartbeat (Redis time, ms); + ":<replica>" its instance ID (lease package)
	// ReplicaProcesses is a hash replica -> "<pid> <host>" of the process
	// that last beat under that name (lease package). Not under Replicas
	// + ":": a replica may be called anything but '|'.
	ReplicaProcesses string
	Cursors          string // hash schedule -> last slot handled (unix s)
	LastID           string // hash schedule -> last enqueued occurrence ID
	// Stats is the counters' old layout, hash "<schedule>:<counter>" ->
	// count or unix ms, which reads fold into Counters (settleCounters).
	Stats   string
	Paused  string // hash schedule -> JSON Pause
	Resumed string // hash schedule -> "<paused at> <resumed at>" (unix ms) of its last pause
	// PauseVersion is a string "<s>.<µs>.<n>" set anew by every write of
	// Paused or Resumed, so a reader knows its copy of them is current.
	PauseVersion string
	Epoch        string // string: a random ID the store was started with; gone or changed = data lost
	Lost         string // list of JSON LostWrites, newest first
	Acked        string // string, short-lived: the write Store.Acknowledged has replicas acknowledge
	// Registries is a zset "<registry identity>|<replica>" -> last beat
	// (Redis time, ms); Owner the identity the namespace belongs to.
	Registries string
	Owner      string
	Prefix     string // + "occ:<id>" (hash per occurrence), "hist:<name>" (zset of ids)
}

// NewKeys returns the keys of namespace ns.
func NewKeys(ns string) Keys {
	p := ns + ":"
	return Keys{
		Lease:            p + "lease",
		Token:            p + "lease:token",
		Released:         p + "lease:released",
		Replicas:         p + "replicas",
		ReplicaProcesses: p + "replicas|processes",
		Cursors:          p + "cursors",
		LastID:           p + "lastid",
		Stats:            p + "stats",
		Paused:           p + "paused",
		Resumed:          p + "resumed",
		PauseVersion:     p + "pausever",
		Epoch:            p + "epoch",
		Lost:             p + "lost",
		Acked:            p + "acked",
		Prefix:           p,

		Registries: p + "registries",
		Owner:      p + "owner",
	}
}

// Occurrence is the hash of one occurrence record.
func (k Keys) Occurrence(id string) string { return k.Prefix + "occ:" + id }

// History is the zset indexing a schedule's records by slot.
func (k Keys) History(name string) string { return k.Prefix + "hist:" + name }
