package postgres

// MembersByKeySQL is the member lookup of MemberStates, for a test of its
// plan.
const MembersByKeySQL = membersByKeySQL

// SlotJobSQL is EnqueueAll's update of its slot rows' job IDs, for a test
// of its plan.
const SlotJobSQL = slotJobSQL
