-- depends: 0002_catalog
-- Seed 003: every verdict (claim_checks, insert-only), the one-row-per-claim
-- `checks` table the routing queue and analysts read, and human reviews.

CREATE TABLE claim_checks (
  claim_id          TEXT NOT NULL,
  judge_id          TEXT NOT NULL,
  source_id         TEXT NOT NULL,
  verdict           TEXT NOT NULL CHECK (verdict IN ('pass', 'fail', 'unclear')),
  score             DOUBLE PRECISION CHECK (score BETWEEN 0 AND 1),
  confidence        DOUBLE PRECISION NOT NULL CHECK (confidence BETWEEN 0 AND 1),
  reason            TEXT NOT NULL,
  passage_quote     TEXT,
  passage           TEXT NOT NULL,
  claim_text        TEXT NOT NULL,
  rubric_version_id UUID,
  schema_version    TEXT NOT NULL,
  checked_at        TIMESTAMPTZ,
  source_partition  INTEGER NOT NULL,
  source_offset     BIGINT NOT NULL,
  created_at        TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (claim_id, judge_id),
  CHECK (score IS NOT NULL OR verdict = 'unclear')
);
DO $$ BEGIN PERFORM make_insert_only('claim_checks'); END $$;
CREATE INDEX idx_claim_checks_judge ON claim_checks(judge_id);

CREATE TABLE checks (
  claim_id           TEXT PRIMARY KEY,
  judge_id           TEXT NOT NULL,
  source_id          TEXT NOT NULL,
  verdict            TEXT NOT NULL CHECK (verdict IN ('pass', 'fail', 'unclear')),
  score              DOUBLE PRECISION CHECK (score BETWEEN 0 AND 1),
  confidence         DOUBLE PRECISION NOT NULL CHECK (confidence BETWEEN 0 AND 1),
  reason             TEXT NOT NULL,
  passage_quote      TEXT,
  passage            TEXT NOT NULL,
  claim_text         TEXT NOT NULL,
  route              TEXT CHECK (route IN ('done', 'second_judge', 'human_review')),
  route_reason       TEXT,
  second_judge_id    TEXT,
  second_verdict     TEXT CHECK (second_verdict IN ('pass', 'fail', 'unclear')),
  second_score       DOUBLE PRECISION CHECK (second_score BETWEEN 0 AND 1),
  second_confidence  DOUBLE PRECISION CHECK (second_confidence BETWEEN 0 AND 1),
  second_reason      TEXT,
  final_verdict      TEXT CHECK (final_verdict IN ('pass', 'fail', 'unclear')),
  final_route        TEXT CHECK (final_route IN ('done', 'second_judge', 'human_review')),
  final_reason       TEXT,
  created_at         TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_checks_source ON checks(source_id);
CREATE INDEX idx_checks_judge ON checks(judge_id);
CREATE INDEX idx_checks_created ON checks(created_at);

CREATE TABLE reviews (
  review_id      UUID PRIMARY KEY,
  claim_id       TEXT NOT NULL,
  reviewer       TEXT NOT NULL,
  final_verdict  TEXT NOT NULL CHECK (final_verdict IN ('pass', 'fail', 'unclear')),
  notes          TEXT,
  created_at     TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_reviews_claim ON reviews(claim_id);
