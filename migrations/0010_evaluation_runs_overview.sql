-- depends: 0008_alerts
-- One row per evaluation run for the dashboard and `judgeflow report`: its
-- latest reconciliation revision (status, judges in, scores, notice), the
-- lanes the judges contradict each other on, and the run's latest routing
-- decision. A run with no revision yet is 'running' and has no route.

CREATE INDEX idx_routing_decisions_evaluation ON routing_decisions(evaluation_run_id, decided_at)
  WHERE subject = 'evaluation';

CREATE VIEW evaluation_runs_overview AS
SELECT r.id AS evaluation_run_id, r.submission_id, r.started_at,
       coalesce(s.status, 'running') AS status, s.revision, s.successful_judge_count, s.judge_count,
       s.final_overall_score, s.final_adjusted_score, s.weighted_final_score,
       coalesce(s.has_contradictions, false) AS has_contradictions,
       coalesce((SELECT array_agg(format('%s (spread %s)', c->>'lane_key', c->>'spread') ORDER BY c->>'lane_key')
                 FROM jsonb_array_elements(CASE WHEN jsonb_typeof(s.contradiction_details) = 'array'
                                                THEN s.contradiction_details ELSE '[]' END) AS c),
                '{}') AS contradiction_lanes,
       coalesce(s.missing_judges, '{}') AS missing_judges, coalesce(s.failed_judges, '{}') AS failed_judges,
       s.notice, v.emitted_at AS revised_at, d.route, d.reason AS route_reason, d.decided_at AS routed_at
FROM evaluation_runs r
LEFT JOIN evaluation_reconciled_scores s ON s.evaluation_run_id = r.id
LEFT JOIN evaluation_reconciled_revisions v ON v.evaluation_run_id = r.id AND v.revision = s.revision
LEFT JOIN (
  SELECT DISTINCT ON (evaluation_run_id) evaluation_run_id, route, reason, decided_at
  FROM routing_decisions WHERE subject = 'evaluation'
  ORDER BY evaluation_run_id, decided_at DESC, event_id DESC
) d ON d.evaluation_run_id = r.id;
