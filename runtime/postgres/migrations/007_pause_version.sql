-- belfry schema 7: a version of each namespace's pauses.
--
-- Every pause and resume raises it in its own transaction: a trigger on
-- the pauses and their windows, so that every writer does, a replica of
-- the previous release during a rolling deploy as well. The leader
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

-- The function finds belfry_pause_version where the migration made it,
-- whatever the search_path of the session whose write fires it.
CREATE FUNCTION belfry_pause_changed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO belfry_pause_version AS v (namespace, version)
    VALUES (CASE WHEN TG_OP = 'DELETE' THEN OLD.namespace ELSE NEW.namespace END, 1)
    ON CONFLICT (namespace) DO UPDATE SET version = v.version + 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER belfry_pause_changed AFTER INSERT OR UPDATE OR DELETE ON belfry_pause
    FOR EACH ROW EXECUTE FUNCTION belfry_pause_changed();
CREATE TRIGGER belfry_pause_window_changed AFTER INSERT OR UPDATE OR DELETE ON belfry_pause_window
    FOR EACH ROW EXECUTE FUNCTION belfry_pause_changed();
