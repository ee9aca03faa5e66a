-- depends: 0007_views
-- Stale-work alerts from `judgeflow.alerts`: a run not final by its deadline
-- plus grace, or events held waiting for a rubric or run too long. One row per
-- alert event (event_id is uuid5 of kind and subject, so a redelivery or a
-- replay repeats it and adds nothing). Insert-only, like every fact table.
-- No foreign keys: an alert is often about a run whose events never arrived.

CREATE TABLE stale_alerts (
  event_id           UUID PRIMARY KEY,
  kind               TEXT NOT NULL CHECK (kind IN ('run_overdue', 'held_too_long')),
  subject            TEXT NOT NULL CHECK (subject IN ('evaluation_run', 'claim')),
  subject_id         TEXT NOT NULL CHECK (length(subject_id) >= 1),
  waiting_for        TEXT CHECK (waiting_for IN ('run', 'rubric', 'judges')),
  rubric_version_id  TEXT,
  held_events        INTEGER NOT NULL CHECK (held_events >= 0),
  first_seen_at      TIMESTAMPTZ NOT NULL,
  deadline           TIMESTAMPTZ,
  reason             TEXT NOT NULL,
  raised_at          TIMESTAMPTZ NOT NULL,
  schema_version     TEXT NOT NULL,
  source_topic       TEXT NOT NULL,
  source_partition   INTEGER NOT NULL,
  source_offset      BIGINT NOT NULL,
  created_at         TIMESTAMPTZ NOT NULL   -- the Kafka record timestamp (replays agree)
);
DO $$ BEGIN PERFORM make_insert_only('stale_alerts'); END $$;
CREATE INDEX idx_stale_alerts_subject ON stale_alerts(subject, subject_id);

-- Alerts whose subject is still not done: a run without a final reconciled
-- score, a claim without a decision routing it to `done` or `human_review`
-- (`second_judge` still waits for a verdict). `age` counts from when the work
-- was first seen. A subject that completes later leaves this view by itself.
CREATE VIEW open_stale_alerts AS
SELECT a.event_id, a.kind, a.subject, a.subject_id, a.waiting_for, a.rubric_version_id, a.held_events,
       a.first_seen_at, a.deadline, a.reason, a.raised_at, now() - a.first_seen_at AS age
FROM stale_alerts a
WHERE CASE a.subject
  WHEN 'evaluation_run' THEN NOT EXISTS (
    SELECT 1 FROM evaluation_reconciled_scores s
    WHERE s.evaluation_run_id::text = lower(a.subject_id) AND s.status = 'final')
  ELSE NOT EXISTS (
    SELECT 1 FROM routing_decisions d
    WHERE d.claim_id = a.subject_id AND d.route IN ('done', 'human_review'))
END;
