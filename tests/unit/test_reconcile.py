"""`reconcile` against the literal port of seed 000 on random inputs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import parse_judge_output, parse_rubric
from streams.reconcile import NoSuccessfulJudge, reconcile
from streams.rounding import js_round
from tests.unit.seed_reference import Math_round, reconcile_judge_outputs

LANES = ["correctness", "code_quality", "process", "safety"]
MODELS = ["claude-opus-4-6", "gpt-4o", "gemini-1.5-pro", "llama-3-70b", "mistral-large"]


def output_doc(
    i: int, model: str, status: str, lanes: dict[str, int], confidence: str, deductions: list[int]
) -> dict[str, Any]:
    if status == "failed":
        lanes = {}
    overall = js_round(sum(lanes.values()) / len(lanes)) if lanes else 0
    return {
        "schema_version": "2.1",
        "judge_model": model,
        "judge_run_id": f"00000000-0000-4000-8000-{i:012d}",
        "evaluation_run_id": "11111111-1111-4111-8111-111111111111",
        "submission_id": "22222222-2222-4222-8222-222222222222",
        "rubric_version_id": "33333333-3333-4333-8333-333333333333",
        "overall_score": overall,
        "lane_scores": [
            {
                "lane_key": k,
                "lane_score": v,
                "dimension_scores": [
                    {
                        "dimension_key": "only_dimension",
                        "score": v,
                        "band_label": "x",
                        "reasoning": "Concrete reasoning about line 12 of main.py",
                        "evidence_refs": [],
                    }
                ],
            }
            for k, v in lanes.items()
        ],  # fmt: skip
        "positive_signal": None if status == "failed" else "Handles the empty input in parse() at line 4",
        "primary_weakness": None if status == "failed" else "No test covers the retry branch in fetch()",
        "confidence": confidence,
        "confidence_reasoning": "Reasoning long enough for a low confidence output",
        "flags": [],
        "integrity_adjustments": [
            {
                "flag_code": "COPY_PASTE_DETECTED",
                "description": "copied from the prompt",
                "deduction": d,
                "evidence_refs": [{"type": "diff_hunk", "id": "a.py:1:2"}],
            }
            for d in deductions
        ],  # fmt: skip
        "integrity_adjusted_score": max(0, overall + sum(deductions)) if lanes else 0,
        "telemetry_summary": {
            "tool_call_count": None,
            "step_count": None,
            "error_count": None,
            "error_rate": None,
            "total_tokens_used": None,
            "wall_time_seconds": None,
            "telemetry_unavailable_reason": "not traced",
        },  # fmt: skip
        "status": status,
        "failure_reason": None if status == "complete" else "timed out",
        "completed_lane_keys": list(lanes),
        "judge_started_at": "2026-03-31T12:00:00Z",
        "judge_completed_at": "2026-03-31T12:01:00Z",
    }


judge = st.tuples(
    st.sampled_from(MODELS),
    st.sampled_from(["complete", "complete", "partial", "failed"]),
    st.dictionaries(st.sampled_from(LANES), st.integers(0, 100), min_size=1, max_size=4),
    st.sampled_from(["high", "medium", "low"]),
    st.lists(st.integers(-50, 0), max_size=3),
)
methods = st.sampled_from(["mean", "median", "weighted_judge_confidence"])


def _compare(docs: list[dict[str, Any]], method: str) -> None:
    try:
        expected = reconcile_judge_outputs(docs, method)
    except ValueError:
        with pytest.raises(NoSuccessfulJudge):
            reconcile([parse_judge_output(d) for d in docs], method)  # type: ignore[arg-type]
        return
    got = reconcile([parse_judge_output(d) for d in docs], method)  # type: ignore[arg-type]
    assert got.final_overall_score == expected["finalOverallScore"]
    assert got.final_adjusted_score == expected["finalAdjustedScore"]
    assert got.judge_count == expected["judgeCount"]
    assert got.successful_judge_count == expected["successfulJudgeCount"]
    assert got.has_contradictions == expected["hasContradictions"]
    assert got.reconciled_lane_scores == expected["reconciledLaneScores"]
    assert list(got.reconciled_lane_scores) == list(expected["reconciledLaneScores"])
    assert got.lane_scores_by_judge == expected["laneScoresByJudge"]
    assert [
        (c.lane_key, c.spread, [(s.judge_model, s.score) for s in c.scores]) for c in got.contradiction_details
    ] == [
        (c["laneKey"], c["spread"], [(s["judgeModel"], s["score"]) for s in c["scores"]])
        for c in expected["contradictionDetails"]
    ]


@settings(max_examples=400, deadline=None)
@given(st.lists(judge, min_size=1, max_size=5), methods)
def test_matches_the_seed_on_random_inputs(judges: list[tuple[Any, ...]], method: str) -> None:
    _compare([output_doc(i, *j) for i, j in enumerate(judges)], method)


@pytest.mark.parametrize("method", ["mean", "median", "weighted_judge_confidence"])
def test_spread_of_25_is_not_a_contradiction_26_is(method: str) -> None:
    at = [output_doc(0, "a-judge", "complete", {"correctness": 50}, "high", []),
          output_doc(1, "b-judge", "complete", {"correctness": 75}, "high", [])]  # fmt: skip
    assert not reconcile([parse_judge_output(d) for d in at], method).has_contradictions  # type: ignore[arg-type]
    over = [at[0], output_doc(1, "b-judge", "complete", {"correctness": 76}, "high", [])]
    result = reconcile([parse_judge_output(d) for d in over], method)  # type: ignore[arg-type]
    assert result.has_contradictions and result.contradiction_details[0].spread == 26
    _compare(at, method)
    _compare(over, method)


def test_half_up_rounding_like_javascript() -> None:
    assert [js_round(x) for x in (2.5, 3.5, -2.5, 0.49999999999999994, 72.5)] == [3, 4, -2, 0, 73]
    assert [Math_round(x) for x in (2.5, 3.5, -2.5)] == [3, 4, -2]
    docs = [output_doc(0, "a-judge", "complete", {"correctness": 70}, "high", []),
            output_doc(1, "b-judge", "complete", {"correctness": 71}, "high", [])]  # fmt: skip
    result = reconcile([parse_judge_output(d) for d in docs])
    assert result.reconciled_lane_scores == {"correctness": 71}  # 70.5 -> 71 (Python's round gives 70)
    median = reconcile([parse_judge_output(d) for d in docs], "median")
    assert median.reconciled_lane_scores == {"correctness": 71}


def test_failed_judge_excluded_notice_and_missing() -> None:
    docs = [output_doc(0, "a-judge", "complete", {"correctness": 80}, "high", [-10]),
            output_doc(1, "b-judge", "complete", {"correctness": 60}, "low", [-5, -3]),
            output_doc(2, "c-judge", "failed", {}, "low", [])]  # fmt: skip
    result = reconcile([parse_judge_output(d) for d in docs], expected_judges=["a-judge", "b-judge",
                       "c-judge", "d-judge"])  # fmt: skip
    assert result.judge_count == 3 and result.successful_judge_count == 2
    assert result.final_overall_score == 70 and result.final_adjusted_score == 60
    assert result.failed_judges == ["c-judge"] and result.missing_judges == ["d-judge"]
    # d-judge is not in yet: listed as missing, never counted as unavailable (seed 000 #10 means failed judges)
    assert result.notice == "1 judge unavailable: c-judge failed"
    pending = reconcile([parse_judge_output(d) for d in docs[:2]], expected_judges=["a-judge", "b-judge", "c-judge"])
    assert pending.notice is None and pending.missing_judges == ["c-judge"]
    assert reconcile([parse_judge_output(d) for d in docs[:2]]).notice is None
    timed_out = output_doc(3, "d-judge", "failed", {}, "low", [])
    timed_out["failure_reason"] = "timeout: no output within the 30s judge timeout"
    both = reconcile([parse_judge_output(d) for d in [*docs, timed_out]])
    assert both.notice == "2 judges unavailable: c-judge failed, d-judge timed out"


def test_adjusted_score_floors_at_zero_and_weighted_final() -> None:
    docs = [output_doc(0, "a-judge", "complete", {"correctness": 20, "process": 40}, "high", [-50]),
            output_doc(1, "b-judge", "partial", {"correctness": 30}, "medium", [])]  # fmt: skip
    dims = [{"dimension_key": "only_dimension"}]
    rubric = parse_rubric({
        "schema_version": "1.0", "rubric_version_id": "33333333-3333-4333-8333-333333333333", "name": "r",
        "lanes": [{"lane_key": "correctness", "weight": 3.0, "dimensions": dims},
                  {"lane_key": "process", "weight": 1.0, "dimensions": dims}],
    })  # fmt: skip
    result = reconcile([parse_judge_output(d) for d in docs], rubric=rubric)
    assert result.reconciled_lane_scores == {"correctness": 25, "process": 40}
    assert result.final_overall_score == 33 and result.final_adjusted_score == 0
    assert result.weighted_final_score == pytest.approx((25 * 3 + 40) / 4, abs=0.01)


def test_no_successful_output_is_an_error() -> None:
    with pytest.raises(NoSuccessfulJudge):
        reconcile([parse_judge_output(output_doc(0, "a-judge", "failed", {}, "low", []))])
