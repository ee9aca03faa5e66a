-- depends: 0004_reconciliation 0005_claims 0006_operations
-- Analyst queries, as views. README "Read models" has one example each.

-- Seed 003, question 1: which sources produce the most unsupported claims?
CREATE VIEW unsupported_claims_by_source AS
SELECT source_id, count(*) AS fails
FROM checks WHERE verdict = 'fail'
GROUP BY source_id ORDER BY fails DESC, source_id;

-- Seed 003, question 2: is a judge drifting? (every verdict of every judge)
CREATE VIEW judge_drift AS
SELECT judge_id,
       avg(CASE WHEN verdict = 'fail' AND score >= 0.80 THEN 1.0 ELSE 0 END) AS contradiction_rate,
       avg(confidence) AS mean_confidence,
       count(*) AS checks
FROM claim_checks GROUP BY judge_id;

-- Seed 003, question 3: how much work do the second judge and humans absorb per day?
CREATE VIEW routing_load_by_day AS
SELECT date_trunc('day', created_at) AS day,
       count(*) FILTER (WHERE route = 'second_judge') AS to_second_judge,
       count(*) FILTER (WHERE route = 'human_review') AS to_human,
       count(*) FILTER (WHERE route = 'done') AS done,
       count(*) FILTER (WHERE route = 'second_judge' AND final_route = 'human_review') AS to_human_after_second_judge
FROM checks GROUP BY 1 ORDER BY 1;

-- The latest review of each claim.
CREATE VIEW latest_reviews AS
SELECT DISTINCT ON (claim_id) claim_id, review_id, reviewer, final_verdict, created_at
FROM reviews ORDER BY claim_id, created_at DESC, review_id;

-- Seed 003, question 4: are reviews changing verdicts? (per judge, every verdict)
CREATE VIEW overturn_rate_by_judge AS
SELECT c.judge_id,
       avg(CASE WHEN r.final_verdict <> c.verdict THEN 1.0 ELSE 0 END) AS overturn_rate,
       count(*) AS reviewed
FROM claim_checks c JOIN latest_reviews r USING (claim_id)
GROUP BY c.judge_id;

-- Judge verdict vs human verdict pairs, the input of Cohen's kappa per judge.
CREATE VIEW judge_human_pairs AS
SELECT c.judge_id, c.claim_id, c.verdict AS judge_verdict, r.final_verdict AS human_verdict
FROM claim_checks c JOIN latest_reviews r USING (claim_id);

-- Seed 000 checklist 1: must be 0.
CREATE VIEW outputs_without_schema_version AS
SELECT count(*) AS outputs FROM judge_outputs WHERE schema_version IS NULL;

-- Seed 000 checklist 5: N rows for N judges per run (mismatch = true needs a look).
CREATE VIEW judge_outputs_per_run AS
SELECT r.id AS evaluation_run_id,
       cardinality(r.expected_judge_models) AS expected_judges,
       count(o.id) AS outputs,
       count(DISTINCT o.judge_model) AS judge_models,
       count(o.id) <> coalesce(cardinality(r.expected_judge_models), 0) AS mismatch
FROM evaluation_runs r LEFT JOIN judge_outputs o ON o.evaluation_run_id = r.id
GROUP BY r.id, r.expected_judge_models;

-- Seed 000 checklist 3: partial and failed outputs, with what they did score.
CREATE VIEW partial_and_failed_outputs AS
SELECT evaluation_run_id, judge_model, judge_run_id, status, failure_reason, completed_lane_keys
FROM judge_outputs WHERE status IN ('partial', 'failed');

-- Seed 000 checklist 7: lane scores that diverge from their dimensions.
CREATE VIEW lane_score_divergences AS
SELECT o.evaluation_run_id, o.judge_model, o.judge_run_id, w.loc, w.message
FROM judge_output_warnings w JOIN judge_outputs o ON o.id = w.judge_output_id
WHERE w.code = 'LANE_SCORE_DIVERGES';

-- Seed 000 checklist 10: runs shown with one (or more) judge unavailable.
CREATE VIEW runs_with_unavailable_judges AS
SELECT evaluation_run_id, status, successful_judge_count, judge_count, missing_judges, failed_judges, notice
FROM evaluation_reconciled_scores WHERE notice IS NOT NULL;

-- Every run's state: running (no revision yet), provisional or final.
CREATE VIEW evaluation_run_status AS
SELECT r.id AS evaluation_run_id, r.started_at, coalesce(s.status, 'running') AS status,
       s.final_overall_score, s.final_adjusted_score, s.notice
FROM evaluation_runs r LEFT JOIN evaluation_reconciled_scores s ON s.evaluation_run_id = r.id;

-- Score distribution by judge and rubric version, in buckets of 10 points.
CREATE VIEW score_distribution AS
SELECT judge_model, rubric_version_id, least(overall_score / 10 * 10, 90) AS bucket, count(*) AS outputs
FROM judge_outputs WHERE status <> 'failed'
GROUP BY judge_model, rubric_version_id, 3;

-- Dead letters by code.
CREATE VIEW dead_letters_by_code AS
SELECT code, count(*) AS events FROM invalid_events, unnest(error_codes) AS code
GROUP BY code ORDER BY events DESC, code;
