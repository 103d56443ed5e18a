package engine

// EnqueueBatches is an engine's own size for the batches of slots the
// core hands to EnqueueAll when many come due at once: size slots a
// call, at most inFlight calls at a time. Without it the core sends
// batches of a Redis script's worth. An engine whose call costs a round
// trip and a transaction whatever its size (a database's commit) asks
// for fewer, larger ones.
type EnqueueBatches interface {
	EnqueueBatches() (size, inFlight int)
}
