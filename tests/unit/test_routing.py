"""`route` against seed 003's literal function, every branch, and the spot sample."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judgeflow import workload
from schemas import RoutingPolicy, parse_claim_check
from streams.routing import route, route_invalid, spot_sampled

PASS_SCORE, FLOOR, BORDER = 0.80, 0.60, 0.45


def seed_route(row: dict[str, Any]) -> str:
    """Seed 003, verbatim."""
    if row["verdict"] == "pass" and row["score"] >= PASS_SCORE and row["confidence"] >= FLOOR:
        return "done"
    if row["verdict"] == "fail" and row["confidence"] < FLOOR:
        return "human_review"
    if BORDER <= row["score"] < PASS_SCORE:
        return "second_judge"
    return "human_review"


def check(verdict: str, score: float | None, confidence: float, claim_id: str = "claim-1") -> Any:
    return parse_claim_check({**workload.claim_check(random.Random(0), claim_id), "verdict": verdict,
                              "score": score, "confidence": confidence})  # fmt: skip


@pytest.mark.parametrize("verdict,score,conf,route_,reason", [
    ("pass", 0.80, 0.60, "done", "pass_confident"),
    ("pass", 0.95, 0.59, "human_review", "pass_low_confidence"),
    ("fail", 0.10, 0.59, "human_review", "fail_low_confidence"),
    ("fail", 0.50, 0.30, "human_review", "fail_low_confidence"),
    ("pass", 0.79, 0.90, "second_judge", "borderline"),
    ("pass", 0.45, 0.90, "second_judge", "borderline"),
    ("fail", 0.60, 0.90, "second_judge", "borderline"),
    ("unclear", 0.50, 0.90, "second_judge", "borderline"),
    ("pass", 0.44, 0.90, "human_review", "pass_low_score"),
    ("unclear", 0.20, 0.90, "human_review", "unclear"),
    ("unclear", None, 0.90, "human_review", "unclear"),
])  # fmt: skip
def test_branches(verdict: str, score: float | None, conf: float, route_: str, reason: str) -> None:
    decision = route(check(verdict, score, conf))
    assert (decision.route, decision.reason) == (route_, reason)


def test_confident_failure_goes_to_done_unless_sampled() -> None:
    outcomes = {route(check("fail", 0.1, 0.9, f"claim-{i}")).reason for i in range(200)}
    assert outcomes == {"confident_fail", "spot_sample"}
    for i in range(200):
        d = route(check("fail", 0.1, 0.9, f"claim-{i}"))
        assert d.route == ("human_review" if d.reason == "spot_sample" else "done")


@given(st.sampled_from(["pass", "fail", "unclear"]), st.floats(0, 1), st.floats(0, 1), st.text(min_size=1))
def test_literal_mode_equals_the_seed(verdict: str, score: float, conf: float, claim_id: str) -> None:
    c = check(verdict, score, conf, claim_id)
    assert route(c, RoutingPolicy(spot_sample_rate=1.0)).route == seed_route(c.model_dump())


@given(st.sampled_from(["pass", "fail", "unclear"]), st.floats(0, 1), st.floats(0, 1), st.text(min_size=1))
def test_default_differs_from_the_seed_only_on_unsampled_confident_failures(
    verdict: str, score: float, conf: float, claim_id: str
) -> None:
    c = check(verdict, score, conf, claim_id)
    ours, seeds = route(c), seed_route(c.model_dump())
    if ours.route != seeds:
        assert ours.reason == "confident_fail" and seeds == "human_review"


def test_spot_sample_rate_is_about_ten_percent_and_deterministic() -> None:
    ids = [f"claim-{i:06d}" for i in range(20_000)]
    share = sum(spot_sampled(c, 0.10) for c in ids) / len(ids)
    assert 0.08 <= share <= 0.12
    assert [spot_sampled(c, 0.10) for c in ids[:500]] == [spot_sampled(c, 0.10) for c in ids[:500]]
    assert not any(spot_sampled(c, 0.0) for c in ids[:100]) and all(spot_sampled(c, 1.0) for c in ids[:100])


def test_policy_overrides_thresholds() -> None:
    strict = RoutingPolicy(pass_score=0.95, floor=0.9, border=0.5, spot_sample_rate=0.0)
    assert route(check("pass", 0.9, 0.95), strict).route == "second_judge"
    assert route(check("fail", 0.1, 0.95), strict).reason == "confident_fail"


def test_invalid_goes_to_humans() -> None:
    assert (route_invalid().route, route_invalid().reason) == ("human_review", "invalid")


def test_nightly_batch_shape_matches_the_seed_prose() -> None:
    """1,000 claims: 620 confident passes, 180 borderline, 110 low-confidence
    fails, 90 confident fails -> ~9 spot samples and ~120 to humans."""
    rng = random.Random(3)
    rows = ([("pass", rng.uniform(0.8, 1), rng.uniform(0.6, 1)) for _ in range(620)]
            + [("pass", rng.uniform(0.45, 0.79), rng.uniform(0.6, 1)) for _ in range(180)]
            + [("fail", rng.uniform(0, 0.44), rng.uniform(0, 0.59)) for _ in range(110)]
            + [("fail", rng.uniform(0, 0.44), rng.uniform(0.6, 1)) for _ in range(90)])  # fmt: skip
    routes = [route(check(v, s, c, f"nightly-{i}")).route for i, (v, s, c) in enumerate(rows)]
    assert routes.count("second_judge") == 180
    assert 110 + 5 <= routes.count("human_review") <= 110 + 15
