"""Aggregation modes, tie rules and abstentions (DESIGN decision 6)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from judgeflow import workload
from schemas import parse_claim_check
from streams.aggregate import aggregate_verdicts


def c(verdict: str, confidence: float = 0.8, judge: str = "j") -> Any:
    return parse_claim_check({**workload.claim_check(random.Random(0), "claim-1", judge_id=judge),
                              "verdict": verdict, "confidence": confidence,
                              "score": None if verdict == "unclear" else 0.5})  # fmt: skip


@pytest.mark.parametrize("mode,verdicts,expected", [
    ("majority", ["pass", "pass", "fail"], "pass"),
    ("majority", ["fail", "fail", "pass"], "fail"),
    ("majority", ["pass", "unclear"], "pass"),
    ("unanimous", ["pass", "pass"], "pass"),
    ("unanimous", ["pass", "fail"], "fail"),
    ("unanimous", ["pass", "unclear"], "pass"),
    ("any_vote", ["fail", "pass"], "pass"),
    ("any_vote", ["fail", "fail"], "fail"),
    ("any_vote", ["unclear", "fail"], "fail"),
])  # fmt: skip
def test_modes(mode: str, verdicts: list[str], expected: str) -> None:
    assert aggregate_verdicts([c(v) for v in verdicts], mode).verdict == expected  # type: ignore[arg-type]


def test_weighted_uses_summed_confidence() -> None:
    checks = [c("pass", 0.9), c("fail", 0.5), c("fail", 0.3)]
    assert aggregate_verdicts(checks, "weighted").verdict == "pass"
    assert aggregate_verdicts([c("pass", 0.4), c("fail", 0.5)], "weighted").verdict == "fail"


@pytest.mark.parametrize("tie_rule,expected", [
    ("unclear", "unclear"), ("fail", "fail"), ("pass", "pass"), ("first_judge", "fail"),
])  # fmt: skip
def test_tie_rules(tie_rule: str, expected: str) -> None:
    tied = [c("unclear"), c("fail"), c("pass")]  # the first *voting* judge said fail
    result = aggregate_verdicts(tied, "majority", tie_rule)  # type: ignore[arg-type]
    assert result.tie and result.verdict == expected and result.agreement == 0.5
    weighted_tie = aggregate_verdicts([c("pass", 0.5), c("fail", 0.5)], "weighted", tie_rule)  # type: ignore[arg-type]
    assert weighted_tie.tie and weighted_tie.verdict == (expected if tie_rule != "first_judge" else "pass")


@pytest.mark.parametrize("mode", ["majority", "weighted", "unanimous", "any_vote"])
def test_all_abstain_is_unclear(mode: str) -> None:
    result = aggregate_verdicts([c("unclear"), c("unclear")], mode, "pass")  # type: ignore[arg-type]
    assert result.verdict == "unclear" and result.agreement is None and result.abstentions == 2


@given(st.lists(st.sampled_from(["pass", "fail", "unclear"]), min_size=1, max_size=7))
def test_majority_matches_a_vote_count(verdicts: list[str]) -> None:
    result = aggregate_verdicts([c(v) for v in verdicts], "majority", "unclear")
    p, f = verdicts.count("pass"), verdicts.count("fail")
    expected = "pass" if p > f else "fail" if f > p else "unclear"
    assert result.verdict == expected
    if p + f:
        assert result.agreement == max(p, f) / (p + f)
