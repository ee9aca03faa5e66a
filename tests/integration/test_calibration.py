"""Calibration from reviews through the real broker, worker, projector and Postgres: a rubric, first- and
second-judge checks and human reviews are published, routed and projected; `judgeflow calibrate` prints the
hand-computed figures and writes the reliability plot; the dashboard links and serves the same page."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from judgeflow import workload
from judgeflow.cli import main
from projections.calibration import RoutedClaim, replay
from schemas import RoutingDecision
from schemas.rubric import RoutingPolicy
from tests.scaffold import Pipeline
from tests.support import REPO, consume_until

pytestmark = pytest.mark.integration

# (claim, verdict, score, confidence, human verdict or None): the first judge's checks under the rubric.
FIRST: list[tuple[str, str, float | None, float, str | None]] = [
    *[(f"low-{i}", "fail", 0.1, 0.5, h) for i, h in enumerate(["fail", "fail", "fail", "pass"])],  # to humans
    ("border-0", "pass", 0.6, 0.9, "pass"), ("border-1", "pass", 0.6, 0.9, "pass"),  # to the second judge
    ("unclear-0", "unclear", None, 0.2, "pass"), ("unclear-1", "unclear", None, 0.2, "unclear"),  # to humans
    ("sure-0", "pass", 0.9, 0.9, "fail"), ("sure-1", "pass", 0.9, 0.9, None), ("sure-2", "pass", 0.9, 0.9, None),
]  # fmt: skip
SECOND = [("border-0", "fail", 0.3, 0.8), ("border-1", "pass", 0.9, 0.8)]  # a tie (-> humans), a pass (-> done)
ROUTING = {"pass_score": 0.8, "floor": 0.6, "border": 0.45, "spot_sample_rate": 0.0}


def _check(claim: str, judge: str, verdict: str, score: float | None, conf: float, rubric: str | None) -> bytes:
    doc = workload.claim_check(random.Random(claim), claim, judge, verdict=verdict, score=0.5, confidence=conf)
    return json.dumps({**doc, "score": score, "rubric_version_id": rubric}).encode()


def _review(claim: str, verdict: str) -> bytes:
    """A seed-003 review; the one of `sure-0` (routed done) comes from the audit sample (a 1.1 review)."""
    audit = {"schema_version": "1.1", "source": "audit"} if claim == "sure-0" else {"schema_version": "1.0"}
    return json.dumps({"review_id": str(uuid.uuid5(uuid.NAMESPACE_URL, claim)), "claim_id": claim,
                       "reviewer": "r1", "final_verdict": verdict, "created_at": workload.iso(workload.EPOCH),
                       **audit}).encode()  # fmt: skip


def _table(out: str, title: str) -> dict[str, list[str]]:
    """Rows of a rich table printed under `title`, keyed by their first cell."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows: dict[str, list[str]] = {}
    for line in lines[start + 1 :]:
        if not line.strip() or (line[0] not in "│┃┏┡└╇━┗┠├" and rows):
            break
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        if cells and cells[0] and not line.startswith("┃"):
            rows[cells[0]] = cells[1:]
    return rows


def test_calibrate_through_kafka_and_postgres(pipeline: Pipeline, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    prefix, names, database_url, schema = pipeline.prefix, pipeline.names, pipeline.database_url, pipeline.schema
    rid, other = workload.stable_id("rubric", prefix, "cal"), workload.stable_id("rubric", prefix, "other")
    records: list[tuple[str, bytes | None, bytes]] = [
        (names.rubrics, rid.encode(), json.dumps(workload.rubric(rid, routing=ROUTING)).encode()),
        (names.rubrics, other.encode(), json.dumps(workload.rubric(other)).encode()),
    ]
    for claim, verdict, score, conf, _ in FIRST:
        records.append((names.checks, claim.encode(), _check(claim, "judge-1", verdict, score, conf, rid)))
    for claim, verdict, score, conf in SECOND:
        records.append((names.checks, claim.encode(), _check(claim, "judge-2", verdict, score, conf, rid)))
    records += [(names.checks, b"elsewhere", _check("elsewhere", "judge-1", "fail", 0.1, 0.5, other)),
                (names.checks, b"norubric", _check("norubric", "judge-1", "fail", 0.1, 0.3, None))]  # fmt: skip
    reviews = [(c, h) for c, _, _, _, h in FIRST if h] + [("elsewhere", "pass"), ("norubric", "pass")]
    records += [(names.reviews, c.encode(), _review(c, h)) for c, h in reviews]
    pipeline.send(records)

    with pipeline.worker() as worker:

        def settled(rs: list[Any]) -> bool:  # a first decision per claim, and the two aggregated ones
            decisions = (RoutingDecision.model_validate_json(r.value) for r in rs)
            return len({(d.claim_id, len(d.judge_ids)) for d in decisions if d.claim_id is not None}) >= 15

        consume_until(pipeline.bootstrap, [names.done, names.second_judge, names.human_review], settled, timeout=240,
                      worker=worker)  # fmt: skip
    pipeline.project_to_end()

    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    env = {"DATABASE_URL": database_url, "COLUMNS": "200"}
    done = runner.invoke(main, ["calibrate", "--rubric", rid, "--schema", schema, "--max-human-share", "0.2",
                                "--max-overturn", "0.3", "--max-second-share", "0.5"], env=env)  # fmt: skip
    assert done.exit_code == 0, done.output
    out = done.output
    # Judge 1: bins 0.2 (2 verdicts, 1 agrees), 0.5 (4, 3 agree), 0.9 (3, 2 agree): ECE = (0.6 + 1.0 + 0.7) / 9.
    judges = _table(out, "Judges vs human review")
    assert judges["judge-1"] == ["9", "0.667", f"{(0.4 + 2.0 + 2.7) / 9:.3f}", f"{2.3 / 9:.3f}"]
    assert judges["judge-2"] == ["2", "0.500", "0.800", "0.300"]  # one tie-making fail, one pass; humans said pass
    assert "elsewhere" not in out and "norubric" not in out
    bins = _table(out, "Reliability of judge-1")
    assert bins["[0.50, 0.60)"] == ["4", "0.500", "0.750", "+0.250"]
    assert bins["[0.90, 1.00]"] == ["3", "0.900", "0.667", "-0.233"] and bins["[0.00, 0.10)"][0] == "0"
    reasons = {(k, v[0]): v[1:] for k, v in _table(out, "Overturn rate by route reason").items()}
    assert reasons[("fail_low_confidence", "human_review")] == ["4", "4", "1", "0.250", "0"]
    assert reasons[("unclear", "human_review")] == ["2", "0", "0", "n/a", "1"]
    assert reasons[("tie_unclear", "human_review")] == ["1", "0", "0", "n/a", "1"]
    assert reasons[("aggregated_pass", "done")] == ["1", "1", "0", "0.000", "0"]
    assert reasons[("pass_confident", "done")] == ["1", "1", "1", "1.000", "0"]

    # Thresholds: 11 routed checks; today 6 go to humans (4 low-confidence fails, 2 unclear), 2 to the second
    # judge, 3 to done (sure-0 audited and overturned). One audit review of three claims routed done is no
    # estimate: the overturn rate of the done route is unknown, and no thresholds are suggested.
    policies = _table(out, "Suggested routing thresholds")
    assert policies["current"] == ["0.8", "0.6", "0.45", "0.545", "0.182", "3", "unknown", "",
                                   "1/3 audited, 0/0 reviewed"]  # fmt: skip
    assert "suggested" not in policies
    claims = [RoutedClaim(c, v, s, conf, human=h, final_route="done" if c.startswith("sure") else None,
                          audit=h if c == "sure-0" else None) for c, v, s, conf, h in FIRST]  # fmt: skip
    estimate = replay(claims, RoutingPolicy(**ROUTING)).estimate
    assert (estimate.from_done, estimate.audited, estimate.audit_overturned) == (3, 1, 1)
    flat = " ".join(out.split())
    assert "no suggestion:" in flat and "1 audit review(s) of the 3 claims the pipeline routed done" in flat
    assert "calibrate changes no rubric" in flat
    page = (tmp_path / f"calibration-{rid}.html").read_text()
    figure = json.loads(page.split("const FIG = ", 1)[1].split(";\n", 1)[0])
    lines = {t["name"].split(" (")[0]: t for t in figure["data"]}
    assert lines["perfectly calibrated"]["x"] == [0, 1]
    assert lines["judge-1"]["x"] == pytest.approx([0.2, 0.5, 0.9])
    assert lines["judge-1"]["y"] == pytest.approx([0.5, 0.75, 2 / 3])
    assert "Plotly.newPlot" in page and "changes no rubric" in page

    nothing = runner.invoke(main, ["calibrate", "--rubric", workload.stable_id("rubric", "never"), "--schema",
                                   schema], env=env)  # fmt: skip
    assert nothing.exit_code == 1 and "no human reviews of claims checked under rubric" in nothing.output
    assert f"{rid} (9 reviewed)" in " ".join(nothing.output.split())
    no_models = runner.invoke(main, ["calibrate", "--rubric", rid, "--schema", f"{schema}_absent"], env=env)
    assert no_models.exit_code == 1 and f"judgeflow migrate --schema {schema}_absent" in no_models.output
    none = runner.invoke(main, ["calibrate", "--rubric", "none", "--schema", schema, "--html", "none.html"], env=env)
    assert none.exit_code == 0 and _table(none.output, "Judges vs human review")["judge-1"][:2] == ["1", "0.000"]

    pages = asyncio.run(_dashboard_pages(database_url, schema, rid))
    assert pages["/"][0] == 200 and 'href="/calibration"' in pages["/"][1]
    assert pages["/calibration"][0] == 200
    for r in (rid, other, "none"):
        assert f'href="/calibration?rubric={r}"' in pages["/calibration"][1]
    status, text = pages[f"/calibration?rubric={rid}"]
    assert status == 200 and f"{2.3 / 9:.3f}" in text and "/static/plotly.min.js" in text
    assert pages["/calibration?rubric=not-a-uuid"][0] == 404


async def _dashboard_pages(database_url: str, schema: str, rid: str) -> dict[str, tuple[int, str]]:
    """The dashboard app over a real socket (aiohttp's test server), reading the same schema."""
    from aiohttp.test_utils import TestClient, TestServer

    from judgeflow.dashboard import make_app

    out = {}
    async with TestClient(TestServer(make_app(database_url, schema))) as client:
        for path in ("/", "/calibration", f"/calibration?rubric={rid}", "/calibration?rubric=not-a-uuid"):
            response = await client.get(path)
            out[path] = (response.status, await response.text())
    return out


def test_calibrate_on_the_demo_workload(kafka_bootstrap: str, database_url: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The demo's claim checks carry no rubric, so its reviews calibrate under `none`. Replaying the current
    (default) policy reproduces the routes the worker actually took, and the counts are those of the read models."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "DATABASE_URL": database_url}
    demo = subprocess.run([sys.executable, "-m", "judgeflow.cli", "demo", "--runs", "2", "--claims", "300"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=400)  # fmt: skip
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    [schema] = [line.split()[1] for line in demo.stdout.splitlines() if line.startswith("schema ")]
    with psycopg.connect(database_url, options=f"-c search_path={schema}") as conn:
        row = conn.execute(
            "SELECT count(DISTINCT r.claim_id), count(DISTINCT k.claim_id), "
            "count(DISTINCT k.claim_id) FILTER (WHERE k.route = 'human_review'), "
            "count(DISTINCT k.claim_id) FILTER (WHERE k.route = 'second_judge') "
            "FROM checks k JOIN claim_checks c ON c.claim_id = k.claim_id AND c.judge_id = k.judge_id "
            "LEFT JOIN latest_reviews r ON r.claim_id = k.claim_id WHERE k.route IS NOT NULL").fetchone()  # fmt: skip
    assert row is not None
    reviewed, routed, to_humans, to_second = row
    assert reviewed > 0
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, ["calibrate", "--rubric", "none", "--schema", schema],
                              env={"DATABASE_URL": database_url, "COLUMNS": "200"})  # fmt: skip
    assert done.exit_code == 0, done.output
    assert f"checks without a rubric: {reviewed} reviewed claims" in done.output
    current = _table(done.output, "Suggested routing thresholds")["current"]
    assert current[:5] == ["0.8", "0.6", "0.45", f"{to_humans / routed:.3f}", f"{to_second / routed:.3f}"]
    assert (tmp_path / "calibration-none.html").exists()
