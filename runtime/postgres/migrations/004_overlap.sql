-- belfry schema 4: the outcomes of overlap=buffer_one (a slot waiting
-- behind the running occurrence) and overlap=replace (an occurrence
-- cancelled for a newer one), and which occurrence replaced one: the
-- leader's mark, which a worker's writes of the record never touch.
ALTER TABLE belfry_record DROP CONSTRAINT belfry_record_outcome_check;
ALTER TABLE belfry_record ADD CONSTRAINT belfry_record_outcome_check CHECK (outcome IN
    ('enqueued', 'running', 'succeeded', 'retrying', 'failed', 'missed', 'skipped', 'paused', 'lost', 'continued',
     'buffered', 'replaced'));
ALTER TABLE belfry_record ADD COLUMN replaced_by text NOT NULL DEFAULT '';
