-- depends: 0005_claims 0007_views 0013_projection_rejects
-- The review desk (DESIGN decision 14). A review is an event: `reviews` rows
-- come from the `reviews` topic only, now with the 1.1 fields. The queue
-- (`review_items`) is a read model the projector derives from `checks` and
-- `reviews`, so a rebuild recomputes it. The desk's own state is its leases
-- (`review_leases`): losing them returns every held item to the queue.

ALTER TABLE reviews
  ADD COLUMN schema_version TEXT,
  ADD COLUMN review_seconds DOUBLE PRECISION CHECK (review_seconds >= 0),
  ADD COLUMN blind_verdict  TEXT CHECK (blind_verdict IN ('pass', 'fail', 'unclear')),
  ADD COLUMN source         TEXT CHECK (source IN ('routed', 'audit', 'overlap')),
  ADD COLUMN lease_id       UUID;

-- A claim's place in [0, 1) for one purpose ('audit', 'overlap'): the first 52
-- bits of md5(purpose:claim_id). The audit sample is the claims routed `done`
-- whose place is below JUDGEFLOW_REVIEW_AUDIT_SHARE, so a rebuild, or another
-- projector, picks the same claims; the same in Python: judgeflow.review_pick.
CREATE FUNCTION review_pick(purpose TEXT, claim_id TEXT) RETURNS DOUBLE PRECISION
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ('x' || substr(md5(purpose || ':' || claim_id), 1, 13))::bit(52)::bigint / 4503599627370496.0
$$;

CREATE TABLE review_items (
  claim_id    TEXT PRIMARY KEY,
  source      TEXT NOT NULL CHECK (source IN ('routed', 'audit')),
  wanted      SMALLINT NOT NULL CHECK (wanted IN (1, 2)),   -- 2: an overlap item, a second blind reviewer
  reviewers   TEXT[] NOT NULL DEFAULT '{}',                 -- who has reviewed it (from `reviews`)
  open        BOOLEAN NOT NULL,                             -- fewer reviewers than wanted
  routed_at   TIMESTAMPTZ NOT NULL                          -- the claim's first check: the queue's order
);
CREATE INDEX idx_review_items_open ON review_items (routed_at, claim_id) WHERE open;

CREATE TABLE review_leases (
  lease_id       UUID PRIMARY KEY,
  claim_id       TEXT NOT NULL,
  slot           SMALLINT NOT NULL CHECK (slot IN (1, 2)),
  reviewer       TEXT NOT NULL,
  source         TEXT NOT NULL CHECK (source IN ('routed', 'audit', 'overlap')),
  leased_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  expires_at     TIMESTAMPTZ NOT NULL,
  blind_verdict  TEXT CHECK (blind_verdict IN ('pass', 'fail', 'unclear')),
  blind_at       TIMESTAMPTZ,
  closed         TEXT CHECK (closed IN ('submitted', 'skipped', 'expired')),
  closed_at      TIMESTAMPTZ,
  review_id      UUID
);
-- One open lease per slot of an item: two reviewers never hold the same slot.
CREATE UNIQUE INDEX idx_review_leases_slot ON review_leases (claim_id, slot) WHERE closed IS NULL;
CREATE INDEX idx_review_leases_expiry ON review_leases (expires_at) WHERE closed IS NULL;
CREATE INDEX idx_review_leases_claim ON review_leases (claim_id);
CREATE INDEX idx_review_leases_reviewer ON review_leases (reviewer, claim_id);

-- The queue as a reviewer sees it: items still wanting a review, how many
-- are held right now, and how old the oldest is.
-- Example: SELECT depth, held, oldest_age FROM review_queue_status;
CREATE VIEW review_queue_status AS
SELECT count(*) AS depth,
       (SELECT count(*) FROM review_leases WHERE closed IS NULL AND expires_at > now()) AS held,
       now() - min(routed_at) AS oldest_age,
       count(*) FILTER (WHERE source = 'audit') AS audit_items,
       count(*) FILTER (WHERE wanted = 2) AS overlap_items
FROM review_items WHERE open;

-- Overturn rate of the judges' final verdict, by why the claim reached a
-- person. The audit rows are the unbiased estimate of the verdicts routed
-- `done`; the routed rows say how often the people the policy asked disagree.
-- A 1.0 review (no source) counts as routed. Only each claim's first reviewer
-- counts here (overlap reviews measure people, see review_overlap_agreement).
-- Example: SELECT source, reviewed, overturned, overturn_rate FROM review_overturns;
CREATE VIEW review_overturns AS
WITH firsts AS (
  SELECT DISTINCT ON (r.claim_id) r.claim_id, r.final_verdict, coalesce(r.source, 'routed') AS source
  FROM reviews r WHERE coalesce(r.source, 'routed') <> 'overlap'
  ORDER BY r.claim_id, r.created_at, r.review_id)
SELECT f.source,
       count(*) AS reviewed,
       count(*) FILTER (WHERE c.final_verdict IS DISTINCT FROM f.final_verdict) AS overturned,
       round(count(*) FILTER (WHERE c.final_verdict IS DISTINCT FROM f.final_verdict)::numeric
             / nullif(count(*), 0), 4) AS overturn_rate
FROM firsts f JOIN checks c USING (claim_id)
GROUP BY f.source;

-- Anchoring: how often seeing the judges' verdicts changed the reviewer's.
-- Example: SELECT reviewer, reviewed, changed_after_reveal FROM review_anchoring;
CREATE VIEW review_anchoring AS
SELECT reviewer,
       count(*) AS reviewed,
       count(*) FILTER (WHERE blind_verdict IS DISTINCT FROM final_verdict) AS changed_after_reveal,
       round(count(*) FILTER (WHERE blind_verdict IS DISTINCT FROM final_verdict)::numeric
             / nullif(count(*), 0), 4) AS change_rate
FROM reviews WHERE blind_verdict IS NOT NULL
GROUP BY reviewer;

-- Reviewer throughput per day: items and the median seconds per item.
-- Example: SELECT * FROM reviewer_throughput WHERE day = current_date;
CREATE VIEW reviewer_throughput AS
SELECT reviewer, (created_at AT TIME ZONE 'UTC')::date AS day, count(*) AS reviewed,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY review_seconds) AS median_seconds
FROM reviews
GROUP BY reviewer, (created_at AT TIME ZONE 'UTC')::date;

-- Agreement between people on overlap items: pairs of verdicts by two
-- different reviewers of the same claim (first two reviewers by time).
-- Example: SELECT count(*) FILTER (WHERE agree) * 1.0 / count(*) FROM review_overlap_pairs;
CREATE VIEW review_overlap_pairs AS
WITH ranked AS (
  SELECT DISTINCT ON (claim_id, reviewer) claim_id, reviewer, final_verdict, created_at, review_id
  FROM reviews ORDER BY claim_id, reviewer, created_at, review_id),
numbered AS (
  SELECT *, row_number() OVER (PARTITION BY claim_id ORDER BY created_at, review_id) AS n FROM ranked)
SELECT a.claim_id, a.reviewer AS reviewer_a, a.final_verdict AS verdict_a,
       b.reviewer AS reviewer_b, b.final_verdict AS verdict_b, a.final_verdict = b.final_verdict AS agree
FROM numbered a JOIN numbered b ON a.claim_id = b.claim_id AND a.n = 1 AND b.n = 2;
