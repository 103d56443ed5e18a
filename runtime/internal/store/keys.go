// Package store is the runtime's state in Redis: the names of its keys, the
// Lua scripts that write scheduler state and the ledger, and the encoding of
// what they hold. It knows nothing of leases or schedules beyond their names;
// the lease package owns the lease's own scripts.
//
// Every key of a namespace carries the namespace as its hash tag
// ("belfry:{<ns>}:..."), so that on Redis Cluster they all live in one slot
// and each script touches that slot only. What must be written with a
// task (the queue's fence, the cursor marks) lives in the task's queue's
// slot instead, under asynq's own tag "{<queue>}" (QueueKeys). On a single
// Redis the same layout is used.
package store

import (
	"strings"

	"github.com/belfry/belfry/runtime/internal/pipeline"
)

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
func NewKeys(ns string) Keys { return keysUnder(KeyPrefix(ns)) }

// NewLegacyKeys returns the keys namespace ns had before they were
// hash-tagged, for what looks for a deployment of an earlier version.
func NewLegacyKeys(ns string) Keys { return keysUnder(LegacyKeyPrefix(ns)) }

func keysUnder(p string) Keys {
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

// KeyPrefix is what every key of namespace ns starts with: the namespace
// as the hash tag, so that every key of ns hashes to one Redis Cluster
// slot.
func KeyPrefix(ns string) string { return "belfry:{" + ns + "}:" }

// LegacyKeyPrefix is the prefix of namespace ns's keys before they were
// hash-tagged.
func LegacyKeyPrefix(ns string) string { return ns + ":" }

// QueueKeys names what namespace ns keeps in an asynq queue's slot: the
// keys a fenced enqueue writes beside the queue's tasks, in the same
// script. They carry the queue's hash tag as asynq's own keys do
// ("asynq:{<queue>}:...").
type QueueKeys struct {
	// Fence is a string, the lease value of the newest term that wrote
	// here: an enqueue of an older term is refused (pipeline.Fence).
	Fence string
	// Cursors is a hash schedule -> the slot (unix s) of its newest task
	// enqueued here, and LastID a hash schedule -> that task's ID: marks
	// written with the task, read with the namespace's own cursors
	// (Store.Cursors takes the higher).
	Cursors, LastID string
}

// NewQueueKeys returns namespace ns's keys in queue's slot.
func NewQueueKeys(ns, queue string) QueueKeys {
	fence := pipeline.QueueFenceKey(ns, queue) // the enqueue script's
	p := strings.TrimSuffix(fence, "fence")
	return QueueKeys{Fence: fence, Cursors: p + "cursors", LastID: p + "lastid"}
}
