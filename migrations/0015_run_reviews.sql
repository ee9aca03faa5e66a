-- depends: 0014_review_desk
-- Evaluation runs at the review desk (DESIGN decision 14). A run whose final
-- evaluation was routed to human review becomes a queue item beside the
-- claims; a reviewer's accepted final scores, per lane and overall, are a
-- `RunReview` event on `reviews`, projected into `run_reviews` (insert-only,
-- like every raw row). `run_review_items` is a read model (rebuilt by
-- replay); the desk's leases now name a claim or a run.

CREATE TABLE run_reviews (
  review_id            UUID PRIMARY KEY,
  evaluation_run_id    UUID NOT NULL,
  reviewer             TEXT NOT NULL,
  final_overall_score  INTEGER NOT NULL CHECK (final_overall_score BETWEEN 0 AND 100),
  lane_scores          JSONB NOT NULL,           -- {lane_key: score}: the accepted final score per lane
  notes                TEXT,
  created_at           TIMESTAMPTZ NOT NULL,
  schema_version       TEXT NOT NULL,
  review_seconds       DOUBLE PRECISION CHECK (review_seconds >= 0),
  blind_overall_score  INTEGER CHECK (blind_overall_score BETWEEN 0 AND 100),
  blind_lane_scores    JSONB,                    -- the scores given before the judges' were shown
  source               TEXT CHECK (source = 'routed'),
  lease_id             UUID
);
DO $$ BEGIN PERFORM make_insert_only('run_reviews'); END $$;
CREATE INDEX idx_run_reviews_run ON run_reviews (evaluation_run_id);

CREATE TABLE run_review_items (
  evaluation_run_id  UUID PRIMARY KEY,
  reason             TEXT NOT NULL,              -- why the run was routed to a person (the routing reason)
  reviewers          TEXT[] NOT NULL DEFAULT '{}',
  open               BOOLEAN NOT NULL,
  routed_at          TIMESTAMPTZ NOT NULL        -- the routing decision: the queue's order
);
CREATE INDEX idx_run_review_items_open ON run_review_items (routed_at, evaluation_run_id) WHERE open;

-- A lease holds one claim or one run.
ALTER TABLE review_leases
  ALTER COLUMN claim_id DROP NOT NULL,
  ADD COLUMN evaluation_run_id UUID,
  ADD COLUMN blind_scores JSONB,                 -- a run's blind choice: {"lane_scores": {...}, "overall": n}
  ADD CONSTRAINT review_leases_one_item CHECK (num_nonnulls(claim_id, evaluation_run_id) = 1);
CREATE UNIQUE INDEX idx_review_leases_run ON review_leases (evaluation_run_id) WHERE closed IS NULL;
CREATE INDEX idx_review_leases_run_all ON review_leases (evaluation_run_id) WHERE evaluation_run_id IS NOT NULL;

-- The queue as a reviewer sees it, runs now included (the new columns come last).
-- Example: SELECT depth, run_items, held, oldest_age FROM review_queue_status;
CREATE OR REPLACE VIEW review_queue_status AS
WITH items AS (
  SELECT routed_at, source, wanted FROM review_items WHERE open
  UNION ALL
  SELECT routed_at, 'routed', 1 FROM run_review_items WHERE open)
SELECT count(*) AS depth,
       (SELECT count(*) FROM review_leases WHERE closed IS NULL AND expires_at > now()) AS held,
       now() - min(routed_at) AS oldest_age,
       count(*) FILTER (WHERE source = 'audit') AS audit_items,
       count(*) FILTER (WHERE wanted = 2) AS overlap_items,
       (SELECT count(*) FROM run_review_items WHERE open) AS run_items
FROM items;

-- A reviewed run beside its reconciliation: the judges' reconciled final
-- score and the score a person accepted (the first review of the run), with
-- the difference, per run.
-- Example: SELECT evaluation_run_id, reconciled_overall, reviewed_overall, delta FROM evaluation_reviewed_scores;
CREATE VIEW evaluation_reviewed_scores AS
WITH firsts AS (
  SELECT DISTINCT ON (evaluation_run_id) *
  FROM run_reviews ORDER BY evaluation_run_id, created_at, review_id)
SELECT f.evaluation_run_id,
       s.final_overall_score AS reconciled_overall,
       f.final_overall_score AS reviewed_overall,
       f.final_overall_score - s.final_overall_score AS delta,
       f.lane_scores AS reviewed_lane_scores,
       f.reviewer,
       f.notes,
       f.created_at AS reviewed_at,
       s.has_contradictions,
       s.contradiction_details
FROM firsts f LEFT JOIN evaluation_reconciled_scores s USING (evaluation_run_id);
