"""DESIGN decision 10: a final run's route and the reason that names every cause, as a pure function."""

from __future__ import annotations

from typing import Any

import pytest

from schemas import ReconciliationResult
from streams.judge_summary import JudgeSummary
from streams.routing import route_evaluation


def result(contradictions: bool = False) -> ReconciliationResult:
    return ReconciliationResult(
        final_overall_score=70, final_adjusted_score=70, judge_count=2, successful_judge_count=2,
        has_contradictions=contradictions, contradiction_details=[], lane_scores_by_judge={},
        reconciled_lane_scores={}, method="mean",
    )  # fmt: skip


def judge(name: str, **kw: Any) -> JudgeSummary:
    return JudgeSummary(judge_run_id=name, judge_model=name, status=kw.pop("status", "complete"), lanes={"a": 70},
                        confidence=kw.pop("confidence", "high"), **kw)  # fmt: skip


@pytest.mark.parametrize(
    ("contradictions", "judges", "want"),
    [
        (False, [judge("a"), judge("b")], ("done", "reconciled")),
        (True, [judge("a"), judge("b")], ("human_review", "contradictions")),
        (False, [judge("a", auto_disqualify=True), judge("b")], ("human_review", "auto_disqualify")),
        (False, [judge("a"), judge("b", critical=True)], ("human_review", "critical_flag")),
        (False, [judge("a", confidence="low"), judge("b", confidence="low")], ("human_review", "low_confidence")),
        (False, [judge("a", confidence="low"), judge("b")], ("done", "reconciled")),  # one low is not all
        # a failed judge's flags and confidence do not count: only successful judges route
        (False, [judge("a", status="failed", critical=True, confidence="low"), judge("b")], ("done", "reconciled")),
        (True, [judge("a", auto_disqualify=True, critical=True, confidence="low")],
         ("human_review", "contradictions+auto_disqualify+critical_flag+low_confidence")),
    ],
)  # fmt: skip
def test_evaluation_route_names_every_cause(
    contradictions: bool, judges: list[JudgeSummary], want: tuple[str, str]
) -> None:
    decision = route_evaluation(result(contradictions), judges)
    assert (decision.route, decision.reason) == want


def test_no_successful_judge_goes_to_humans() -> None:
    decision = route_evaluation(None, [judge("a", status="failed")])
    assert (decision.route, decision.reason) == ("human_review", "no_successful_judge")
