package engine

import (
	"context"
	"errors"
	"time"
)

// Namespaces is what an engine whose state two services could share by
// mistake (one Redis, and one namespace of keys named alike) offers to
// tell them apart: each replica publishes its registry's identity in its
// namespace, and the namespace belongs to the identity that published
// there first while a replica of it lives. An engine whose services cannot
// meet need not have it: the core type-asserts it and, without it, leads
// wherever it is configured to.
type Namespaces interface {
	// ClaimNamespace publishes replica of identity in this engine's
	// namespace, forgets the replicas not heard from within stale, and
	// says whose the namespace is: its owner's while a replica of the
	// owner lives, else identity's. One bounded call.
	ClaimNamespace(ctx context.Context, identity, replica string, stale time.Duration) (NamespaceClaim, error)
	// ProbeNamespace reads another namespace of the same server: whether a
	// lease is held there, which of names have a cursor there, and the
	// identities published there. ErrNoAccess when the engine's user may
	// not read it.
	ProbeNamespace(ctx context.Context, namespace string, names []string) (NamespaceProbe, error)
}

// NamespaceClaim is what Namespaces.ClaimNamespace found.
type NamespaceClaim struct {
	// Owner is the identity the namespace belongs to.
	Owner string
	// TookFrom is the previous owner when this call took the namespace
	// over (none of its replicas lives any more); "" otherwise.
	TookFrom string
	// Live are the replicas heard from within stale, this one included.
	Live []NamespaceReplica
}

// NamespaceReplica is a live replica of a namespace.
type NamespaceReplica struct {
	Identity, Replica string
}

// NamespaceProbe is what Namespaces.ProbeNamespace read.
type NamespaceProbe struct {
	LeaseHeld bool
	// HasCursor is, for each name asked, whether it has a cursor there.
	HasCursor []bool
	// Identities are those published there, with the replica of each.
	Identities []NamespaceReplica
}

// ErrNoAccess: the engine's user may not read what was asked.
var ErrNoAccess = errors.New("no access")
