package postgres

// MembersByKeySQL is the member lookup of MemberStates, for a test of its
// plan.
const MembersByKeySQL = membersByKeySQL

// SlotFreeSQL is EnqueueAll's look for the slots that have no row yet,
// for a test of its plan.
const SlotFreeSQL = slotFreeSQL
