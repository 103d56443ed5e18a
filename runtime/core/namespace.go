package core

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

// Namespaces. Every key the runtime writes, and every occurrence ID, is
// under one namespace; the replicas of one service share it, so they share
// one lease and one set of cursors, and two services must never share one:
// the one that does not hold the lease would never run, and its tasks would
// reach the other's workers.
//
// The default namespace is therefore named after the service: after the
// first package of the registry (the import path crongen writes into each
// schedule; for a merged registry, the first registry's), and for a
// registry built by hand, whose schedules carry no package, after the main
// package of the binary. Both stay the same across a deploy that adds,
// changes or removes schedules, and differ between services. It reads
// "<last two path elements>-<8 hex digits of the path's SHA-256>", e.g.
// "service.jobs-1f0c33a2": readable in redis-cli, and unique even when
// every service calls its jobs package "jobs".
//
// What a name cannot prevent is two services configured with the same
// explicit Namespace. Each replica therefore publishes its registry
// identity (the same path) every 1.5 lease TTLs, and a namespace belongs to
// the identity that published there first. A replica of another identity that
// finds a live replica of the owner's does not lead — it would schedule
// from a foreign registry's cursors, and the owner's schedules would stop —
// and both sides say so once in the log, in Health, in the Snapshot and in
// metrics. Once no replica of the owner's identity beats any more, the
// namespace passes to the next identity that asks: a deploy that moves the
// first package of a service with an explicit Namespace waits for its old
// replicas to stop. Two services whose registries start with the same
// package have one identity, and are not told apart.

// NamespaceLegacy is the namespace every runtime used by default before the
// default was derived from the registry. A deployment that ran on it keeps
// its cursors and history by setting Options.Namespace to it.
const NamespaceLegacy = "belfry"

// DefaultNamespace is the namespace a runtime for reg uses when
// Options.Namespace is empty: named after the registry's first package
// (Registry.Packages), or for a registry whose schedules carry no package
// after the binary's main package, as "<last two path elements>-<8 hex
// digits of the path's SHA-256>", e.g. "service.jobs-1f0c33a2". It differs
// between services and stays the same when the schedules change.
func DefaultNamespace(reg *registry.Registry) string {
	return namespaceFor(registryIdentity(reg))
}

// registryIdentity is what tells reg's service from another: its first
// package, else the binary's main package path, else "".
func registryIdentity(reg *registry.Registry) string {
	if pkgs := reg.Packages(); len(pkgs) > 0 {
		return pkgs[0]
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		return info.Path
	}
	return ""
}

var notNamespaceRE = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// majorVersionRE matches a module's major version suffix, which names no
// service.
var majorVersionRE = regexp.MustCompile(`^v[0-9]+$`)

// namespaceFor names the namespace of identity: NamespaceLegacy when there
// is nothing to name it after.
func namespaceFor(identity string) string {
	if identity == "" {
		return NamespaceLegacy
	}
	var elems []string
	for _, e := range strings.Split(identity, "/") {
		if e != "" && !majorVersionRE.MatchString(e) {
			elems = append(elems, e)
		}
	}
	readable := strings.Join(elems[max(0, len(elems)-2):], ".")
	readable = strings.Trim(notNamespaceRE.ReplaceAllString(readable, "-"), "._-")
	if len(readable) > 48 {
		readable = strings.Trim(readable[len(readable)-48:], "._-")
	}
	sum := sha256.Sum256([]byte(identity))
	if readable == "" {
		return "ns-" + hex.EncodeToString(sum[:4])
	}
	return readable + "-" + hex.EncodeToString(sum[:4])
}

// namespaceCheckEvery is how often a replica publishes its identity and
// reads its namespace's: every 1.5 lease TTLs, well inside the 3 TTLs after
// which an entry counts as gone, for about three commands a minute (TTL
// 15 s).
func (r *Runtime) namespaceCheckEvery() time.Duration { return r.opts.LeaseTTL * 3 / 2 }

// ErrNamespaceContended: the namespace belongs to another registry, a
// replica of which is alive; this replica does not lead in it.
var ErrNamespaceContended = errors.New("namespace shared with another registry")

// namespaceWatch is this replica's last look at its namespace's identities.
type namespaceWatch struct {
	// looked is closed once the first look has been made (or failed).
	looked     chan struct{}
	lookedOnce sync.Once

	mu      sync.Mutex
	checked time.Time
	// owner is the identity the namespace belongs to, as last read.
	owner string
	// foreign are the live replicas of other identities, by identity.
	foreign map[string][]string
	logged  string // the problem last logged, so each is logged once
	checks  int    // looks that reached Redis
	// legacy says a live leader in NamespaceLegacy schedules this
	// registry's schedules; "" when not, or when Namespace was set.
	legacy        string
	legacyChecked time.Time
	legacyOff     bool          // the ACL refuses the old namespace's keys
	legacyEvery   time.Duration // legacyCheckEvery; tests shorten it
}

// mayLeadInNamespace is the lease's MayLead: Redis's settings and clock
// (mayLead), then the namespace's identities, as watchNamespace last saw
// them. It never waits on Redis for the namespace, so a slow link does not
// delay a renewal, except before the first look: a replica does not try to
// lead before it knows whose namespace it is in.
func (r *Runtime) mayLeadInNamespace(ctx context.Context) error {
	if err := r.mayLead(ctx); err != nil {
		return err
	}
	w := &r.namespace
	select {
	case <-w.looked:
	case <-ctx.Done():
		return ctx.Err()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refusal(r.identity)
}

// watchNamespace publishes this replica's identity and reads the
// namespace's every namespaceCheckEvery (sooner after a failure), until ctx
// ends.
func (r *Runtime) watchNamespace(ctx context.Context) {
	w := &r.namespace
	defer w.lookedOnce.Do(func() { close(w.looked) })
	namespaces, ok := r.eng.(engine.Namespaces)
	if !ok {
		return // an engine no other service can share
	}
	for ctx.Err() == nil {
		wait := r.namespaceCheckEvery()
		if !r.checkNamespace(ctx, namespaces) {
			wait = r.eng.RenewEvery()
		}
		w.lookedOnce.Do(func() { close(w.looked) })
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
		case <-timer.C:
		}
	}
}

// checkNamespace publishes this replica's identity and takes in who else
// beats in the namespace and whose it is; it reports whether Redis
// answered.
func (r *Runtime) checkNamespace(ctx context.Context, namespaces engine.Namespaces) bool {
	w := &r.namespace
	now := r.clock.Now()
	claim, err := namespaces.ClaimNamespace(ctx, r.identity, r.opts.Replica, 3*r.opts.LeaseTTL)
	if err != nil {
		return false // the lease's own call reports Redis being down
	}
	owner, took := claim.Owner, claim.TookFrom
	foreign := map[string][]string{}
	for _, m := range claim.Live {
		if m.Identity != r.identity {
			foreign[m.Identity] = append(foreign[m.Identity], m.Replica)
		}
	}
	if took != "" {
		r.log.Warn("this registry takes the namespace over from another one, none of whose replicas is alive any more",
			"namespace", r.opts.Namespace, "registry", r.identity, "previous", took)
	}
	w.mu.Lock()
	w.checked, w.owner, w.foreign = now, owner, foreign
	w.checks++
	problem := w.problemLocked(r.opts.Namespace, r.identity)
	log := problem != w.logged
	w.logged = problem
	w.mu.Unlock()
	switch {
	case log && problem != "":
		r.log.Error("NAMESPACE SHARED BY TWO REGISTRIES: "+problem, "namespace", r.opts.Namespace, "registry", r.identity)
	case log:
		r.log.Info("no other registry uses the namespace any more", "namespace", r.opts.Namespace)
	}
	r.checkLegacy(ctx, namespaces, now)
	return true
}

// refusal is why this replica may not lead, nil when it may: the namespace
// is another identity's, and a replica of it was alive at the last look.
func (w *namespaceWatch) refusal(identity string) error {
	if w.owner == "" || w.owner == identity || len(w.foreign[w.owner]) == 0 {
		return nil
	}
	return fmt.Errorf("%w: it belongs to registry %s (replicas %s)", ErrNamespaceContended, w.owner, strings.Join(w.foreign[w.owner], ", "))
}

// problemLocked says in words which other registries beat in the namespace,
// and who leads; "" when none does.
func (w *namespaceWatch) problemLocked(namespace, identity string) string {
	if len(w.foreign) == 0 {
		return ""
	}
	ids := make([]string, 0, len(w.foreign))
	for id := range w.foreign {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var others []string
	for _, id := range ids {
		others = append(others, fmt.Sprintf("%s (replicas %s)", id, strings.Join(w.foreign[id], ", ")))
	}
	verdict := "this replica leads here, the others do not"
	if w.owner != identity {
		verdict = "this replica does not lead here while the namespace's owner " + w.owner + " is alive"
	}
	return fmt.Sprintf("namespace %q is used by registry %s and by %s: %s; give each service its own Options.Namespace (or leave it empty for one derived from its registry)",
		namespace, identity, strings.Join(others, " and "), verdict)
}

// NamespaceContention says, when a replica of another registry beats in
// this runtime's namespace, which it is and who leads; "" otherwise.
func (d *Diagnostics) NamespaceContention() string {
	r := d.rt
	w := &r.namespace
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.clock.Now().Sub(w.checked) > 3*r.opts.LeaseTTL {
		return "" // not looked at lately: Redis is down, and says so itself
	}
	return w.problemLocked(r.opts.Namespace, r.identity)
}

// Namespace is the namespace the runtime's keys and occurrence IDs are
// under: Options.Namespace, or the default derived from the registry.
func (r *Runtime) Namespace() string { return r.opts.Namespace }

// legacyCheckEvery bounds how often a replica on a derived namespace looks
// for a live leader of its schedules in NamespaceLegacy.
const legacyCheckEvery = time.Minute

// legacyProbe is how many of the registry's schedules the legacy check
// looks up: enough to recognise the registry, bounded for a huge one.
const legacyProbe = 64

// checkLegacy looks for the deployment this runtime replaces: a runtime of
// an earlier version, on the old default namespace, that still holds a
// lease there and has cursors for this registry's schedules. Both then
// schedule the same slots under different IDs: every slot runs twice until
// the old replicas are gone. It is a loud warning, not a refusal, since
// replicas of earlier versions publish no identity to tell a predecessor
// from an unrelated service that happens to use the old namespace and a
// schedule name; replicas of this version that set the old namespace do,
// and a leader there of only other identities is not warned about.
func (r *Runtime) checkLegacy(ctx context.Context, namespaces engine.Namespaces, now time.Time) {
	if !r.derivedNamespace || r.opts.Namespace == NamespaceLegacy {
		return
	}
	w := &r.namespace
	w.mu.Lock()
	due := !w.legacyOff && now.Sub(w.legacyChecked) >= cmp.Or(w.legacyEvery, legacyCheckEvery)
	if due {
		w.legacyChecked = now
	}
	w.mu.Unlock()
	if !due {
		return
	}
	var names []string
	for _, s := range r.reg.Schedules()[:min(legacyProbe, r.reg.Len())] {
		names = append(names, s.Name)
	}
	probe, err := namespaces.ProbeNamespace(ctx, NamespaceLegacy, names)
	if err != nil {
		if errors.Is(err, engine.ErrNoAccess) {
			// An ACL that keeps this service out of the old namespace says
			// it was never there: stop asking, so as not to fill the ACL log.
			w.mu.Lock()
			w.legacyOff = true
			w.mu.Unlock()
			r.log.Info("the Redis user may not read the old default namespace; not looking for an earlier deployment there",
				"old_namespace", NamespaceLegacy)
		}
		return
	}
	// Replicas of this version that chose the old namespace publish their
	// identity: if some do and none is of this registry, the leader there
	// is another service's, which merely shares a schedule name.
	predecessor := true
	if ids := probe.Identities; len(ids) > 0 {
		predecessor = slices.ContainsFunc(ids, func(m engine.NamespaceReplica) bool { return m.Identity == r.identity })
	}
	var shared []string
	if probe.LeaseHeld && predecessor {
		for i, has := range probe.HasCursor {
			if has {
				shared = append(shared, names[i])
			}
		}
	}
	problem := ""
	if len(shared) > 0 {
		problem = fmt.Sprintf("a live leader in the old default namespace %q schedules %d of this registry's schedules (%s) while this replica uses the new default %q: "+
			"both run every slot until the old replicas stop; set Options.Namespace to %q to keep the old namespace's cursors and history",
			NamespaceLegacy, len(shared), strings.Join(shared[:min(5, len(shared))], ", "), r.opts.Namespace, NamespaceLegacy)
	}
	w.mu.Lock()
	changed := problem != w.legacy
	w.legacy = problem
	w.mu.Unlock()
	if changed && problem != "" {
		r.log.Error("OLD DEFAULT NAMESPACE IN USE: "+problem, "namespace", r.opts.Namespace)
	}
}

// LegacyNamespace says, when a live leader in NamespaceLegacy schedules
// this registry's schedules while this runtime uses the derived default,
// what that means and what to do; "" otherwise.
func (d *Diagnostics) LegacyNamespace() string {
	r := d.rt
	r.namespace.mu.Lock()
	defer r.namespace.mu.Unlock()
	return r.namespace.legacy
}
