// Package lease is the scheduler lease: one replica at a time holds it and
// only that replica enqueues.
//
// # States
//
// One key, "<namespace>:lease", holds "<replica>|<instance>|<token>" where
// the token comes from INCR on "<namespace>:lease:token", so every tenure
// has a fencing token larger than any before it, and the instance is a
// random ID each Lease draws when it is made (once per process), so the
// value names the one process that holds it even if two processes were
// given the same replica name, and a restarted replica never mistakes its
// previous incarnation's lease for its own. Replica names cannot contain
// '|'; ParseValue returns the replica and the token (and reads the older
// "<replica>|<token>" too). A replica is in one of two states:
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
// # Every call is bounded
//
// Each acquire, renewal and release gives up after CallTimeout (TTL/3),
// and Observe by its caller's deadline, enforced by the lease itself:
// go-redis honours a context deadline only on a client built with
// ContextTimeoutEnabled, and otherwise blocks for its ReadTimeout per
// attempt (retrying timeouts) or for ever. Renewals are sent TTL/3 after
// the previous send (not its reply), so a renewal gives up at about 2/3
// TTL, and never later than the end of the trust window (9/10 TTL): a
// holder cut off from Redis (a partition, a stalled server) steps down by
// itself within its trust rather than hang past it. A call given up on may
// still land later; every script is safe to land late or twice.
//
// # Lost replies
//
// A command whose reply is lost (the connection dies after Redis ran it)
// is sent again, by go-redis on EOF or by the next attempt. Each script is
// idempotent for its own instance:
//
//   - Acquire resumes any lease that carries this instance's ID: one it
//     stepped down from after a transient error while nobody took over
//     (keeping its token), or one a previous attempt created whose reply
//     never came. Without this a resent acquire saw the new lease as
//     someone else's and the replica waited out a whole TTL with the lease
//     held by nobody who knew it.
//   - Renew is compare-and-PEXPIRE on the exact value: running it twice
//     extends the same lease twice. Its trust window is measured from the
//     first send, so a resend can only make the key outlive the trust.
//   - Release is compare-and-DEL on the instance: a resend after the first
//     run deleted the key finds nothing of its own (or a follower's new
//     lease, which it leaves alone). Because it compares on the instance
//     and not on the value the holder last trusted, a shutdown also deletes
//     a lease it had stepped down from or whose acquire reply it missed.
//
// # Fencing
//
// Checking the lease and then writing is a race: a holder paused between
// the two (GC, SIGSTOP, a VM migration) wakes up believing it leads. So every
// write the holder makes to scheduler state (cursors, the ledger of
// scheduled slots) runs in a script that first compares the lease key with
// the value the writer acted under (see the store package), and a rejected
// write makes the replica step down. The enqueue itself is such a script
// too (the pipeline package writes asynq's tasks as asynq's Client would),
// so Redis refuses it once the key holds another value.
//
// # Handing over
//
// A holder behind a slow link keeps renewing while its enqueues fall
// behind; its caller measures that and calls Handover, which releases the
// lease to another replica (compare-and-DEL, published like a release) and
// keeps this one out of the election for a cool-down, heartbeating
// meanwhile. Handover refuses when no other replica heartbeats, and while
// the window of the namespace's previous handover holds ("<lease>:handover",
// on Redis's clock): the window doubles with each handover soon after the
// last, so when every replica is slow the lease does not go round.
//
// # Replica acknowledgements
//
// With Config.Acks on, an acquire or renewal counts only once that many
// Redis replicas have it (WAIT on the connection the script ran on). One
// that Redis ran but no replica acknowledged in time is a failure like a
// lost reply: an acquire does not lead, a renewal steps down. The key it
// left is this instance's, so the next acquire resumes it and is
// acknowledged in turn; if a failover lost it, whoever acquires first on
// the new primary leads. The acquire reports whether it created the token
// (INCR) or resumed a lease, so that a token counter gone back to exactly
// this instance's last token is told from a resumed lease.
//
// # Heartbeats and duplicate names
//
// Heartbeats ride on lease calls, at most once per TTL, and use Redis's
// clock (TIME), not the replica's: a skewed heartbeat would make a live
// replica look dead. Stale entries are pruned when the replica list is read.
// Each beat also records the process behind the name ("<pid> <host>", in
// a hash pruned and released with the heartbeat), so the admin can name
// the process an operator would stop.
//
// Each beat also stores its instance ID under "<namespace>:replicas:<replica>"
// (expiring with the heartbeat, 3 TTL). A beat that finds another instance
// there, after this instance's own earlier beat landed, means two live
// processes share the replica name: each logs one error per other instance
// and Duplicate reports it until the other has not been seen for 3 TTL.
// Both learn of it within about two TTLs. The lease itself stays safe (the
// values differ by instance), but the replica list and the ledger's replica
// field cannot tell the two apart. A restart under the same name is not
// flagged: the new instance's first beat may find the old one's ID, and the
// old one never beats again. Releases publish the released value, so a
// follower ignores only its own instance's release, not that of another
// process with its name.
package lease
