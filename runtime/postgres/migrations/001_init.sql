-- belfry schema 1: the Postgres engine's tables. Every table is keyed by
-- namespace first, so several services (or test runs) share one database
-- without sharing a row.

-- The slot table is the proof of exactly once: whoever plans a slot
-- inserts its row with ON CONFLICT DO NOTHING and, only when the insert
-- won, inserts the River job in the same transaction. A second planner
-- (a zombie leader, a skewed clock, a retry) conflicts on the primary key
-- and inserts nothing. member is '' for an ordinary schedule.
CREATE TABLE belfry_slot (
    namespace     text        NOT NULL,
    schedule      text        NOT NULL,
    member        text        NOT NULL DEFAULT '',
    slot          timestamptz NOT NULL,
    occurrence_id text        NOT NULL,
    job_id        bigint,
    inserted_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, schedule, member, slot)
);
-- Retention deletes by slot (see the package doc): rows whose slot can no
-- longer be attempted.
CREATE INDEX belfry_slot_retention ON belfry_slot (namespace, slot);

-- Manual runs (run now, re-run, backfill) are keyed by their occurrence
-- ID, which carries the request key: a double submit conflicts here, as a
-- planned slot conflicts in belfry_slot, while a re-run of a slot is not
-- refused by that slot's own row.
CREATE TABLE belfry_manual (
    namespace     text        NOT NULL,
    occurrence_id text        NOT NULL,
    schedule      text        NOT NULL,
    member        text        NOT NULL DEFAULT '',
    slot          timestamptz NOT NULL,
    actor         text        NOT NULL DEFAULT '',
    job_id        bigint,
    inserted_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, occurrence_id)
);
CREATE INDEX belfry_manual_retention ON belfry_manual (namespace, inserted_at);

-- The last slot the planner handled, per schedule and member. A cursor
-- only saves work: the slot table decides what runs.
CREATE TABLE belfry_cursor (
    namespace  text        NOT NULL,
    schedule   text        NOT NULL,
    member     text        NOT NULL DEFAULT '',
    slot       timestamptz NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, schedule, member)
);

-- The ledger: one row per occurrence, updated as it is enqueued, runs,
-- retries and ends. Its outcomes are runtime.Outcome's values.
CREATE TABLE belfry_record (
    namespace     text        NOT NULL,
    occurrence_id text        NOT NULL,
    schedule      text        NOT NULL,
    member        text        NOT NULL DEFAULT '',
    slot          timestamptz NOT NULL,
    manual        boolean     NOT NULL DEFAULT false,
    outcome       text        NOT NULL CHECK (outcome IN
                      ('enqueued', 'running', 'succeeded', 'retrying', 'failed', 'missed', 'skipped', 'paused', 'lost', 'continued')),
    attempt       integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_retry     integer     NOT NULL DEFAULT 0 CHECK (max_retry >= 0),
    error         text        NOT NULL DEFAULT '',
    actor         text        NOT NULL DEFAULT '',
    replica       text        NOT NULL DEFAULT '',
    job_id        bigint,
    enqueued_at   timestamptz,
    started_at    timestamptz,
    finished_at   timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, occurrence_id)
);
-- A schedule's (or member's) history, newest slot first.
CREATE INDEX belfry_record_history ON belfry_record (namespace, schedule, member, slot DESC);
-- The ledger is bounded: the oldest rows go first.
CREATE INDEX belfry_record_retention ON belfry_record (namespace, updated_at);

-- Pauses of whole schedules; a family member's pause is in its own row
-- (belfry_member), read with the member.
CREATE TABLE belfry_pause (
    namespace text        NOT NULL,
    schedule  text        NOT NULL,
    reason    text        NOT NULL DEFAULT '',
    actor     text        NOT NULL DEFAULT '',
    paused_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, schedule)
);

-- A family's members: data, changed at runtime. zone and expr are '' when
-- the member follows the family's tz= and expression. since is when the
-- member's current (zone, expr) took effect: its first slot is after it.
CREATE TABLE belfry_member (
    namespace    text        NOT NULL,
    family       text        NOT NULL,
    key          text        NOT NULL,
    zone         text        NOT NULL DEFAULT '',
    expr         text        NOT NULL DEFAULT '',
    paused       boolean     NOT NULL DEFAULT false,
    pause_reason text        NOT NULL DEFAULT '',
    pause_actor  text        NOT NULL DEFAULT '',
    paused_at    timestamptz,
    since        timestamptz NOT NULL DEFAULT now(),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, family, key),
    CHECK (paused = (paused_at IS NOT NULL))
);
-- Members sharing (zone, expr) share one timer entry: the planner reads
-- them by bucket.
CREATE INDEX belfry_member_bucket ON belfry_member (namespace, family, zone, expr);
-- The planner picks up changes since its last read.
CREATE INDEX belfry_member_changes ON belfry_member (namespace, updated_at);

-- What the admin, metrics and status count per schedule (member '' for
-- the schedule as a whole).
CREATE TABLE belfry_counter (
    namespace    text        NOT NULL,
    schedule     text        NOT NULL,
    member       text        NOT NULL DEFAULT '',
    enqueued     bigint      NOT NULL DEFAULT 0,
    manual       bigint      NOT NULL DEFAULT 0,
    missed       bigint      NOT NULL DEFAULT 0,
    skipped      bigint      NOT NULL DEFAULT 0,
    paused       bigint      NOT NULL DEFAULT 0,
    succeeded    bigint      NOT NULL DEFAULT 0,
    failed       bigint      NOT NULL DEFAULT 0,
    last_enqueue timestamptz,
    last_success timestamptz,
    last_failure timestamptz,
    PRIMARY KEY (namespace, schedule, member)
);

-- Who plans: one row per namespace. Leadership only saves work (one
-- replica plans); the slot table, not the lease, keeps exactly once. term
-- grows with every new holder.
CREATE TABLE belfry_leader (
    namespace   text        PRIMARY KEY,
    holder      text        NOT NULL,
    term        bigint      NOT NULL CHECK (term > 0),
    acquired_at timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

-- The replicas with a fresh heartbeat, for the admin's cluster view.
CREATE TABLE belfry_replica (
    namespace text        NOT NULL,
    replica   text        NOT NULL,
    seen_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, replica)
);
