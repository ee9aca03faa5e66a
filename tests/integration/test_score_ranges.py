"""A rubric's claim_score_range on the real broker and database: rubrics with an inverted range or thresholds
outside it are dead-lettered with their codes and never used; a claim score outside its rubric's range is
dead-lettered (CLAIM_SCORE_OUT_OF_RANGE) and queued for humans, also when the check waited for its rubric, and
no refused score reaches `claim_checks`."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest

from judgeflow import workload
from schemas import InvalidEvent, RoutingDecision, StaleWorkAlert
from tests.scaffold import Pipeline
from tests.support import consume_until

pytestmark = pytest.mark.integration
NARROW = {"min": 0.2, "max": 0.9}


def rubric(rubric_id: str, **overrides: Any) -> tuple[str, bytes, bytes]:
    return ("rubrics", rubric_id.encode(), json.dumps(workload.rubric(rubric_id, **overrides)).encode())


def check(claim_id: str, score: float, rubric_id: str) -> tuple[str, bytes, bytes]:
    doc = workload.claim_check(random.Random(3), claim_id, verdict="pass")
    return ("checks", claim_id.encode(), json.dumps({**doc, "score": score, "rubric_version_id": rubric_id}).encode())


def test_score_ranges_through_kafka_and_postgres(pipeline: Pipeline) -> None:
    prefix, names = pipeline.prefix, pipeline.names

    def topic(records: list[tuple[str, bytes, bytes]]) -> list[tuple[str, bytes, bytes]]:
        return [(getattr(names, role), key, value) for role, key, value in records]

    narrow, late = workload.stable_id("rubric", prefix, "narrow"), workload.stable_id("rubric", prefix, "late")
    inverted, outside = workload.stable_id("rubric", prefix, "inv"), workload.stable_id("rubric", prefix, "out")
    pipeline.send(topic([
        rubric(narrow, claim_score_range=NARROW),
        rubric(inverted, claim_score_range={"min": 0.9, "max": 0.2}),
        rubric(outside, claim_score_range={"min": 0.5, "max": 1.0}),  # default border 0.45 outside
        check("claim-in", 0.5, narrow),
        check("claim-out", 0.95, narrow),
    ]))  # fmt: skip
    env = {"JUDGEFLOW_TIMER_INTERVAL": "0.5", "JUDGEFLOW_STALE_AFTER": "1"}
    with pipeline.worker(**env) as worker:
        pipeline.send(topic([check("claim-held", 0.1, late)]))

        def held(rs: list[Any]) -> bool:  # the held-too-long alert shows the check is held for its rubric
            return any(StaleWorkAlert.model_validate_json(r.value).subject_id == "claim-held" for r in rs)

        consume_until(pipeline.bootstrap, [names.alerts], held, timeout=90, worker=worker)
        pipeline.send(topic([rubric(late, claim_score_range=NARROW)]))

        def settled(rs: list[Any]) -> bool:
            # Every record the assertions below read: records of one step go to different topics, and
            # Kafka orders none of them across topics.
            refused = {InvalidEvent.model_validate_json(r.value).source_key_b64 for r in rs if r.topic == names.invalid}
            queued = {r.key for r in rs if r.topic == names.human_review}
            return (len(refused) >= 4 and sum(r.topic == names.checks_valid for r in rs) >= 1
                    and {b"claim-out", b"claim-held"} <= queued)  # fmt: skip

        got = consume_until(pipeline.bootstrap, [names.invalid, names.checks_valid, names.human_review], settled,
                            timeout=90, worker=worker)  # fmt: skip
        assert worker.alive(), worker.log()

    invalid = [InvalidEvent.model_validate_json(r.value) for r in got if r.topic == names.invalid]
    codes = {(i.contract, base64.b64decode(i.source_key_b64 or "").decode()): i.error_codes for i in invalid}
    assert codes == {
        ("rubric", inverted): ["CLAIM_SCORE_RANGE_INVERTED"],
        ("rubric", outside): ["POLICY_THRESHOLD_OUTSIDE_RANGE"],
        ("claim_check", "claim-out"): ["CLAIM_SCORE_OUT_OF_RANGE"],
        ("claim_check", "claim-held"): ["CLAIM_SCORE_OUT_OF_RANGE"],
    }
    assert [r.key for r in got if r.topic == names.checks_valid] == [b"claim-in"]
    humans = {d.claim_id: d for d in (RoutingDecision.model_validate_json(r.value) for r in got
                                      if r.topic == names.human_review)}  # fmt: skip
    assert {c for c, d in humans.items() if d.reason == "invalid"} == {"claim-out", "claim-held"}

    pipeline.project_to_end()
    with pipeline.connect() as conn:
        stored = {r[0] for r in conn.execute("SELECT claim_id FROM claim_checks")}
        rubrics = {str(r[0]) for r in conn.execute("SELECT id FROM rubrics")}
        dead = {tuple(r[0]) for r in conn.execute("SELECT error_codes FROM invalid_events")}
        routes = dict(conn.execute("SELECT claim_id, route FROM checks").fetchall())
    assert stored == {"claim-in"}  # no refused score is stored as a verdict
    assert {narrow, late} <= rubrics and not {inverted, outside} & rubrics
    assert {("CLAIM_SCORE_RANGE_INVERTED",), ("POLICY_THRESHOLD_OUTSIDE_RANGE",), ("CLAIM_SCORE_OUT_OF_RANGE",)} <= dead
    assert routes["claim-out"] == routes["claim-held"] == "human_review"
