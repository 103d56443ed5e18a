// Package lease is the scheduler lease: one replica at a time holds it and
// only that replica enqueues.
//
// # States
//
// One key, "<namespace>:lease", holds "<replica>|<token>" where the token
// comes from INCR on "<namespace>:lease:token", so every tenure has a
// fencing token larger than any before it. A replica is in one of two
// states:
//
//   - Follower: it tries SET NX PX (a script that also records its
//     heartbeat). When the key exists the script returns its remaining life,
//     and the follower tries again the moment it expires, not on a blind poll;
//     a holder that shuts down publishes on "<namespace>:lease:released" so
//     followers try at once.
//   - Holder: it renews every TTL/3 with compare-and-PEXPIRE.
//
// # Trust window
//
// The holder trusts its lease only until the moment it *sent* its last
// successful acquire or renewal plus TTL minus a margin (TTL/10), measured
// on its clock (the monotonic reading of the real clock), so the trust
// window ends before the key can expire in Redis whatever the network
// delay. It steps down the moment a renewal fails or is refused, or when the
// trust window lapses (a paused process); a renewal that succeeds after a
// lapse restores trust and signals Changed, so the scheduler resumes.
//
// # Stepping down and resuming
//
// A holder that stepped down after a transient error resumes its lease if
// the key still holds its exact value (nobody took over meanwhile), keeping
// its token. On graceful shutdown the holder deletes its key with
// compare-and-DEL and publishes the release.
//
// # Fencing
//
// Checking the lease and then writing is a race: a holder paused between
// the two (GC, SIGSTOP, a VM migration) wakes up believing it leads. So every
// write the holder makes to scheduler state (cursors, the ledger of
// scheduled slots) runs in a script that first compares the lease key with
// the value the writer acted under (see the store package), and a rejected
// write makes the replica step down. The enqueue itself goes through asynq's
// own script, and the occurrence's task ID makes it idempotent while the ID
// is retained.
//
// # Heartbeats
//
// Heartbeats ride on lease calls, at most once per TTL, and use Redis's
// clock (TIME), not the replica's: a skewed heartbeat would make a live
// replica look dead. Stale entries are pruned when the replica list is read.
package lease
