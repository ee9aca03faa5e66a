-- depends: 0003_judge_outputs
-- Reconciliation read models, separate from the raw judge rows (checklist 5):
-- every revision (insert-only history) and the latest one per run.

CREATE TABLE evaluation_reconciled_revisions (
  event_id                  UUID PRIMARY KEY,
  evaluation_run_id         UUID NOT NULL REFERENCES evaluation_runs(id),
  submission_id             UUID NOT NULL REFERENCES submissions(id),
  revision                  INTEGER NOT NULL CHECK (revision >= 1),
  status                    TEXT NOT NULL CHECK (status IN ('provisional', 'final')),
  final_reason              TEXT CHECK (final_reason IN ('all_judges_in', 'timeout')),
  judge_count               INTEGER NOT NULL,
  successful_judge_count    INTEGER NOT NULL,
  final_overall_score       NUMERIC(5,2),
  final_adjusted_score      NUMERIC(5,2),
  weighted_final_score      NUMERIC(5,2),
  reconciliation_method     TEXT NOT NULL CHECK (reconciliation_method IN ('mean', 'median', 'weighted_judge_confidence')),
  has_contradictions        BOOLEAN NOT NULL DEFAULT false,
  contradiction_details     JSONB,
  reconciled_lane_scores    JSONB NOT NULL,
  lane_scores_by_judge      JSONB NOT NULL,
  judge_run_ids             UUID[] NOT NULL,
  missing_judges            TEXT[] NOT NULL DEFAULT '{}',
  failed_judges             TEXT[] NOT NULL DEFAULT '{}',
  notice                    TEXT,
  emitted_at                TIMESTAMPTZ NOT NULL,
  UNIQUE (evaluation_run_id, revision)
);
DO $$ BEGIN PERFORM make_insert_only('evaluation_reconciled_revisions'); END $$;

-- Seed 000's table: one row per run, the latest revision (final once finalized_at is set).
CREATE TABLE evaluation_reconciled_scores (
  id                        UUID PRIMARY KEY,
  evaluation_run_id         UUID NOT NULL UNIQUE REFERENCES evaluation_runs(id),
  submission_id             UUID NOT NULL REFERENCES submissions(id),
  revision                  INTEGER NOT NULL,
  status                    TEXT NOT NULL CHECK (status IN ('provisional', 'final')),
  judge_count               INTEGER NOT NULL,
  successful_judge_count    INTEGER NOT NULL,
  final_overall_score       NUMERIC(5,2),
  final_adjusted_score      NUMERIC(5,2),
  weighted_final_score      NUMERIC(5,2),
  reconciliation_method     TEXT NOT NULL,
  has_contradictions        BOOLEAN NOT NULL DEFAULT false,
  contradiction_details     JSONB,
  missing_judges            TEXT[] NOT NULL DEFAULT '{}',
  failed_judges             TEXT[] NOT NULL DEFAULT '{}',
  notice                    TEXT,
  finalized_at              TIMESTAMPTZ,
  created_at                TIMESTAMPTZ NOT NULL
);
CREATE INDEX idx_reconciled_scores_submission ON evaluation_reconciled_scores(submission_id);
