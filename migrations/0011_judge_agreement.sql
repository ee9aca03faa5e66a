-- depends: 0003_judge_outputs 0005_claims 0010_evaluation_runs_overview
-- Agreement between judges, per rubric: Krippendorff's alpha on lane scores
-- (interval; a unit is an evaluation run, a coder a judge model), alpha on
-- claim verdicts (nominal; a unit is a claim, a coder a judge id) and Cohen's
-- kappa per judge pair on the claims both checked, each with a 95% bootstrap
-- interval. The projector recomputes a rubric's rows from the stored facts
-- after a batch touched it (projections/agreement_store.py); NULL means
-- undefined (nothing pairable, or every value the same), never 0.

CREATE TABLE judge_agreement (
  kind               TEXT NOT NULL CHECK (kind IN ('lane_scores', 'claim_verdicts')),
  rubric_key         TEXT NOT NULL,            -- the rubric's id as text, or 'no rubric'
  rubric_version_id  UUID,                     -- NULL: claim checks without a rubric
  lane_key           TEXT NOT NULL,            -- '' for claim verdicts
  judge_a            TEXT NOT NULL,            -- '*' and '*': every judge at once
  judge_b            TEXT NOT NULL,
  statistic          TEXT NOT NULL CHECK (statistic IN ('alpha_interval', 'alpha_nominal', 'kappa')),
  value              DOUBLE PRECISION,
  ci_low             DOUBLE PRECISION,
  ci_high            DOUBLE PRECISION,
  units              INTEGER NOT NULL CHECK (units >= 0),
  pairable_values    INTEGER NOT NULL CHECK (pairable_values >= 0),
  resamples          INTEGER NOT NULL CHECK (resamples >= 0),
  refreshed_at       TIMESTAMPTZ NOT NULL,
  PRIMARY KEY (kind, rubric_key, lane_key, judge_a, judge_b, statistic),
  CHECK ((ci_low IS NULL) = (ci_high IS NULL))
);

-- Rubrics whose figures are older than their facts: marked (version + 1) in
-- the batch transaction that wrote the facts, deleted by a refresh that read
-- them at that version.
CREATE TABLE judge_agreement_pending (
  kind               TEXT NOT NULL CHECK (kind IN ('lane_scores', 'claim_verdicts')),
  rubric_key         TEXT NOT NULL,
  rubric_version_id  UUID,
  version            BIGINT NOT NULL DEFAULT 1,
  marked_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (kind, rubric_key)
);

-- A rubric's facts, read by its refresh.
CREATE INDEX idx_evaluation_runs_rubric ON evaluation_runs(rubric_version_id);
CREATE INDEX idx_judge_outputs_rubric ON judge_outputs(rubric_version_id);
CREATE INDEX idx_claim_checks_rubric ON claim_checks(rubric_version_id);

-- What analysts read: one row per rubric, lane (lane scores) and judge pair,
-- plus the row over all judges.
CREATE VIEW judge_agreement_by_rubric AS
SELECT a.rubric_version_id,
       CASE WHEN a.rubric_version_id IS NULL THEN 'no rubric' ELSE coalesce(r.name, a.rubric_key) END AS rubric,
       a.kind, nullif(a.lane_key, '') AS lane_key,
       CASE WHEN a.judge_a = '*' THEN 'all judges' ELSE a.judge_a || ' / ' || a.judge_b END AS judges,
       a.statistic, a.value, a.ci_low, a.ci_high, a.units, a.pairable_values, a.resamples, a.refreshed_at
FROM judge_agreement a LEFT JOIN rubrics r ON r.id = a.rubric_version_id
ORDER BY a.rubric_version_id NULLS LAST, a.kind, a.lane_key, a.judge_a = '*' DESC, a.judge_a, a.judge_b,
         a.statistic;
