package pipeline

// Mark is a high-water mark written in the same script as the fenced task
// it rides with: for the scheduler, the schedule's cursor raised to the
// slot whose task was just enqueued (or found already there), and the
// slot's ID as the schedule's last. Redis applies the task and its mark
// together or not at all, so a holder that crashes after its enqueue never
// leaves a slot in asynq that its cursor does not cover, and the next
// holder starts after it rather than enqueueing it again.
type Mark struct {
	// Hash's Field is set to Value. The marks of one field must come in
	// rising order (a holder enqueues a schedule's slots one after
	// another, in order), as the mark does not compare: a comparison
	// would cost Redis a read per enqueue, on the spike's critical path.
	Hash  string
	Field string
	Value int64
	// Also, when not "", is a hash whose Field is set to AlsoValue
	// whenever Hash's is raised.
	Also, AlsoValue string
}
