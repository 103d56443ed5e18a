-- belfry schema 3: retention tied to each row's own window, and the
-- indexes the prunes read.

-- How long a row must stay: its slot plus the task's retention (the
-- window in which its slot can be attempted again), as the planner wrote
-- it. The prune keeps a row until both this and the engine's
-- SlotRetention have passed; rows from before this version have none and
-- go by SlotRetention alone.
ALTER TABLE belfry_slot ADD COLUMN keep_until timestamptz;
ALTER TABLE belfry_manual ADD COLUMN keep_until timestamptz;

-- Schema 2 rebuilt belfry_record without the index by last write that
-- the record prune reads.
CREATE INDEX belfry_record_retention ON belfry_record (namespace, updated_at);

-- Old heartbeats are deleted by age.
CREATE INDEX belfry_replica_seen ON belfry_replica (namespace, seen_at);
