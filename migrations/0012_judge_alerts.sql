-- depends: 0008_alerts
-- Judge drift alerts from `judge.alerts`: one statistic of one judge's window
-- (hour or day, JUDGEFLOW_DRIFT_WINDOWS) that moved away from its trailing
-- baseline of earlier windows (README "Drift per judge"). One row per alert
-- event: event_id is uuid5 of judge, source, statistic, lane and window, so a
-- redelivery or a replay repeats it and adds nothing. Insert-only, like every
-- fact table. Scores and rates are on the 0-1 scale (lane scores / 100).

CREATE TABLE judge_alerts (
  event_id           UUID PRIMARY KEY,
  judge              TEXT NOT NULL CHECK (length(judge) >= 1),
  source             TEXT NOT NULL CHECK (source IN ('claim_check', 'judge_output')),
  statistic          TEXT NOT NULL CHECK (statistic IN ('mean_score', 'fail_rate', 'contradiction_rate',
                       'low_confidence_share', 'lane_mean_score', 'failure_rate', 'timeout_rate')),
  lane               TEXT,
  window_seconds     INTEGER NOT NULL CHECK (window_seconds > 0),
  window_start       TIMESTAMPTZ NOT NULL,
  window_end         TIMESTAMPTZ NOT NULL,
  value              DOUBLE PRECISION NOT NULL,
  n                  INTEGER NOT NULL CHECK (n >= 1),
  baseline_mean      DOUBLE PRECISION NOT NULL,
  baseline_sd        DOUBLE PRECISION NOT NULL CHECK (baseline_sd >= 0),
  baseline_windows   INTEGER NOT NULL CHECK (baseline_windows >= 1),
  baseline_n         INTEGER NOT NULL CHECK (baseline_n >= 1),
  z                  DOUBLE PRECISION NOT NULL,
  z_threshold        DOUBLE PRECISION NOT NULL,
  min_delta          DOUBLE PRECISION NOT NULL,
  direction          TEXT NOT NULL CHECK (direction IN ('up', 'down')),
  raised_at          TIMESTAMPTZ NOT NULL,
  schema_version     TEXT NOT NULL,
  source_topic       TEXT NOT NULL,
  source_partition   INTEGER NOT NULL,
  source_offset      BIGINT NOT NULL,
  created_at         TIMESTAMPTZ NOT NULL   -- the Kafka record timestamp (replays agree)
);
DO $$ BEGIN PERFORM make_insert_only('judge_alerts'); END $$;
CREATE INDEX idx_judge_alerts_judge ON judge_alerts(judge, window_start DESC);

-- Alerts raised in the last 7 days (a replayed stream of old events still shows
-- what it raised today), newest window first, with the move
-- from the baseline (value - baseline_mean) spelled out.
CREATE VIEW recent_judge_alerts AS
SELECT event_id, judge, source, statistic, lane, window_seconds, window_start, window_end, value, n,
       baseline_mean, baseline_sd, baseline_windows, value - baseline_mean AS delta, z, z_threshold, direction,
       raised_at
FROM judge_alerts
WHERE raised_at >= now() - interval '7 days'
ORDER BY window_end DESC, judge, statistic, lane;
