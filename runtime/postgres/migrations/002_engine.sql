-- belfry schema 2: the tables as the engine writes them. Times the core
-- speaks of in unix milliseconds are timestamptz here, converted exactly
-- by belfry_at and belfry_ms, so that SQL shows them as times.

CREATE FUNCTION belfry_at(ms bigint) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN timestamptz 'epoch' + ms * interval '1 millisecond';
CREATE FUNCTION belfry_ms(at timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN floor(extract(epoch FROM at) * 1000)::bigint;

-- An occurrence's task is looked up by its ID (is it still queued or
-- running: overlap=skip, change floors).
CREATE INDEX belfry_slot_occurrence ON belfry_slot (namespace, occurrence_id);

-- The last enqueued occurrence of a schedule (overlap=skip asks whether
-- it still runs) rises with its cursor.
ALTER TABLE belfry_cursor ADD COLUMN last_id text NOT NULL DEFAULT '';

-- The ledger as the core writes it: a record per occurrence, placed in
-- its schedule's history by score (unix ms) and trimmed to the history
-- limit, newest kept. attempt is NULL until a worker writes one.
DROP TABLE belfry_record;
CREATE TABLE belfry_record (
    namespace     text        NOT NULL,
    occurrence_id text        NOT NULL,
    schedule      text        NOT NULL,
    member        text        NOT NULL DEFAULT '',
    slot          timestamptz NOT NULL,
    manual        boolean     NOT NULL DEFAULT false,
    outcome       text        NOT NULL CHECK (outcome IN
                      ('enqueued', 'running', 'succeeded', 'retrying', 'failed', 'missed', 'skipped', 'paused', 'lost', 'continued')),
    attempt       integer     CHECK (attempt >= 0),
    max_retry     integer     NOT NULL DEFAULT 0 CHECK (max_retry >= 0),
    error         text        NOT NULL DEFAULT '',
    actor         text        NOT NULL DEFAULT '',
    replica       text        NOT NULL DEFAULT '',
    enqueued_at   timestamptz,
    recorded_at   timestamptz,
    started_at    timestamptz,
    finished_at   timestamptz,
    duration_ms   bigint      NOT NULL DEFAULT 0,
    score         bigint      NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, occurrence_id)
);
CREATE INDEX belfry_record_history ON belfry_record (namespace, schedule, score DESC);

-- Counters, one row a schedule and counter: counts, and times (unix ms)
-- for those named last_* and first_seen.
DROP TABLE belfry_counter;
CREATE TABLE belfry_counter (
    namespace text   NOT NULL,
    schedule  text   NOT NULL,
    counter   text   NOT NULL,
    value     bigint NOT NULL,
    PRIMARY KEY (namespace, schedule, counter)
);

-- A schedule's past pauses that its cursor has not passed: a leader that
-- reaches their slots after the resume records them paused.
CREATE TABLE belfry_pause_window (
    namespace   text        NOT NULL,
    schedule    text        NOT NULL,
    paused_at   timestamptz NOT NULL,
    resumed_at  timestamptz NOT NULL,
    PRIMARY KEY (namespace, schedule, resumed_at, paused_at)
);

-- What workers say of a schedule: failing since a final failure, or an
-- attempt running or waiting to retry. Only such schedules have a row.
CREATE TABLE belfry_execution (
    namespace     text NOT NULL,
    schedule      text NOT NULL,
    failing_since timestamptz,
    active        text CHECK (active IN ('running', 'retrying')),
    PRIMARY KEY (namespace, schedule)
);

-- Flags a namespace sets once (the failing index built from the records).
CREATE TABLE belfry_flag (
    namespace text NOT NULL,
    flag      text NOT NULL,
    PRIMARY KEY (namespace, flag)
);

-- Detected losses of data (kept for the interface; a committed row is
-- not lost).
CREATE TABLE belfry_lost (
    namespace text   NOT NULL,
    id        bigint GENERATED ALWAYS AS IDENTITY,
    body      jsonb  NOT NULL,
    PRIMARY KEY (namespace, id)
);

-- A family member's leader state: its cursor ("<slot> <utc offset>[
-- <last enqueued>]") and newest occurrence ("<slot> <outcome> <unix ms>[
-- <id>]"), as package engine encodes them, gone with the member.
ALTER TABLE belfry_member ADD COLUMN cursor text, ADD COLUMN last text, ADD COLUMN last_slot bigint;
DROP INDEX belfry_member_bucket;
CREATE INDEX belfry_member_bucket ON belfry_member (namespace, family, zone, expr, key);

-- A family's buckets (members sharing zone and expression) and the
-- version of the change that last put a member in each; a bucket goes
-- with its last member.
CREATE TABLE belfry_bucket (
    namespace text   NOT NULL,
    family    text   NOT NULL,
    zone      text   NOT NULL,
    expr      text   NOT NULL,
    version   bigint NOT NULL,
    PRIMARY KEY (namespace, family, zone, expr)
);
-- The slot (unix s) through which every member of a bucket was handled.
CREATE TABLE belfry_bucket_cursor (
    namespace text   NOT NULL,
    family    text   NOT NULL,
    bucket    text   NOT NULL,
    slot      bigint NOT NULL,
    PRIMARY KEY (namespace, family, bucket)
);
-- Counts every change to a namespace's members.
CREATE TABLE belfry_family_version (
    namespace text   PRIMARY KEY,
    version   bigint NOT NULL
);

-- The lease remembers its last handover, so that handovers do not flap.
ALTER TABLE belfry_leader ADD COLUMN handovers integer NOT NULL DEFAULT 0,
    ADD COLUMN handover_until timestamptz;
-- A released lease has holder '' and keeps its term, so terms only rise.
ALTER TABLE belfry_leader DROP CONSTRAINT belfry_leader_term_check, ADD CHECK (term >= 0);

-- A heartbeat names the process behind the replica.
ALTER TABLE belfry_replica ADD COLUMN instance text NOT NULL DEFAULT '',
    ADD COLUMN process text NOT NULL DEFAULT '';
