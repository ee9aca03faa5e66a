-- depends: 0002_catalog
-- Seed 000's normalized judge output tables. Ids are uuid5 of the judge_run_id
-- (and of the parent id plus key or position for child rows), so a replay or
-- rebuild writes the very same rows. Insert-only, enforced by triggers.

CREATE TABLE judge_outputs (
  id                        UUID PRIMARY KEY,
  evaluation_run_id         UUID NOT NULL REFERENCES evaluation_runs(id),
  submission_id             UUID NOT NULL REFERENCES submissions(id),
  rubric_version_id         UUID NOT NULL REFERENCES rubrics(id),
  judge_run_id              UUID NOT NULL UNIQUE,
  judge_model               TEXT NOT NULL CHECK (length(judge_model) >= 3),
  schema_version            TEXT NOT NULL,
  source_schema_version     TEXT NOT NULL,
  overall_score             INTEGER CHECK (overall_score BETWEEN 0 AND 100),
  integrity_adjusted_score  INTEGER CHECK (integrity_adjusted_score BETWEEN 0 AND 100),
  positive_signal           TEXT,
  primary_weakness          TEXT,
  confidence                TEXT CHECK (confidence IN ('high', 'medium', 'low')),
  confidence_reasoning      TEXT,
  status                    TEXT NOT NULL CHECK (status IN ('complete', 'partial', 'failed')),
  failure_reason            TEXT,
  completed_lane_keys       TEXT[] NOT NULL DEFAULT '{}',
  judge_started_at          TIMESTAMPTZ NOT NULL,
  judge_completed_at        TIMESTAMPTZ,
  source_topic              TEXT NOT NULL,
  source_partition          INTEGER NOT NULL,
  source_offset             BIGINT NOT NULL,
  created_at                TIMESTAMPTZ NOT NULL,
  CONSTRAINT adjusted_lte_overall CHECK (integrity_adjusted_score <= overall_score),
  CONSTRAINT failure_reason_when_not_complete
    CHECK (status = 'complete' OR length(btrim(coalesce(failure_reason, ''))) > 0),
  CONSTRAINT low_confidence_reasoned
    CHECK (confidence <> 'low' OR length(btrim(coalesce(confidence_reasoning, ''))) >= 20),
  CONSTRAINT signals_unless_failed
    CHECK (status = 'failed' OR (positive_signal IS NOT NULL AND primary_weakness IS NOT NULL))
);

CREATE TABLE judge_lane_scores (
  id                UUID PRIMARY KEY,
  judge_output_id   UUID NOT NULL REFERENCES judge_outputs(id),
  lane_key          TEXT NOT NULL CHECK (lane_key ~ '^[a-z_]+$'),
  lane_score        INTEGER NOT NULL CHECK (lane_score BETWEEN 0 AND 100),
  UNIQUE (judge_output_id, lane_key)
);

CREATE TABLE judge_dimension_scores (
  id                UUID PRIMARY KEY,
  lane_score_id     UUID NOT NULL REFERENCES judge_lane_scores(id),
  dimension_key     TEXT NOT NULL CHECK (dimension_key ~ '^[a-z_]+$'),
  score             INTEGER NOT NULL CHECK (score BETWEEN 0 AND 100),
  reasoning         TEXT NOT NULL,
  band_label        TEXT NOT NULL,
  UNIQUE (lane_score_id, dimension_key)
);

CREATE TABLE judge_flags (
  id                UUID PRIMARY KEY,
  judge_output_id   UUID NOT NULL REFERENCES judge_outputs(id),
  position          INTEGER NOT NULL,
  flag_code         TEXT NOT NULL CHECK (flag_code ~ '^[A-Z_]+$'),
  severity          TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
  description       TEXT NOT NULL,
  auto_disqualify   BOOLEAN NOT NULL DEFAULT false,
  created_at        TIMESTAMPTZ NOT NULL,
  UNIQUE (judge_output_id, position)
);

CREATE TABLE judge_integrity_adjustments (
  id                UUID PRIMARY KEY,
  judge_output_id   UUID NOT NULL REFERENCES judge_outputs(id),
  position          INTEGER NOT NULL,
  flag_code         TEXT NOT NULL CHECK (flag_code ~ '^[A-Z_]+$'),
  description       TEXT NOT NULL,
  deduction         INTEGER NOT NULL CHECK (deduction BETWEEN -50 AND 0),
  created_at        TIMESTAMPTZ NOT NULL,
  UNIQUE (judge_output_id, position)
);

-- Evidence refs point at their real parent: exactly one of the three typed
-- foreign keys is set, and parent_type / parent_id (seed 000's columns) agree.
CREATE TABLE judge_evidence_refs (
  id                  UUID PRIMARY KEY,
  judge_output_id     UUID NOT NULL REFERENCES judge_outputs(id),
  parent_type         TEXT NOT NULL CHECK (parent_type IN ('dimension_score', 'integrity_adjustment', 'flag')),
  parent_id           UUID NOT NULL,
  dimension_score_id  UUID REFERENCES judge_dimension_scores(id),
  adjustment_id       UUID REFERENCES judge_integrity_adjustments(id),
  flag_id             UUID REFERENCES judge_flags(id),
  position            INTEGER NOT NULL,
  ref_type            TEXT NOT NULL CHECK (ref_type IN ('transcript_line', 'tool_call', 'diff_hunk',
                                                        'test_result', 'code_artifact', 'error_event')),
  ref_id              TEXT NOT NULL CHECK (length(ref_id) >= 1),
  ref_location        TEXT,
  excerpt             TEXT CHECK (length(excerpt) <= 300),
  created_at          TIMESTAMPTZ NOT NULL,
  CONSTRAINT one_real_parent CHECK (
    num_nonnulls(dimension_score_id, adjustment_id, flag_id) = 1
    AND parent_id = coalesce(dimension_score_id, adjustment_id, flag_id)
    AND (parent_type = 'dimension_score') = (dimension_score_id IS NOT NULL)
    AND (parent_type = 'integrity_adjustment') = (adjustment_id IS NOT NULL)
    AND (parent_type = 'flag') = (flag_id IS NOT NULL)
  )
);

CREATE TABLE judge_telemetry (
  id                           UUID PRIMARY KEY,
  judge_output_id              UUID NOT NULL UNIQUE REFERENCES judge_outputs(id),
  tool_call_count              INTEGER CHECK (tool_call_count >= 0),
  step_count                   INTEGER CHECK (step_count >= 0),
  error_count                  INTEGER CHECK (error_count >= 0),
  error_rate                   NUMERIC(5,4) CHECK (error_rate BETWEEN 0 AND 1),
  total_tokens_used            INTEGER CHECK (total_tokens_used >= 0),
  wall_time_seconds            NUMERIC(10,2) CHECK (wall_time_seconds >= 0),
  telemetry_unavailable_reason TEXT,
  CONSTRAINT metrics_or_reason CHECK (
    (telemetry_unavailable_reason IS NULL
      AND tool_call_count IS NOT NULL AND step_count IS NOT NULL AND error_rate IS NOT NULL)
    OR (telemetry_unavailable_reason IS NOT NULL
      AND num_nonnulls(tool_call_count, step_count, error_count, error_rate,
                       total_tokens_used, wall_time_seconds) = 0)
  )
);

-- Warnings found at validation (LANE_SCORE_DIVERGES, GENERIC_SIGNAL, PARTIAL_OUTPUT, ...).
CREATE TABLE judge_output_warnings (
  id                UUID PRIMARY KEY,
  judge_output_id   UUID NOT NULL REFERENCES judge_outputs(id),
  code              TEXT NOT NULL CHECK (code ~ '^[A-Z_]+$'),
  loc               TEXT NOT NULL,
  message           TEXT NOT NULL
);

CREATE INDEX idx_judge_outputs_eval_run ON judge_outputs(evaluation_run_id);
CREATE INDEX idx_judge_outputs_submission ON judge_outputs(submission_id);
CREATE INDEX idx_judge_outputs_status ON judge_outputs(status);
CREATE INDEX idx_judge_lane_scores_output ON judge_lane_scores(judge_output_id);
CREATE INDEX idx_judge_dimension_scores_lane ON judge_dimension_scores(lane_score_id);
CREATE INDEX idx_judge_evidence_refs_parent ON judge_evidence_refs(parent_id, parent_type);
CREATE INDEX idx_judge_flags_output ON judge_flags(judge_output_id);
CREATE INDEX idx_judge_flags_code ON judge_flags(flag_code);
CREATE INDEX idx_judge_output_warnings_code ON judge_output_warnings(code);

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['judge_outputs', 'judge_lane_scores', 'judge_dimension_scores', 'judge_flags',
                           'judge_integrity_adjustments', 'judge_evidence_refs', 'judge_telemetry',
                           'judge_output_warnings'] LOOP
    PERFORM make_insert_only(t::regclass);
  END LOOP;
END
$$;
