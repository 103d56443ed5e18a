package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The lease is one row of belfry_leader per namespace: holder
// ("<replica>|<instance>", '' when released), term and expires_at, all
// written by single statements on the database's clock
// (clock_timestamp()), so replicas whose clocks differ agree on it.
//
//   - A follower's acquire takes the row when it has expired or was
//     released, and raises the term; a row that is already this
//     instance's and alive is resumed with its term (a reply lost).
//     Terms only rise: a release keeps the row and its term.
//   - The holder renews every TTL/3 (compare on holder and term, extend
//     expires_at) and trusts its lease until the moment it sent its last
//     successful acquire or renewal plus TTL minus TTL/10, by its own
//     clock; it steps down when a renewal fails or is refused.
//   - A release (graceful shutdown, handover) empties holder and sends
//     NOTIFY belfry_leader; followers LISTEN on a connection of their
//     own and try at once, so a takeover does not wait for the TTL.
//     LISTEN rather than polling: a follower's cost stays one call per
//     TTL however quick the handover must be.
//   - Every call is bounded by TTL/3, and by the trust left while
//     leading, whatever the driver does (engine.Obey).
//   - About once a TTL a call carries the replica's heartbeat
//     (belfry_replica: its instance and process, on the database's
//     clock); a heartbeat that finds another live instance under its name
//     reports a duplicate replica name.
//
// Leadership only saves work: two replicas that both believe they lead
// still insert each slot once (the slot table's primary key). The fence
// is checked besides, in the enqueue's transaction: a write of an ended
// term is refused with engine.ErrNotLeader.

// notifyChannel is the channel releases are announced on; the payload is
// "<namespace>|<holder>".
const notifyChannel = "belfry_leader"

type election struct {
	e        *Engine
	replica  string
	instance string
	process  string
	ttl      time.Duration

	mu              sync.Mutex
	term            int64 // held, 0 when not
	trustedUntil    time.Time
	since           time.Time
	created         uint64
	lastBeat        time.Time
	beaten          bool
	duplicate       engine.Duplicate
	coolFrom        time.Time
	coolUntil       time.Time
	lastPrune       time.Time
	lastRecordPrune time.Time

	changed chan struct{}
	wake    chan struct{}
}

func newElection(e *Engine) election {
	b := make([]byte, 8)
	rand.Read(b)
	host, _ := os.Hostname()
	return election{e: e, replica: e.rt.Replica, instance: hex.EncodeToString(b),
		process: engine.Process{PID: os.Getpid(), Host: host}.String(), ttl: e.rt.LeaseTTL,
		changed: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
}

func (l *election) holderValue() string { return l.replica + "|" + l.instance }

// now is the runtime's clock, on which the trust window is measured, as
// the Redis engine's lease measures it; the lease row itself lives on the
// database's clock.
func (l *election) now() time.Time { return l.e.clock.Now() }

func (l *election) elapsed(since time.Time) time.Duration { return l.now().Sub(since) }

func (l *election) until(t time.Time) time.Duration { return t.Sub(l.now()) }

// RenewEvery is TTL/3: two renewals can fail before the trust ends.
func (l *election) RenewEvery() time.Duration { return l.ttl / 3 }

func (l *election) trustMargin() time.Duration { return l.ttl / 10 }

func (l *election) callTimeout() time.Duration { return l.ttl / 3 }

func (l *election) heartbeatStale() time.Duration { return 3 * l.ttl }

// Current is the term this replica holds and trusts.
func (l *election) Current() (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.term == 0 || l.now().After(l.trustedUntil) {
		return "", false
	}
	return strconv.FormatInt(l.term, 10), true
}

func (l *election) Created() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.created
}

func (l *election) Changed() <-chan struct{} { return l.changed }

func (l *election) Since() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.term == 0 {
		return time.Time{}
	}
	return l.since
}

func (l *election) Duplicate() (engine.Duplicate, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.duplicate
	return d, d.Other != "" && l.elapsed(d.LastSeen) < l.heartbeatStale()
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// StepDown stops leading at once.
func (l *election) StepDown(reason string) {
	l.stepDown(slog.LevelWarn, "lease lost: this replica stops scheduling", reason)
}

func (l *election) stepDown(level slog.Level, msg, reason string) {
	l.mu.Lock()
	was := l.term
	l.term = 0
	l.mu.Unlock()
	if was != 0 {
		l.e.log.Log(context.Background(), level, msg, "term", was, "reason", reason)
		signal(l.changed)
	}
}

func (l *election) setLeader(term int64, sent time.Time, created bool) {
	l.mu.Lock()
	gained := l.term != term
	lapsed := !gained && l.now().After(l.trustedUntil)
	l.term = term
	l.trustedUntil = sent.Add(l.ttl - l.trustMargin())
	if gained {
		l.since = l.now()
	}
	if created {
		l.created++
	}
	l.mu.Unlock()
	if gained {
		l.e.log.Info("lease acquired: this replica schedules", "term", term)
	}
	if gained || lapsed {
		signal(l.changed)
	}
}

// callBound is how long the next call may take: callTimeout, and no
// longer than the trust left, so a holder never learns of a failed
// renewal after its trust lapsed.
func (l *election) callBound() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	bound := l.callTimeout()
	if left := l.until(l.trustedUntil); l.term != 0 && left > 0 && left < bound {
		bound = left
	}
	return bound
}

func (l *election) coolDownLeft() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, l.until(l.coolUntil))
}

// Run acquires, renews and watches the lease until ctx ends.
func (l *election) Run(ctx context.Context) {
	go l.listen(ctx)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		var wait time.Duration
		var err error
		l.mu.Lock()
		holding := l.term != 0
		l.mu.Unlock()
		switch {
		case l.refused(ctx, holding):
			wait = l.RenewEvery()
		case holding:
			wait, err = l.renew(ctx)
			l.pruneIfDue(ctx)
		default:
			wait, err = l.acquire(ctx, l.coolDownLeft() > 0)
		}
		l.e.called(err)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait, backoff = backoff, min(2*backoff, 5*time.Second)
		} else {
			backoff = 100 * time.Millisecond
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-l.wake:
			timer.Stop()
		}
	}
}

// refused asks the runtime's MayLead, and gives the lease up (holding)
// when this replica may not lead: it neither acquires nor renews while
// the refusal stands.
func (l *election) refused(ctx context.Context, holding bool) bool {
	if l.e.rt.MayLead == nil {
		return false
	}
	err := l.e.rt.MayLead(ctx)
	if err == nil {
		return false
	}
	if holding {
		l.release(ctx, slog.LevelError, "this replica may not lead: "+err.Error())
	}
	return true
}

// bounded runs call within callBound, returning when it passes whatever
// the driver does.
func (l *election) bounded(ctx context.Context, call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, l.callBound())
	defer cancel()
	_, err := engine.Obey(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}

// acquireSQL takes the lease when it is free (expired or released) or is
// already this instance's and alive (resumed, same term), and reports the
// term it holds (NULL if none), the term before, and the holder's
// remaining life in ms when another holds it.
const acquireSQL = `
WITH old AS (
    SELECT term, holder, expires_at > clock_timestamp() AS live,
           greatest(0, belfry_ms(expires_at) - belfry_ms(clock_timestamp())) AS left_ms
    FROM belfry_leader WHERE namespace = $1
), up AS (
    INSERT INTO belfry_leader AS l (namespace, holder, term, acquired_at, expires_at)
    SELECT $1, $2, 1, clock_timestamp(), clock_timestamp() + $3 * interval '1 millisecond' WHERE NOT $4
    ON CONFLICT (namespace) DO UPDATE SET
        term = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp() THEN l.term ELSE l.term + 1 END,
        acquired_at = CASE WHEN l.holder = EXCLUDED.holder AND l.expires_at > clock_timestamp() THEN l.acquired_at ELSE clock_timestamp() END,
        holder = EXCLUDED.holder,
        expires_at = EXCLUDED.expires_at
    WHERE l.expires_at <= clock_timestamp() OR l.holder = '' OR l.holder = EXCLUDED.holder
    RETURNING l.term
)
SELECT (SELECT term FROM up), (SELECT term FROM old), coalesce((SELECT holder FROM old WHERE live), ''),
       coalesce((SELECT left_ms FROM old WHERE live), 0)`

// heartbeatSQL records this replica's heartbeat and returns the instance
// that beat under its name before, with how long ago (ms).
const heartbeatSQL = `
WITH old AS (
    SELECT instance, belfry_ms(clock_timestamp()) - belfry_ms(seen_at) AS ago
    FROM belfry_replica WHERE namespace = $1 AND replica = $2
), up AS (
    INSERT INTO belfry_replica (namespace, replica, instance, process, seen_at)
    VALUES ($1, $2, $3, $4, clock_timestamp())
    ON CONFLICT (namespace, replica) DO UPDATE SET instance = EXCLUDED.instance, process = EXCLUDED.process, seen_at = EXCLUDED.seen_at
)
SELECT coalesce((SELECT instance FROM old), ''), coalesce((SELECT ago FROM old), 0)`

// beatDue says whether a call should carry a heartbeat, about once per
// TTL, and assumes it lands.
func (l *election) beatDue() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.elapsed(l.lastBeat) < l.ttl*9/10 {
		return false
	}
	l.lastBeat = l.now()
	return true
}

// queueBeat sends the heartbeat with b's batch and notes, once it landed,
// a live other process using this replica's name.
func (l *election) queueBeat(b *pgx.Batch) {
	b.Queue(heartbeatSQL, l.e.ns, l.replica, l.instance, l.process).QueryRow(func(row pgx.Row) error {
		var other string
		var ago int64
		if err := row.Scan(&other, &ago); err != nil {
			return err
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.beaten && other != "" && other != l.instance && time.Duration(ago)*time.Millisecond < l.heartbeatStale() {
			first := l.duplicate.Other != other
			l.duplicate = engine.Duplicate{Replica: l.replica, Instance: l.instance, Other: other, LastSeen: l.now()}
			if first {
				l.e.log.Error("DUPLICATE REPLICA NAME: "+l.duplicate.String(), "replica", l.replica)
			}
		}
		l.beaten = true
		return nil
	})
}

// acquire tries once to take the lease (holdOff: only beat and look) and
// returns when to try or renew next.
func (l *election) acquire(ctx context.Context, holdOff bool) (time.Duration, error) {
	sent := l.now()
	var term, before *int64
	var holder string
	var leftMS int64
	err := l.bounded(ctx, func(ctx context.Context) error {
		b := &pgx.Batch{}
		if l.beatDue() {
			l.queueBeat(b)
		}
		b.Queue(acquireSQL, l.e.ns, l.holderValue(), l.ttl.Milliseconds(), holdOff).QueryRow(func(row pgx.Row) error {
			return row.Scan(&term, &before, &holder, &leftMS)
		})
		return l.e.pool.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return 0, err
	}
	if term != nil {
		l.setLeader(*term, sent, before == nil || *before != *term)
		return max(0, l.RenewEvery()-l.elapsed(sent)), nil
	}
	if holdOff && holder == "" && l.endCoolDownUnheld() {
		return 0, nil
	}
	wait := time.Duration(leftMS)*time.Millisecond + 2*time.Millisecond
	if holder == "" || wait > l.ttl {
		wait = min(l.ttl, l.RenewEvery())
	}
	return wait, nil
}

// endCoolDownUnheld ends a handover's cool-down when nobody took the lease
// within a TTL of it.
func (l *election) endCoolDownUnheld() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.elapsed(l.coolFrom) < l.ttl {
		return false
	}
	l.coolUntil = time.Time{}
	return true
}

// renew extends the held lease, stepping down when that fails.
func (l *election) renew(ctx context.Context) (time.Duration, error) {
	l.mu.Lock()
	term := l.term
	l.mu.Unlock()
	sent := l.now()
	var renewed bool
	err := l.bounded(ctx, func(ctx context.Context) error {
		b := &pgx.Batch{}
		if l.beatDue() {
			l.queueBeat(b)
		}
		b.Queue(`UPDATE belfry_leader SET expires_at = clock_timestamp() + $4 * interval '1 millisecond'
			WHERE namespace = $1 AND holder = $2 AND term = $3 AND expires_at > clock_timestamp()`,
			l.e.ns, l.holderValue(), term, l.ttl.Milliseconds()).Exec(func(ct pgconn.CommandTag) error {
			renewed = ct.RowsAffected() == 1
			return nil
		})
		return l.e.pool.SendBatch(ctx, b).Close()
	})
	switch {
	case err != nil:
		l.StepDown("renewal failed: " + err.Error())
		return 0, err
	case !renewed:
		l.StepDown("another replica holds the lease")
		return 0, nil
	}
	l.setLeader(term, sent, false)
	return max(0, l.RenewEvery()-l.elapsed(sent)), nil
}

// Release gives the lease up, if this instance holds it (trusted or not),
// and announces it so that a follower takes over at once; the replica's
// heartbeat goes with it.
func (l *election) Release(ctx context.Context) {
	l.release(ctx, slog.LevelInfo, "shutting down")
}

// release steps down for reason and gives the lease up.
func (l *election) release(ctx context.Context, level slog.Level, reason string) {
	l.stepDown(level, "lease released: this replica stops scheduling", reason)
	ctx, cancel := context.WithTimeout(ctx, l.callTimeout())
	defer cancel()
	_, err := engine.Obey(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, l.e.inTx(ctx, func(tx pgx.Tx) error {
			// The replica leaves the list at once, as it does on Redis,
			// rather than when its heartbeat goes stale.
			if _, err := tx.Exec(ctx, `DELETE FROM belfry_replica WHERE namespace = $1 AND replica = $2 AND instance = $3`,
				l.e.ns, l.replica, l.instance); err != nil {
				return err
			}
			return releaseIn(ctx, tx, l.e.ns, l.holderValue())
		})
	})
	if err != nil {
		l.e.log.Warn("could not release the lease; a follower takes over when it expires", "err", err)
	}
}

// releaseIn empties the lease of holder, keeping its term, and announces
// it on commit.
func releaseIn(ctx context.Context, tx pgx.Tx, ns, holder string) error {
	tag, err := tx.Exec(ctx, `UPDATE belfry_leader SET holder = '', expires_at = clock_timestamp() WHERE namespace = $1 AND holder = $2`, ns, holder)
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, ns+"|"+holder)
	return err
}

// listen wakes the follower loop when another instance releases the lease
// of this namespace, on a connection of its own, reconnecting after a
// failure.
func (l *election) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := l.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		l.e.log.Debug("lease notifications: reconnecting", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (l *election) listenOnce(ctx context.Context) error {
	pooled, err := l.e.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection may be left mid-wait: it is closed, not given back.
	conn := pooled.Hijack()
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(ctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	// A release announced before the LISTEN took hold was not heard: one
	// more look at the lease covers it.
	signal(l.wake)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		ns, holder, _ := strings.Cut(n.Payload, "|")
		if ns == l.e.ns && !strings.HasSuffix(holder, "|"+l.instance) {
			signal(l.wake)
		}
	}
}

// Holder reads the lease and the replicas with a fresh heartbeat.
func (e *Engine) Holder(ctx context.Context) (engine.Holder, error) {
	return engine.Obey(ctx, func(ctx context.Context) (engine.Holder, error) {
		var h engine.Holder
		var holder string
		var term int64
		err := e.pool.QueryRow(ctx, `SELECT holder, term FROM belfry_leader WHERE namespace = $1 AND expires_at > clock_timestamp()`,
			e.ns).Scan(&holder, &term)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return h, err
		}
		if holder != "" {
			h.Replica, h.Instance, _ = strings.Cut(holder, "|")
			h.Token = term
		}
		rows, err := e.pool.Query(ctx, `SELECT replica, process FROM belfry_replica
			WHERE namespace = $1 AND seen_at > clock_timestamp() - $2 * interval '1 millisecond' ORDER BY replica`,
			e.ns, e.heartbeatStale().Milliseconds())
		if err != nil {
			return h, err
		}
		h.Processes = map[string]engine.Process{}
		var name, proc string
		_, err = pgx.ForEachRow(rows, []any{&name, &proc}, func() error {
			h.Replicas = append(h.Replicas, name)
			if pid, host, ok := strings.Cut(proc, " "); ok {
				if n, err := strconv.Atoi(pid); err == nil {
					h.Processes[name] = engine.Process{PID: n, Host: host}
				}
			}
			return nil
		})
		return h, err
	})
}

// Handover releases the lease to another live replica unless a recent
// handover's window holds or none is alive (see engine.Election).
func (l *election) Handover(ctx context.Context, reason string, base, limit time.Duration) (engine.HandoverOutcome, time.Duration, error) {
	l.mu.Lock()
	term := l.term
	if term == 0 || l.now().After(l.trustedUntil) {
		l.mu.Unlock()
		return engine.HandoverNotHeld, 0, nil
	}
	l.coolUntil = l.now().Add(2 * l.callTimeout())
	l.mu.Unlock()
	outcome, wait := engine.HandoverNotHeld, time.Duration(0)
	ctx, cancel := context.WithTimeout(ctx, l.callTimeout())
	defer cancel()
	_, err := engine.Obey(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, l.e.inTx(ctx, func(tx pgx.Tx) error {
			var held bool
			var handovers int64
			var blockedMS int64
			// The memory of handovers lasts a few windows: after a calm
			// stretch the count starts again.
			err := tx.QueryRow(ctx, `SELECT holder = $2 AND term = $3 AND expires_at > clock_timestamp(),
					CASE WHEN handover_until IS NULL OR handover_until < clock_timestamp() - 3 * $4 * interval '1 millisecond'
						THEN 0 ELSE handovers END,
					coalesce(greatest(0, belfry_ms(handover_until) - belfry_ms(clock_timestamp())), 0)
				FROM belfry_leader WHERE namespace = $1 FOR UPDATE`, l.e.ns, l.holderValue(), term, limit.Milliseconds()).Scan(&held, &handovers, &blockedMS)
			switch {
			case errors.Is(err, pgx.ErrNoRows) || (err == nil && !held):
				return nil
			case err != nil:
				return err
			case blockedMS > 0:
				outcome, wait = engine.HandoverRecent, time.Duration(blockedMS)*time.Millisecond
				return nil
			}
			var others int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM belfry_replica WHERE namespace = $1 AND replica <> $2
				AND seen_at > clock_timestamp() - $3 * interval '1 millisecond'`, l.e.ns, l.replica, l.heartbeatStale().Milliseconds()).Scan(&others); err != nil {
				return err
			}
			if others == 0 {
				outcome = engine.HandoverAlone
				return nil
			}
			window := min(base<<min(handovers, 40), limit)
			if _, err := tx.Exec(ctx, `UPDATE belfry_leader SET handovers = $3,
				handover_until = clock_timestamp() + $2 * interval '1 millisecond' WHERE namespace = $1`, l.e.ns, window.Milliseconds(), handovers+1); err != nil {
				return err
			}
			outcome, wait = engine.HandedOver, window
			return releaseIn(ctx, tx, l.e.ns, l.holderValue())
		})
	})
	l.mu.Lock()
	if err != nil || outcome != engine.HandedOver {
		l.coolUntil = time.Time{}
	} else {
		l.coolFrom, l.coolUntil = l.now(), l.now().Add(wait)
	}
	l.mu.Unlock()
	if err != nil || outcome != engine.HandedOver {
		return outcome, wait, err
	}
	l.stepDown(slog.LevelInfo, "lease released: this replica stops scheduling",
		fmt.Sprintf("handed over (%s); staying out of the election for %s", reason, wait))
	signal(l.wake)
	return engine.HandedOver, wait, nil
}
