"""Drift per judge end to end: claim checks through a real worker (inline deltas, the partials topic, the drift
agent), an alert on `judge.alerts`, a real projector storing it once in `judge_alerts`, and the dashboard."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from judgeflow import workload
from judgeflow.dashboard import _alerts, summary
from schemas.drift import JudgeDriftAlert
from tests.scaffold import Pipeline
from tests.support import consume_until

pytestmark = pytest.mark.integration
BASELINE, PER_WINDOW = 8, 20
DRIFT = {
    "JUDGEFLOW_TIMER_INTERVAL": "0.5",
    "JUDGEFLOW_PARTITIONS": "1",  # one partition: checks reach the worker in event-time order
    "JUDGEFLOW_DRIFT_WINDOWS": "1m",
    "JUDGEFLOW_DRIFT_FLUSH_SECONDS": "0.5",
    "JUDGEFLOW_DRIFT_GRACE_SECONDS": "15",
    "JUDGEFLOW_DRIFT_BASELINE_WINDOWS": str(BASELINE),
    "JUDGEFLOW_DRIFT_MIN_BASELINE_WINDOWS": "4",
    "JUDGEFLOW_DRIFT_MIN_WINDOW_EVENTS": "10",
}


@pytest.mark.pipeline(partitions=1)
def test_a_shifted_judge_raises_one_alert_that_is_projected_once(pipeline: Pipeline) -> None:
    prefix, names = pipeline.prefix, pipeline.names
    rng = random.Random(3)
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)
    records = []
    for w in range(BASELINE + 1):  # eight steady minutes, then one where the judge's scores are 0.35 higher
        for i in range(PER_WINDOW):
            at = start + timedelta(minutes=w, seconds=i * 60 / PER_WINDOW)
            score = round(min(1.0, rng.gauss(0.55 if w < BASELINE else 0.90, 0.03)), 4)
            check = workload.claim_check(rng, f"{prefix}c{w}-{i}", judge_id="drifter", verdict="pass", score=score,
                                         confidence=0.9)  # fmt: skip
            check["checked_at"] = at.isoformat().replace("+00:00", "Z")
            records.append((names.checks, check["claim_id"].encode(), json.dumps(check).encode()))
    closer = workload.claim_check(rng, f"{prefix}closer", judge_id="drifter", verdict="pass", score=0.5,
                                  confidence=0.9)  # fmt: skip
    closer["checked_at"] = (start + timedelta(minutes=BASELINE + 5)).isoformat().replace("+00:00", "Z")
    records.append((names.checks, closer["claim_id"].encode(), json.dumps(closer).encode()))
    pipeline.send(records)

    with pipeline.worker(**DRIFT) as worker:
        got = consume_until(pipeline.bootstrap, [names.judge_alerts], lambda rs: len(rs) >= 1, timeout=120,
                            worker=worker)  # fmt: skip
        assert worker.alive(), worker.log()
    alerts = [JudgeDriftAlert.model_validate_json(r.value) for r in got]
    assert len(alerts) == 1, alerts
    a = alerts[0]
    shifted = start + timedelta(minutes=BASELINE)
    assert (a.judge, a.source, a.statistic, a.direction) == ("drifter", "claim_check", "mean_score", "up")
    assert datetime.fromisoformat(a.window_start) == shifted and a.window_seconds == 60
    assert a.n == PER_WINDOW and a.baseline_windows == BASELINE and a.baseline_n == BASELINE * PER_WINDOW
    assert a.value == pytest.approx(0.90, abs=0.03) and a.baseline_mean == pytest.approx(0.55, abs=0.02)
    assert got[0].key == b"drifter"

    # A redelivered copy of the alert adds no row.
    pipeline.send([(names.judge_alerts, got[0].key, got[0].value)])
    pipeline.project_to_end()
    with pipeline.connect() as conn:
        rows: list[Any] = conn.execute(
            "SELECT event_id::text, judge, statistic, window_start, n, baseline_windows FROM judge_alerts"
        ).fetchall()
        assert rows == [(a.event_id, "drifter", "mean_score", shifted, PER_WINDOW, BASELINE)]
        recent = conn.execute("SELECT judge, statistic, delta FROM recent_judge_alerts").fetchall()
        assert [(j, s) for j, s, _ in recent] == [("drifter", "mean_score")] and recent[0][2] > 0.3
        page = _alerts(summary(conn))
        assert "Judge drift alerts (last 7 days) (1)" in page and "drifter" in page and "mean_score" in page
