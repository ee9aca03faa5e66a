"""Stale-work alerts end to end on the read side: records on the alerts topic, a real
`judgeflow projector`, the `stale_alerts` table and `open_stale_alerts` view in Postgres,
redelivery, and `judgeflow report`."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import psycopg
import pytest

from judgeflow.dashboard import _alerts, summary
from schemas import ReconciliationRevision, RoutingDecision, StaleWorkAlert
from tests.scaffold import Pipeline
from tests.support import REPO

pytestmark = pytest.mark.integration
ALERT_NS = uuid.UUID("8f5c2a3e-1d4b-5e6f-a7b8-c9d0e1f2a3b4")


def alert(kind: str, subject: str, subject_id: str, reason: str, **extra: object) -> StaleWorkAlert:
    return StaleWorkAlert.model_validate({
        "event_id": str(uuid.uuid5(ALERT_NS, f"{kind}/{subject}/{subject_id}")), "kind": kind, "subject": subject,
        "subject_id": subject_id, "held_events": 0, "first_seen_at": "2026-03-31T12:00:00Z", "reason": reason,
        "raised_at": "2026-03-31T12:10:00Z", **extra,
    })  # fmt: skip


def final_revision(run_id: str) -> ReconciliationRevision:
    return ReconciliationRevision.model_validate({
        "event_id": str(uuid.uuid5(ALERT_NS, f"revision/{run_id}")), "evaluation_run_id": run_id,
        "submission_id": str(uuid.uuid5(ALERT_NS, f"submission/{run_id}")),
        "rubric_version_id": str(uuid.uuid5(ALERT_NS, "rubric")), "revision": 1, "status": "final",
        "final_reason": "timeout", "judge_run_ids": [], "expected_judge_models": ["gpt-4o"],
        "result": {"final_overall_score": 70, "final_adjusted_score": 70, "judge_count": 1,
                   "successful_judge_count": 1, "has_contradictions": False, "contradiction_details": [],
                   "lane_scores_by_judge": {}, "reconciled_lane_scores": {}, "method": "mean"},
        "emitted_at": "2026-03-31T12:20:00Z",
    })  # fmt: skip


def decision(claim_id: str, route: str) -> RoutingDecision:
    return RoutingDecision.model_validate({
        "event_id": str(uuid.uuid5(ALERT_NS, f"decision/{claim_id}/{route}")), "subject": "claim",
        "claim_id": claim_id, "route": route, "reason": "test", "judge_ids": ["j1"], "input_ids": [claim_id],
        "decided_at": "2026-03-31T12:15:00Z",
    })  # fmt: skip


def report(database_url: str, schema: str) -> str:
    env = {**os.environ, "DATABASE_URL": database_url, "COLUMNS": "300"}
    done = subprocess.run([sys.executable, "-m", "judgeflow.cli", "report", "--schema", schema],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_alerts_are_projected_once_and_listed_while_their_work_is_open(pipeline: Pipeline) -> None:
    prefix, names = pipeline.prefix, pipeline.names
    run_open, run_final, run_late = (str(uuid.uuid5(ALERT_NS, f"{prefix}run/{i}")) for i in range(3))
    overdue = {
        r: alert("run_overdue", "evaluation_run", r, f"run {r[:8]} not final 60s after its deadline",
                 waiting_for="judges", deadline="2026-03-31T12:05:00Z")
        for r in (run_open, run_final, run_late)
    }  # fmt: skip
    held = {
        c: alert("held_too_long", "claim", c, f"{c}: 2 checks held waiting for the rubric", waiting_for="rubric",
                 rubric_version_id=str(uuid.uuid5(ALERT_NS, "rubric")), held_events=2)
        for c in (f"{prefix}c-open", f"{prefix}c-done", f"{prefix}c-second")
    }  # fmt: skip

    def on_alerts(a: StaleWorkAlert) -> tuple[str, bytes, bytes]:
        return names.alerts, a.subject_id.encode(), a.model_dump_json().encode()

    first = [on_alerts(a) for a in [*overdue.values(), *held.values()]]
    first.append(on_alerts(overdue[run_open]))  # a redelivery right behind the original
    first.append((names.reconciled, run_final.encode(), final_revision(run_final).model_dump_json().encode()))
    first += [(getattr(names, route), c.encode(), decision(c, route).model_dump_json().encode())
              for c, route in ((f"{prefix}c-done", "done"), (f"{prefix}c-second", "second_judge"))]  # fmt: skip
    pipeline.send(first)

    conn = pipeline.connect()
    with pipeline.projector() as projector:
        ends = pipeline.ends()
        assert sum(o for (t, _), o in ends.items() if t == names.alerts) == 7
        pipeline.wait_projected(projector, 90, "alerts projected", ends=ends)

        rows = conn.execute("SELECT event_id::text, kind, subject, subject_id, waiting_for, held_events, deadline, "
                            "reason, source_topic FROM stale_alerts").fetchall()  # fmt: skip
        assert len(rows) == 6  # seven records, one of them a redelivery
        a = overdue[run_open]
        assert (a.event_id, "run_overdue", "evaluation_run", run_open, "judges", 0) in [r[:6] for r in rows]
        assert {r[8] for r in rows} == {names.alerts}
        assert {r[3] for r in rows if r[2] == "claim" and r[5] == 2} == set(held)

        open_now = dict(conn.execute("SELECT subject_id, kind FROM open_stale_alerts").fetchall())
        # The final run and the claim routed to `done` are finished; `second_judge` still waits.
        assert open_now == {run_open: "run_overdue", run_late: "run_overdue", f"{prefix}c-open": "held_too_long",
                            f"{prefix}c-second": "held_too_long"}  # fmt: skip

        printed = report(pipeline.database_url, pipeline.schema)
        assert "Open stale alerts" in printed and "no stale work" not in printed
        assert run_open in printed and overdue[run_open].reason in printed and f"{prefix}c-second" in printed
        alerts_table = printed[printed.index("Open stale alerts") : printed.index("Evaluation runs:")]  # not the runs
        assert run_final not in alerts_table and f"{prefix}c-done" not in alerts_table

        # The dashboard's card shows the same open alerts, escaped.
        page = _alerts(summary(conn))
        assert run_open in page and f"{prefix}c-done" not in page and "no stale work" not in page

        # Later: every alert is delivered again, and the late run completes. Still one row per
        # alert; the late run leaves the view (its alert stays: alerts are facts, not state).
        pipeline.send([*first[:6], (names.reconciled, run_late.encode(),
                                    final_revision(run_late).model_dump_json().encode())])  # fmt: skip
        pipeline.wait_projected(projector, 90, "redelivery projected")
        assert conn.execute("SELECT count(*) FROM stale_alerts").fetchone() == (6,)
        open_later = {r[0] for r in conn.execute("SELECT subject_id FROM open_stale_alerts").fetchall()}
        assert open_later == {run_open, f"{prefix}c-open", f"{prefix}c-second"}

    with conn, pytest.raises(psycopg.errors.RestrictViolation):
        conn.execute("UPDATE stale_alerts SET reason = 'edited'")


def test_report_and_dashboard_say_no_stale_work_when_there_is_none(database_url: str, schema: str) -> None:
    printed = report(database_url, schema)
    assert "Open stale alerts: no stale work" in printed
    with psycopg.connect(database_url, autocommit=True, options=f"-c search_path={schema}") as conn:
        assert "no stale work" in _alerts(summary(conn))
