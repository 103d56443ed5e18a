-- belfry schema 5: checkpointed handlers' progress (runtime/checkpoint).

-- One row per occurrence whose handler saved progress. gen is the claim
-- generation: each attempt that claims the occurrence raises it, and a
-- save names the generation it claimed, so a stale attempt's save matches
-- no row. claimed_by is the occurrence whose attempt claimed it last.
CREATE TABLE belfry_progress (
    namespace     text        NOT NULL,
    occurrence_id text        NOT NULL,
    position      text        NOT NULL DEFAULT '',
    done          boolean     NOT NULL DEFAULT false,
    items         bigint      NOT NULL DEFAULT 0,
    total         bigint      NOT NULL DEFAULT 0,
    gen           bigint      NOT NULL DEFAULT 0,
    claimed_by    text        NOT NULL DEFAULT '',
    started_at    timestamptz NOT NULL,
    saved_at      timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, occurrence_id)
);
CREATE INDEX belfry_progress_retention ON belfry_progress (namespace, updated_at);

-- resume=next: per schedule (and member), the occurrence whose work is
-- unfinished, which the next occurrence takes up.
CREATE TABLE belfry_unfinished (
    namespace     text NOT NULL,
    scope         text NOT NULL,
    occurrence_id text NOT NULL,
    PRIMARY KEY (namespace, scope)
);
