package postgres

// MembersByKeySQL is the member lookup of MemberStates, for a test of its
// plan.
const MembersByKeySQL = membersByKeySQL
