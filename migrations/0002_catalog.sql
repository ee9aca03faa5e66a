-- depends: 0001_raw_events
-- Submissions, rubrics and evaluation runs. A judge output may arrive before
-- its run or rubric: the projector then inserts the id alone and fills the
-- rest when the run or rubric event arrives, so nothing is lost or rejected.

CREATE TABLE submissions (
  id             UUID PRIMARY KEY,
  first_seen_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE rubrics (
  id             UUID PRIMARY KEY,
  name           TEXT,
  schema_version TEXT,
  doc            JSONB,
  created_at     TIMESTAMPTZ,
  first_seen_at  TIMESTAMPTZ NOT NULL,
  source_offset  BIGINT          -- the latest version on the compacted topic wins
);

CREATE TABLE evaluation_runs (
  id                     UUID PRIMARY KEY,
  submission_id          UUID REFERENCES submissions(id),
  rubric_version_id      UUID REFERENCES rubrics(id),
  expected_judge_models  TEXT[],
  judge_timeout_seconds  NUMERIC(10,3) CHECK (judge_timeout_seconds > 0),
  schema_version         TEXT,
  started_at             TIMESTAMPTZ,
  first_seen_at          TIMESTAMPTZ NOT NULL,
  source_offset          BIGINT,   -- the first run event wins, as in the stream agent
  CHECK ((started_at IS NULL) = (schema_version IS NULL))
);
CREATE INDEX idx_evaluation_runs_submission ON evaluation_runs(submission_id);
