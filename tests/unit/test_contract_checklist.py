"""Seed 000's review checklist, one test per item the contract covers,
plus DESIGN decisions 1-4 (failed/partial, lane consistency, rubric keys, versions)."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from judgeflow import workload
from schemas import (
    ContractError,
    parse_claim_check,
    parse_judge_output,
    parse_rubric,
    validate_judge_output,
)


def doc(**overrides: Any) -> dict[str, Any]:
    base = workload.judge_output(random.Random(7), workload.stable_id("run", 1), "gpt-4o")
    base.update(overrides)
    return base


def codes(data: Any, **kw: Any) -> list[str]:
    with pytest.raises(ContractError) as info:
        parse_judge_output(data, **kw)
    return info.value.codes


def warning_codes(data: Any, **kw: Any) -> list[str]:
    return [w.code for w in validate_judge_output(data, **kw).warnings]


def test_valid_sample_parses_from_bytes_str_and_dict() -> None:
    d = doc()
    for form in (d, json.dumps(d), json.dumps(d).encode()):
        out = parse_judge_output(form)
        assert out.judge_run_id == d["judge_run_id"]
        assert out.schema_version == "2.1"


# 1. Schema version in every output
def test_item1_schema_version_required() -> None:
    d = doc()
    del d["schema_version"]
    assert codes(d) == ["MISSING_SCHEMA_VERSION"]
    assert codes(doc(schema_version=None)) == ["MISSING_SCHEMA_VERSION"]
    assert codes(doc(schema_version="2")) == ["INVALID_SCHEMA_VERSION"]
    assert codes(doc(schema_version=2.1)) == ["INVALID_SCHEMA_VERSION"]


# 2. Evidence refs are structured, not text blobs
def test_item2_plain_string_evidence_rejected() -> None:
    d = doc()
    d["lane_scores"][0]["dimension_scores"][0]["evidence_refs"] = ["line 45 shows the crash"]
    assert codes(d) == ["EVIDENCE_REF_NOT_STRUCTURED"]
    d = doc()
    d["lane_scores"][0]["dimension_scores"][0]["evidence_refs"] = [{"type": "screenshot", "id": "1"}]
    assert codes(d) == ["INVALID_ENUM"]
    d["lane_scores"][0]["dimension_scores"][0]["evidence_refs"] = [{"type": "tool_call", "id": ""}]
    assert codes(d) == ["TOO_SHORT"]
    d["lane_scores"][0]["dimension_scores"][0]["evidence_refs"] = [
        {"type": "tool_call", "id": "tc_1", "excerpt": "x" * 301}
    ]
    assert codes(d) == ["EXCERPT_TOO_LONG"]


# 3. Partial output handling
def test_item3_partial_output_is_stored_and_flagged() -> None:
    d = workload.judge_output(random.Random(1), workload.stable_id("run", 2), "gpt-4o", status="partial")
    parsed = validate_judge_output(d, rubric=parse_rubric(workload.rubric()))
    assert parsed.event.status == "partial"
    assert parsed.event.completed_lane_keys == ["correctness", "code_quality"]
    partial = [w for w in parsed.warnings if w.code == "PARTIAL_OUTPUT"]
    assert partial and "not scored: process" in partial[0].message


def test_item3_partial_needs_failure_reason_and_exact_lanes() -> None:
    d = workload.judge_output(random.Random(1), workload.stable_id("run", 2), "gpt-4o", status="partial")
    assert codes({**d, "failure_reason": None}) == ["FAILURE_REASON_REQUIRED"]
    assert codes({**d, "completed_lane_keys": ["correctness"]}) == ["COMPLETED_LANES_MISMATCH"]
    assert codes({**d, "completed_lane_keys": [*d["completed_lane_keys"], "process"]}) == ["COMPLETED_LANES_MISMATCH"]


def test_decision1_failed_stub_with_empty_lanes_and_null_signals_is_valid() -> None:
    stub = doc(
        overall_score=0,
        lane_scores=[],
        positive_signal=None,
        primary_weakness=None,
        confidence="low",
        confidence_reasoning="Judge failed: timed out after 30 seconds",
        integrity_adjusted_score=0,
        status="failed",
        failure_reason="timeout after 30s",
        completed_lane_keys=[],
        judge_completed_at=None,
        telemetry_summary={k: None for k in doc()["telemetry_summary"]}
        | {"telemetry_unavailable_reason": "judge_failed"},
    )
    out = parse_judge_output(stub)
    assert out.status == "failed" and out.lane_scores == []
    assert codes({**stub, "failure_reason": None}) == ["FAILURE_REASON_REQUIRED"]
    assert codes({**stub, "status": "complete", "failure_reason": None}) == ["LANE_SCORES_REQUIRED"]


def test_decision1_non_failed_output_needs_signals() -> None:
    assert codes(doc(positive_signal=None)) == ["SIGNAL_REQUIRED"]
    assert codes(doc(primary_weakness="too short")) == ["TOO_SHORT"]
    assert codes(doc(positive_signal="x" * 501)) == ["TOO_LONG"]


# 4. Confidence reasoning is required when confidence is low
def test_item4_low_confidence_needs_substantive_reasoning() -> None:
    assert codes(doc(confidence="low", confidence_reasoning="")) == ["LOW_CONFIDENCE_REASONING_REQUIRED"]
    assert codes(doc(confidence="low", confidence_reasoning=" " * 30)) == ["LOW_CONFIDENCE_REASONING_REQUIRED"]
    assert parse_judge_output(doc(confidence="low", confidence_reasoning="x" * 20)).confidence == "low"
    assert parse_judge_output(doc(confidence="high", confidence_reasoning="")).confidence == "high"


# 6. Integrity adjustments are bounded
@pytest.mark.parametrize("deduction", [-51, 1, 5])
def test_item6_deduction_outside_minus50_to_0_rejected(deduction: int) -> None:
    d = workload.judge_output(random.Random(3), workload.stable_id("run", 3), "gpt-4o", with_adjustment=True)
    d["integrity_adjustments"][0]["deduction"] = deduction
    assert "DEDUCTION_OUT_OF_RANGE" in codes(d)


def test_item6_adjustment_must_cite_evidence_and_bounds_accept_edges() -> None:
    d = workload.judge_output(random.Random(3), workload.stable_id("run", 3), "gpt-4o", with_adjustment=True)
    d["integrity_adjustments"][0]["deduction"] = -50
    d["integrity_adjusted_score"] = max(0, d["overall_score"] - 50)
    assert parse_judge_output(d).integrity_adjustments[0].deduction == -50
    bad = copy.deepcopy(d)
    bad["integrity_adjustments"][0]["evidence_refs"] = []
    assert codes(bad) == ["ADJUSTMENT_EVIDENCE_REQUIRED"]


def test_adjusted_score_cannot_exceed_overall() -> None:
    d = doc()
    assert codes({**d, "integrity_adjusted_score": d["overall_score"] + 1}) == ["ADJUSTED_EXCEEDS_OVERALL"]


# 7. Lane score vs computed weighted score consistency (warning, never rejection)
def test_item7_lane_divergence_warns_with_rubric_weights() -> None:
    rubric = parse_rubric(workload.rubric())
    d = doc()
    assert "LANE_SCORE_DIVERGES" not in warning_codes(d, rubric=rubric)
    lane = d["lane_scores"][1]  # code_quality: readability 0.5, structure 0.5
    lane["dimension_scores"][0]["score"], lane["dimension_scores"][1]["score"] = 60, 70
    lane["lane_score"] = 65
    assert "LANE_SCORE_DIVERGES" not in warning_codes(d, rubric=rubric)
    lane["lane_score"] = 67  # 2 points from the weighted mean 65
    assert "LANE_SCORE_DIVERGES" in warning_codes(d, rubric=rubric)
    # Without weights the seed's unweighted mean and 10 points apply.
    assert "LANE_SCORE_DIVERGES" not in warning_codes(d)
    lane["lane_score"] = 76
    assert "LANE_SCORE_DIVERGES" in warning_codes(d)


# 8. Telemetry summaries present, or all null with a reason
def test_item8_telemetry_present_or_explained() -> None:
    tel = doc()["telemetry_summary"]
    assert codes(doc(telemetry_summary={**tel, "step_count": None})) == ["TELEMETRY_INCOMPLETE"]
    assert codes(doc(telemetry_summary={**tel, "telemetry_unavailable_reason": "no trace"})) == [
        "TELEMETRY_REASON_WITH_METRICS"
    ]
    nulls = {k: None for k in tel}
    assert codes(doc(telemetry_summary=nulls)) == ["TELEMETRY_INCOMPLETE"]
    ok = parse_judge_output(doc(telemetry_summary={**nulls, "telemetry_unavailable_reason": "no trace"}))
    assert not ok.telemetry_summary.available
    assert codes(doc(telemetry_summary={**tel, "error_rate": 1.5})) == ["OUT_OF_RANGE"]


# 9. Flags have machine-readable codes
def test_item9_flag_codes_are_screaming_snake() -> None:
    d = workload.judge_output(random.Random(4), workload.stable_id("run", 4), "gpt-4o", with_flag=True)
    assert parse_judge_output(d).flags[0].flag_code == "PROMPT_INJECTION_ATTEMPT"
    d["flags"][0]["flag_code"] = "prompt injection"
    assert codes(d) == ["FLAG_CODE_NOT_SCREAMING_SNAKE"]
    d["flags"][0]["flag_code"] = "OK"
    d["flags"][0]["severity"] = "fatal"
    assert codes(d) == ["INVALID_ENUM"]


# 11. Schema migration is additive-only: v1.0 and v2.0 load into 2.1
def test_item11_version_1_0_loads_as_current() -> None:
    d = doc()
    parsed = validate_judge_output(workload.as_version_1_0(d))
    out = parsed.event
    assert parsed.source_version == "1.0" and out.schema_version == "2.1"
    assert out.status == "complete" and out.failure_reason is None
    assert out.integrity_adjustments == [] and out.integrity_adjusted_score == d["overall_score"]
    assert out.completed_lane_keys == [lane["lane_key"] for lane in d["lane_scores"]]
    assert out.telemetry_summary.tool_call_count is None
    assert "schema 1.0" in (out.telemetry_summary.telemetry_unavailable_reason or "")


def test_item11_version_2_0_loads_as_current() -> None:
    d = doc()
    out = parse_judge_output(workload.as_version_2_0(d))
    assert out.telemetry_summary.error_count is None
    assert out.telemetry_summary.telemetry_unavailable_reason is None
    assert out.telemetry_summary.step_count == d["telemetry_summary"]["step_count"]


def test_upcast_does_not_mutate_the_callers_dict() -> None:
    old = workload.as_version_1_0(doc())
    snapshot = copy.deepcopy(old)
    parse_judge_output(old)
    assert old == snapshot


def test_decision4_unknown_minor_accepted_unknown_major_refused() -> None:
    out = parse_judge_output(doc(schema_version="2.7", brand_new_field={"x": 1}))
    assert out.schema_version == "2.1"
    assert parse_judge_output({**workload.as_version_1_0(doc()), "schema_version": "1.3"}).status == "complete"
    assert codes(doc(schema_version="3.0")) == ["UNSUPPORTED_SCHEMA_VERSION"]
    assert codes(doc(schema_version="0.9")) == ["UNSUPPORTED_SCHEMA_VERSION"]


# 12. positive_signal / primary_weakness are specific observations
def test_item12_specificity_warnings() -> None:
    assert not {"GENERIC_SIGNAL", "SIGNAL_NOT_CONCRETE", "SIGNAL_RESTATES_SCORE"} & set(warning_codes(doc()))
    generic = doc(positive_signal="Shows good understanding of the problem overall")
    assert {"GENERIC_SIGNAL", "SIGNAL_NOT_CONCRETE"} <= set(warning_codes(generic))
    restated = doc(primary_weakness="Scored 62 on correctness which is the Adequate band")
    assert "SIGNAL_RESTATES_SCORE" in warning_codes(restated)
    same = doc(primary_weakness=doc()["positive_signal"])
    assert "SIGNAL_DUPLICATES_WEAKNESS" in warning_codes(same)


def test_strict_types_no_coercion() -> None:
    assert codes(doc(overall_score="72")) == ["WRONG_TYPE"]
    assert codes(doc(overall_score=72.5)) == ["WRONG_TYPE"]  # 72.0 is the integer 72, as JSON Schema says
    assert codes(doc(overall_score=True)) == ["WRONG_TYPE"]
    d = doc()
    d["flags"] = [{"flag_code": "X", "severity": "info", "description": "hello", "auto_disqualify": "true"}]
    assert codes(d) == ["WRONG_TYPE"]
    assert codes(doc(judge_run_id="not-a-uuid")) == ["INVALID_UUID"]
    assert codes(doc(judge_started_at="yesterday")) == ["INVALID_TIMESTAMP"]
    assert codes(doc(judge_started_at="2026-03-31T12:00:00")) == ["INVALID_TIMESTAMP"]


def test_scores_and_keys_bounds() -> None:
    assert codes(doc(overall_score=101)) == ["OUT_OF_RANGE"]
    d = doc()
    d["lane_scores"][0]["lane_key"] = "Correctness"
    d["completed_lane_keys"][0] = "Correctness"
    assert codes(d) == ["INVALID_LANE_KEY"]
    d = doc()
    d["lane_scores"][0]["dimension_scores"][0]["reasoning"] = "too short"
    assert codes(d) == ["REASONING_NOT_SUBSTANTIVE"]
    d = doc()
    d["lane_scores"].append(copy.deepcopy(d["lane_scores"][0]))
    assert codes(d) == ["DUPLICATE_LANE_KEY"]
    d = doc()
    dims = d["lane_scores"][0]["dimension_scores"]
    dims.append(copy.deepcopy(dims[0]))
    assert codes(d) == ["DUPLICATE_DIMENSION_KEY"]
    assert codes(doc(judge_model="ab")) == ["TOO_SHORT"]


def test_timestamps_in_order() -> None:
    d = doc()
    assert codes({**d, "judge_completed_at": "2020-01-01T00:00:00Z"}) == ["TIMESTAMPS_OUT_OF_ORDER"]


def test_decision3_keys_outside_the_rubric_are_invalid() -> None:
    rubric = parse_rubric(workload.rubric())
    d = doc()
    d["lane_scores"][0]["lane_key"] = "creativity"
    d["completed_lane_keys"][0] = "creativity"
    assert codes(d, rubric=rubric) == ["UNKNOWN_LANE_KEY"]
    d = doc()
    d["lane_scores"][0]["dimension_scores"][0]["dimension_key"] = "vibes"
    assert codes(d, rubric=rubric) == ["UNKNOWN_DIMENSION_KEY"]
    other = parse_rubric(workload.rubric(rubric_id=workload.stable_id("rubric", "other")))
    assert codes(doc(), rubric=other) == ["RUBRIC_MISMATCH"]


def test_missing_fields_are_listed_together() -> None:
    d = doc()
    for key in ("judge_model", "overall_score", "confidence"):
        del d[key]
    with pytest.raises(ContractError) as info:
        parse_judge_output(d)
    assert info.value.codes == ["MISSING_FIELD"]
    assert {e.loc for e in info.value.errors} == {("judge_model",), ("overall_score",), ("confidence",)}


class TestClaimCheck:
    def check(self, **overrides: Any) -> dict[str, Any]:
        return {**workload.claim_check(random.Random(5), "claim-1", verdict="pass", score=0.9), **overrides}

    def test_valid(self) -> None:
        c = parse_claim_check(json.dumps(self.check()).encode())
        assert c.verdict == "pass" and c.score == 0.9

    @pytest.mark.parametrize(
        "field,value,code",
        [
            ("score", "0.9", "WRONG_TYPE"),
            ("confidence", "0.9", "WRONG_TYPE"),
            ("score", 1.2, "OUT_OF_RANGE"),
            ("confidence", -0.1, "OUT_OF_RANGE"),
            ("verdict", "true", "INVALID_ENUM"),
            ("verdict", True, "INVALID_ENUM"),
            ("claim_id", "", "TOO_SHORT"),
            ("judge_id", None, "WRONG_TYPE"),
            ("score", None, "SCORE_REQUIRED"),
            ("schema_version", "2.0", "UNSUPPORTED_SCHEMA_VERSION"),
        ],
    )
    def test_invalid(self, field: str, value: Any, code: str) -> None:
        with pytest.raises(ContractError) as info:
            parse_claim_check(self.check(**{field: value}))
        assert info.value.codes == [code]

    def test_unclear_may_have_null_score_and_quote(self) -> None:
        c = parse_claim_check(self.check(verdict="unclear", score=None, passage_quote=None))
        assert c.score is None and c.passage_quote is None
