"""A rubric's `claim_score_range`: refused when inverted or when its routing thresholds fall outside it, and
enforced on claim scores (CLAIM_SCORE_OUT_OF_RANGE) wherever a check is validated with its rubric."""

from __future__ import annotations

import base64
import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from judgeflow import workload
from schemas import ContractError, InvalidEvent, RoutingDecision, parse_claim_check, parse_rubric
from schemas.parse import reference_validate_claim_check, validate_claim_check
from streams.claims import ClaimStage
from streams.envelope import SourceRef
from streams.stage import Inbound, State

NOW = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)
NARROW = {"claim_score_range": {"min": 0.2, "max": 0.9}}
RUBRIC = parse_rubric(workload.rubric(workload.stable_id("rubric", "narrow"), **NARROW))


def codes(fn: Any, *args: Any, **kwargs: Any) -> list[str]:
    with pytest.raises(ContractError) as info:
        fn(*args, **kwargs)
    return info.value.codes


def test_default_range_is_the_contracts_and_a_narrow_one_is_accepted() -> None:
    default = parse_rubric(workload.rubric())
    assert (default.claim_score_range.min, default.claim_score_range.max) == (0.0, 1.0)
    assert (RUBRIC.claim_score_range.min, RUBRIC.claim_score_range.max) == (0.2, 0.9)


def test_inverted_range_is_refused() -> None:
    doc = workload.rubric(claim_score_range={"min": 0.9, "max": 0.2})
    assert codes(parse_rubric, doc) == ["CLAIM_SCORE_RANGE_INVERTED"]


def test_range_outside_the_unit_interval_is_refused() -> None:
    assert codes(parse_rubric, workload.rubric(claim_score_range={"min": -0.1, "max": 1.0})) == ["OUT_OF_RANGE"]
    assert codes(parse_rubric, workload.rubric(claim_score_range={"min": 0.0, "max": 1.5})) == ["OUT_OF_RANGE"]


@pytest.mark.parametrize(
    ("score_range", "routing"),
    [
        ({"min": 0.5, "max": 1.0}, {}),  # the default border 0.45 is below the range
        ({"min": 0.0, "max": 0.7}, {}),  # the default pass_score 0.80 is above it
        ({"min": 0.0, "max": 0.7}, {"pass_score": 0.7, "floor": 0.75, "border": 0.4}),
    ],
)
def test_thresholds_outside_the_range_are_refused(score_range: dict[str, float], routing: dict[str, float]) -> None:
    doc = workload.rubric(claim_score_range=score_range, routing=routing)
    assert codes(parse_rubric, doc) == ["POLICY_THRESHOLD_OUTSIDE_RANGE"]


def test_thresholds_on_the_bounds_are_accepted() -> None:
    rubric = parse_rubric(workload.rubric(claim_score_range={"min": 0.45, "max": 0.8}))
    assert rubric.routing.border == 0.45 and rubric.routing.pass_score == 0.8


def check(score: float | None, verdict: str = "pass", rubric_id: str | None = RUBRIC.rubric_version_id) -> bytes:
    doc = workload.claim_check(random.Random(1), "claim-r", judge_id="judge-a", verdict=verdict)
    return json.dumps({**doc, "score": score, "rubric_version_id": rubric_id}).encode()


@pytest.mark.parametrize("validate", [validate_claim_check, reference_validate_claim_check])
def test_claim_score_outside_its_rubrics_range_is_refused_on_both_paths(validate: Any) -> None:
    for score in (0.1, 0.95):
        with pytest.raises(ContractError) as info:
            validate(check(score), rubric=RUBRIC)
        assert info.value.codes == ["CLAIM_SCORE_OUT_OF_RANGE"] and info.value.errors[0].loc == ("score",)
    for score in (0.2, 0.5, 0.9):
        assert validate(check(score), rubric=RUBRIC).event.score == score
    assert validate(check(None, "unclear"), rubric=RUBRIC).event.score is None
    assert validate(check(0.95)).event.score == 0.95  # without its rubric only [0, 1] applies


class Table:
    def __init__(self) -> None:
        self.data: dict[str, State] = {}
        self.offset = 0

    def feed(self, stage: ClaimStage, role: str, value: bytes, offset: int | None = None) -> list[Any]:
        self.offset += 1
        src = SourceRef(role, 0, offset or self.offset, b"claim-r")
        step = stage.handle(Inbound(role, b"claim-r", value, src), self.data.get("claim-r"))
        if step.changed:
            if step.state is None:
                self.data.pop("claim-r", None)
            else:
                self.data["claim-r"] = json.loads(json.dumps(step.state))
        return step.records


def stage(known: list[bool]) -> ClaimStage:
    return ClaimStage(lambda rid: RUBRIC if known[0] and rid == RUBRIC.rubric_version_id else None,
                      clock=lambda: NOW, retention=timedelta(days=7), max_payload_bytes=1_000_000)  # fmt: skip


def refused(records: list[Any]) -> None:
    assert [r.role for r in records] == ["invalid", "human_review"]
    dead = InvalidEvent.model_validate_json(records[0].value)
    assert dead.error_codes == ["CLAIM_SCORE_OUT_OF_RANGE"] and dead.contract == "claim_check"
    decision = RoutingDecision.model_validate_json(records[1].value)
    assert (decision.verdict, decision.score, decision.confidence) == ("unclear", None, 0.0)


def test_stage_refuses_an_out_of_range_score_when_its_rubric_is_known() -> None:
    table = Table()
    sent = table.feed(stage([True]), "checks", check(0.95))
    refused(sent)
    original = base64.b64decode(InvalidEvent.model_validate_json(sent[0].value).original_b64)
    assert original == check(0.95)  # the bytes received
    ok = table.feed(stage([True]), "checks", check(0.85))
    assert ok[0].role == "checks_valid" and parse_claim_check(ok[0].value).score == 0.85


def test_a_held_check_is_validated_with_its_rubric_when_it_arrives_and_resent_the_same() -> None:
    known, table = [False], Table()
    s = stage(known)
    assert table.feed(s, "checks", check(0.95)) == []  # held: nothing published as valid yet
    known[0] = True
    [resume] = s.sweep([("claim-r", table.data["claim-r"])])
    released = table.feed(s, "claims_control", resume.value)
    refused(released)
    dead = InvalidEvent.model_validate_json(released[0].value)
    assert (dead.source_topic, dead.source_partition, dead.source_offset) == ("checks", 0, 1)
    again = table.feed(s, "claims_control", resume.value)  # a redelivered resume
    assert [r.value for r in again] == [r.value for r in released]
    redelivered = table.feed(s, "checks", check(0.95), offset=1)  # the check itself again: same refusal
    assert [r.value for r in redelivered] == [r.value for r in released]
