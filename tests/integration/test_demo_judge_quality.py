"""Judge quality on the demo's seed-shaped workload, as a user runs it: agreement equals the reference packages
on the demo's own facts, the judge that turns harsh in the night's 8th hour raises drift alerts for that hour
and no other, and calibration runs on the demo's reviews."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

import krippendorff
import numpy as np
import psycopg
import pytest
from sklearn.metrics import cohen_kappa_score

from judgeflow.calibration import compute
from judgeflow.demo import DRIFT_SPAN, NIGHT_MINUTES, SECOND_JUDGE
from judgeflow.workload import EPOCH
from tests.support import REPO

pytestmark = pytest.mark.integration
CLAIMS = 1000
FIRST_JUDGE = "faithfulness-judge-v1"


def _alpha(values: dict[tuple[str, str], float], level: Literal["nominal", "interval"]) -> float:
    """The `krippendorff` package on (judge, unit) -> value: judges in rows, NaN where a judge coded nothing."""
    judges = sorted({j for j, _ in values})
    units = sorted({u for _, u in values})
    matrix = [[values.get((j, u), math.nan) for u in units] for j in judges]
    return float(krippendorff.alpha(reliability_data=np.array(matrix), level_of_measurement=level))


def test_demo_shows_agreement_drift_and_calibration(kafka_bootstrap: str, database_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "DATABASE_URL": database_url,
           "JUDGEFLOW_STATE_DIR": str(tmp_path)}  # fmt: skip
    demo = subprocess.run([sys.executable, "-m", "judgeflow.cli", "demo", "--runs", "30", "--claims", str(CLAIMS)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=600)  # fmt: skip
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "judge drift alerts" in demo.stdout and "agreement between judges" in demo.stdout
    assert "Judges vs human review" in demo.stdout and "Suggested routing thresholds" in demo.stdout
    [schema] = [line.split()[1] for line in demo.stdout.splitlines() if line.startswith("schema ")]

    with psycopg.connect(database_url, options=f"-c search_path={schema}") as conn:
        # Agreement: every lane's alpha over all judges, the claims' nominal alpha and the two judges' kappa.
        stored = {(kind, lane or "", stat): value for kind, lane, stat, value in conn.execute(
            "SELECT kind, lane_key, statistic, value FROM judge_agreement_by_rubric WHERE judges = 'all judges' "
            "OR statistic = 'kappa'")}  # fmt: skip
        lanes: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
        for run, judge, lane, score in conn.execute(
            "SELECT o.evaluation_run_id::text, o.judge_model, l.lane_key, l.lane_score "
            "FROM judge_outputs o JOIN judge_lane_scores l ON l.judge_output_id = o.id"
        ):
            lanes[lane][(judge, run)] = float(score)
        assert len(lanes) == 3
        for lane, values in lanes.items():
            assert stored[("lane_scores", lane, "alpha_interval")] == pytest.approx(_alpha(values, "interval"))
        verdicts = {(j, c): v for c, j, v in conn.execute("SELECT claim_id, judge_id, verdict FROM claim_checks")}
        codes = {"pass": 0.0, "fail": 1.0, "unclear": 2.0}
        nominal = _alpha({k: codes[v] for k, v in verdicts.items()}, "nominal")
        assert stored[("claim_verdicts", "", "alpha_nominal")] == pytest.approx(nominal)
        both = sorted(c for j, c in verdicts if j == SECOND_JUDGE and (FIRST_JUDGE, c) in verdicts)
        assert len(both) > 100
        kappa = cohen_kappa_score(
            [verdicts[(FIRST_JUDGE, c)] for c in both], [verdicts[(SECOND_JUDGE, c)] for c in both]
        )
        assert stored[("claim_verdicts", "", "kappa")] == pytest.approx(kappa)

        # Drift: alerts only for the first judge, only for hour windows inside the harsh span, and at least the
        # fail rate going up in its first hour.
        alerts = conn.execute(
            "SELECT judge, statistic, direction, window_start, window_seconds FROM judge_alerts"
        ).fetchall()
        start = EPOCH + timedelta(minutes=NIGHT_MINUTES * DRIFT_SPAN[0])
        end = EPOCH + timedelta(minutes=NIGHT_MINUTES * DRIFT_SPAN[1])
        assert alerts, demo.stdout[-3000:]
        for judge, _statistic, _direction, window_start, seconds in alerts:
            assert judge == FIRST_JUDGE and seconds == 3600
            assert start <= window_start < end
        first_hour = datetime(start.year, start.month, start.day, start.hour, tzinfo=UTC)
        assert (FIRST_JUDGE, "fail_rate", "up", first_hour, 3600) in alerts

        # Calibration: each judge's ECE (what the demo and `calibrate` print) equals a reference computed here
        # from the raw review and check rows: the latest review per claim, ten equal-width confidence bins.
        reviews = conn.execute("SELECT claim_id, created_at, review_id::text, final_verdict FROM reviews").fetchall()
        reviews.sort(key=lambda r: r[2])  # ties in time: the smallest review id, as the view orders them
        reviews.sort(key=lambda r: r[1], reverse=True)
        latest: dict[str, str] = {}
        for claim, _created, _review, human in reviews:
            latest.setdefault(claim, human)
        points: dict[str, list[tuple[float, bool]]] = defaultdict(list)
        for claim, judge, verdict, confidence in conn.execute(
            "SELECT claim_id, judge_id, verdict, confidence FROM claim_checks WHERE rubric_version_id IS NULL"
        ):
            if claim in latest:
                points[judge].append((float(confidence), verdict == latest[claim]))
        cal = compute(conn, "none")
        assert {j.judge_id for j in cal.judges} == set(points) and FIRST_JUDGE in points
        for j in cal.judges:
            pts = points[j.judge_id]
            conf = np.array([c for c, _ in pts])
            hit = np.array([h for _, h in pts], dtype=float)
            idx = np.minimum((conf * 10).astype(int), 9)
            ece = sum(abs(hit[idx == b].mean() - conf[idx == b].mean()) * (idx == b).sum() / len(pts)
                      for b in range(10) if (idx == b).any())  # fmt: skip
            assert j.count == len(pts) and j.ece == pytest.approx(ece)
            assert f"{ece:.3f}" in demo.stdout

    args = ["calibrate", "--rubric", "none", "--schema", schema, "--html", str(tmp_path / "cal.html")]
    calibrate = subprocess.run([sys.executable, "-m", "judgeflow.cli", *args], capture_output=True, text=True,
                               env={**env, "COLUMNS": "200"}, cwd=REPO, timeout=120)  # fmt: skip
    assert calibrate.returncode == 0, calibrate.stdout[-3000:] + calibrate.stderr[-3000:]
    assert FIRST_JUDGE in calibrate.stdout and (tmp_path / "cal.html").exists()
