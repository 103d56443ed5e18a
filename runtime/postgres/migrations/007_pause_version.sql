-- belfry schema 7: a version of each namespace's pauses.
--
-- Every pause and resume raises it in its own transaction. The leader
-- reads it with the pauses of the schedules due at a slot before the slot
-- comes due, and the slot's enqueue reads it again in its transaction: a
-- version that moved means a pause or resume the leader's read did not
-- see, and the enqueue inserts nothing, so that the slots are planned
-- again with the pauses as they are. A namespace that was never paused
-- has no row (version 0).
CREATE TABLE belfry_pause_version (
    namespace text   PRIMARY KEY,
    version   bigint NOT NULL
);
