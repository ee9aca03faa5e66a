"""Paths no test drove before: seed 003's third query on routed claims, a stale run through the worker and the
projector, the projector's metrics, and a rebuild while the projector is live."""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from judgeflow import workload
from judgeflow.services.ports import free_port
from projections.migrate import connect
from projections.projector import PROJECTED_ROLES
from projections.rebuild import rebuild
from projections.rows import Record, Rows, project
from projections.store import write_batch
from streams.claims import ClaimStage
from streams.envelope import SourceRef
from streams.stage import Inbound, State
from streams.topics import TopicNames
from tests.scaffold import Pipeline, claims
from tests.support import http_get, metric, wait_for

pytestmark = pytest.mark.integration
NAMES = TopicNames()
ROLES = {v: k for k, v in NAMES.all().items()}
DAY1 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)
SEED_003_Q3 = """SELECT date_trunc('day', created_at) AS day,
       count(*) FILTER (WHERE route = 'second_judge') AS to_second_judge,
       count(*) FILTER (WHERE route = 'human_review') AS to_human
FROM checks GROUP BY 1 ORDER BY 1"""


def test_seed_003_third_query_counts_second_judge_and_human_load_per_day(database_url: str, schema: str) -> None:
    """Claims routed by the real stage on two days, one second judge answering a day later: the load is counted
    on the day of each claim's first check (`checked_at`), by the seed's query and by the view alike."""
    now = [DAY1]
    stage = ClaimStage(lambda _rid: None, clock=lambda: now[0], retention=timedelta(days=7), max_payload_bytes=10**6)
    plan = [  # day, claim, judge, verdict, score, confidence -> first route
        (DAY1, "q1", "judge-a", "pass", 0.95, 0.9),  # done
        (DAY1, "q2", "judge-a", "pass", 0.95, 0.9),  # done
        (DAY1, "q3", "judge-a", "pass", 0.60, 0.9),  # second_judge (borderline)
        (DAY1, "q4", "judge-a", "unclear", None, 0.9),  # human_review
        (DAY2, "q5", "judge-a", "pass", 0.60, 0.9),  # second_judge
        (DAY2, "q6", "judge-a", "pass", 0.70, 0.9),  # second_judge
        (DAY2, "q7", "judge-a", "unclear", None, 0.9),  # human_review
        (DAY2 + timedelta(days=1), "q5", "judge-b", "fail", 0.1, 0.9),  # q5's second judge: a tie, to humans
    ]
    states: dict[str, State] = {}
    records: list[Record] = []
    offsets: dict[str, int] = {}

    def record(role: str, key: bytes | None, value: bytes, at: datetime) -> Record:
        topic = getattr(NAMES, role)
        offsets[topic] = offsets.get(topic, -1) + 1
        return Record(topic, 0, offsets[topic], key, value, (), int(at.timestamp() * 1000))

    for at, claim, judge, verdict, score, conf in plan:
        doc = {**workload.claim_check(random.Random(0), claim, judge_id=judge), "verdict": verdict, "score": score,
               "confidence": conf, "checked_at": workload.iso(at)}  # fmt: skip
        raw = json.dumps(doc).encode()
        now[0] = at
        src = record("checks", claim.encode(), raw, at)
        step = stage.handle(Inbound("checks", claim.encode(), raw, SourceRef(src.topic, 0, src.offset, src.key)),
                            states.get(claim))  # fmt: skip
        if step.changed and step.state is not None:
            states[claim] = step.state
        records += [src, *(record(r.role, r.key, r.value, at) for r in step.records)]
    rows = Rows()
    for r in records:
        project(r, NAMES, ROLES, rows)
    conn = connect(database_url, schema, autocommit=True)
    write_batch(conn, f"test-{uuid.uuid4()}", rows, {(r.topic, r.partition): (None, r.offset + 1) for r in records})
    with conn:
        seed = [(day.date(), int(s), int(h)) for day, s, h in conn.execute(SEED_003_Q3)]
        view = [(day.date(), int(s), int(h), int(d), int(a))
                for day, s, h, d, a in conn.execute("SELECT * FROM routing_load_by_day")]  # fmt: skip
        final = dict(conn.execute("SELECT claim_id, final_route FROM checks WHERE claim_id = 'q5'").fetchall())
    assert seed == [(DAY1.date(), 1, 1), (DAY2.date(), 2, 1)]
    assert view == [(DAY1.date(), 1, 1, 2, 0), (DAY2.date(), 2, 1, 0, 1)]
    assert final == {"q5": "human_review"}


@pytest.mark.pipeline(migrate=False)  # the projector makes its tables
def test_stale_run_metrics_and_a_rebuild_while_the_projector_is_live(pipeline: Pipeline) -> None:
    prefix, names, schema, count = pipeline.prefix, pipeline.names, pipeline.schema, pipeline.count
    # A run whose rubric never comes: it cannot finish, and is overdue once its deadline and the grace pass.
    stale_run, missing_rubric = workload.stable_id("run", prefix), workload.stable_id("rubric", prefix, "never")
    run = workload.evaluation_run(stale_run, rubric_id=missing_rubric, timeout_s=1)
    run["started_at"] = workload.iso(datetime.now(UTC))
    pipeline.send([(names.runs, stale_run.encode(), json.dumps(run).encode()), *claims(prefix, names, 100, seed=3)])
    port = free_port()
    env = {"JUDGEFLOW_TIMER_INTERVAL": "0.5", "JUDGEFLOW_STALE_AFTER": "1"}
    with pipeline.worker(**env) as worker, pipeline.projector(JUDGEFLOW_METRICS_PORT=str(port)) as projector:
        open_run = "SELECT count(*) FROM open_stale_alerts WHERE kind = 'run_overdue' AND subject_id = '%s'"
        wait_for(lambda: count(open_run % stale_run) == 1, 120, "run_overdue projected", projector)
        status = "SELECT count(*) FROM evaluation_run_status WHERE status = 'running'"
        assert count(status) == 1
        wait_for(lambda: count("SELECT count(*) FROM claim_checks") == 100, 120, "claims projected", projector)
        pipeline.wait_projected(projector, 120, "projector at the end")

        # The projector's metrics: every committed row counted, a lag gauge per projected partition, all 0 now.
        def caught_up_metrics() -> bool:
            code, text = http_get(port, "/metrics")
            lags = metric(str(text), "judgeflow_projection_lag")
            return code == 200 and len(lags) == 4 * len(PROJECTED_ROLES) and not any(lags)

        wait_for(caught_up_metrics, 60, "projection lag gauges at 0", projector)
        text = str(http_get(port, "/metrics")[1])
        written = sum(count(f"SELECT count(*) FROM {t}")
                      for t in ("raw_events", "claim_checks", "routing_decisions", "stale_alerts"))  # fmt: skip
        [rows_total] = metric(text, "judgeflow_projected_rows_total")
        [batches] = metric(text, "judgeflow_projected_batches_total")
        assert rows_total >= written > 300 and batches >= 1

        # A rebuild while the projector is live: swapped in, and the live projector goes on into it.
        report = rebuild(pipeline.bootstrap, pipeline.database_url, names, schema=schema)
        assert report.schema == schema and report.raw_events == report.expected_raw_events > 100
        pipeline.send(claims(prefix + "more", names, 50, seed=4))
        pipeline.wait_projected(projector, 120, "live projector after the swap")
        wait_for(lambda: count("SELECT count(*) FROM claim_checks") == 150, 60, "claims after the swap", projector)
        assert worker.alive() and projector.alive(), projector.log()[-3000:]
    with pipeline.connect() as conn:
        raw = conn.execute("SELECT count(*), count(DISTINCT (topic, partition, \"offset\")) FROM raw_events "
                           "WHERE topic = %s", [names.checks]).fetchone()  # fmt: skip
        decisions = conn.execute("SELECT count(*), count(DISTINCT claim_id) FROM routing_decisions "
                                 "WHERE subject = 'claim'").fetchone()  # fmt: skip
        alerts = conn.execute("SELECT kind, subject_id FROM stale_alerts").fetchall()
    assert raw == (150, 150) and decisions == (150, 150)
    assert ("run_overdue", stale_run) in alerts
