package admin

import (
	"net/http"
	"strings"
	"unicode"
)

// ActorHeader is the request header in which a client names who acts, as
// the belfry CLI does (user@host by default, or its --actor): the same
// idea as Temporal's client identity. It is a claim, not an
// authentication: the admin records it only when Options.Actor is not set;
// a host that authenticates its callers sets Options.Actor, which alone
// decides then (and may call ClaimedActor to keep the claim beside the
// authenticated name).
const ActorHeader = "Belfry-Actor"

// maxActorLen bounds a claimed actor, as a pause's reason is bounded.
const maxActorLen = 100

// ClaimedActor returns the actor a request names in ActorHeader, without
// control characters and at most 100 bytes long; "" when it names none.
func ClaimedActor(req *http.Request) string {
	actor := strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, req.Header.Get(ActorHeader)))
	if len(actor) > maxActorLen {
		actor = strings.ToValidUTF8(actor[:maxActorLen], "")
	}
	return actor
}

// actorOf names who makes a state-changing request: the host's
// Options.Actor when set, else the client's claim.
func (a *admin) actorOf(req *http.Request) string {
	if a.opts.Actor != nil {
		return a.opts.Actor(req)
	}
	return ClaimedActor(req)
}
