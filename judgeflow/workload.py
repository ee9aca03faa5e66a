"""Seeded synthetic judge traffic: rubrics, runs, judge outputs, claim checks.

Tests, the demo and the benchmarks all draw events from here, so they share
one realistic shape (seed 000's contract, seed 003's claim rows). Every
function is deterministic for a given `random.Random`.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.versions import ADDED_IN_2_0, TELEMETRY_ADDED_IN_2_1

NAMESPACE = uuid.UUID("6f1c2a4e-9d4b-5c1e-8a77-0b7e5d3c2a10")
JUDGE_MODELS = ("claude-opus-4-6", "gpt-4o", "gemini-1.5-pro")
EPOCH = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)

LANES: dict[str, list[tuple[str, float]]] = {
    "correctness": [("edge_case_handling", 0.4), ("test_coverage", 0.3), ("logic_soundness", 0.3)],
    "code_quality": [("readability", 0.5), ("structure", 0.5)],
    "process": [("tool_use", 0.6), ("recovery", 0.4)],
}


def stable_id(*parts: object) -> str:
    return str(uuid.uuid5(NAMESPACE, "/".join(str(p) for p in parts)))


def iso(ts: datetime) -> str:
    return ts.astimezone(UTC).isoformat().replace("+00:00", "Z")


def rubric(rubric_id: str | None = None, **overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": "1.0",
        "rubric_version_id": rubric_id or stable_id("rubric", "default"),
        "name": "agentic-coding-v3",
        "lanes": [
            {
                "lane_key": lane,
                "weight": 1.0,
                "dimensions": [{"dimension_key": k, "weight": w} for k, w in dims],
            }
            for lane, dims in LANES.items()
        ],
        "bands": [
            {"label": "Weak", "min_score": 0, "max_score": 49},
            {"label": "Adequate", "min_score": 50, "max_score": 74},
            {"label": "Strong", "min_score": 75, "max_score": 100},
        ],
        "routing": {"pass_score": 0.80, "floor": 0.60, "border": 0.45, "spot_sample_rate": 0.10},
        "aggregation_mode": "majority",
        "tie_rule": "unclear",
        "reconciliation_method": "mean",
        "created_at": iso(EPOCH),
    }
    doc.update(overrides)
    return doc


def band(score: int) -> str:
    return "Weak" if score < 50 else "Adequate" if score < 75 else "Strong"


def evaluation_run(
    run_id: str,
    *,
    submission_id: str | None = None,
    rubric_id: str | None = None,
    judges: tuple[str, ...] = JUDGE_MODELS,
    timeout_s: float = 30.0,
) -> dict[str, Any]:
    return {
        "schema_version": "1.0",
        "evaluation_run_id": run_id,
        "submission_id": submission_id or stable_id("submission", run_id),
        "rubric_version_id": rubric_id or stable_id("rubric", "default"),
        "expected_judge_models": list(judges),
        "judge_timeout_seconds": timeout_s,
        "started_at": iso(EPOCH),
    }


def _evidence(rng: random.Random, k: int) -> dict[str, Any]:
    if k % 2 == 0:
        return {
            "type": "transcript_line",
            "id": str(rng.randint(1, 900)),
            "excerpt": "TypeError: Cannot read property of null",
        }
    return {"type": "tool_call", "id": f"tc_{rng.randrange(16**6):06x}", "location": f"step:{rng.randint(1, 40)}"}


def _dimension(rng: random.Random, dim_key: str, score: int, evidence: int) -> dict[str, Any]:
    return {
        "dimension_key": dim_key,
        "score": score,
        "reasoning": f"The {dim_key.replace('_', ' ')} at line {rng.randint(5, 400)} "
        f"handles the null input path and the retry after tool error",
        "evidence_refs": [_evidence(rng, k) for k in range(evidence)],
        "band_label": band(score),
    }


def _lanes(
    rng: random.Random, lanes: dict[str, list[tuple[str, float]]], base: int, evidence: int
) -> list[dict[str, Any]]:
    """Each lane's score is the weighted mean of its dimensions', each of those near `base`."""
    lane_docs: list[dict[str, Any]] = []
    for lane_key, dims in lanes.items():
        dim_docs, total, weight_sum = [], 0.0, 0.0
        for dim_key, weight in dims:
            score = max(0, min(100, base + rng.randint(-8, 8)))
            total += score * weight
            weight_sum += weight
            dim_docs.append(_dimension(rng, dim_key, score, evidence))
        lane_docs.append({"lane_key": lane_key, "lane_score": round(total / weight_sum), "dimension_scores": dim_docs})
    return lane_docs


def _adjustments(rng: random.Random, wanted: bool) -> list[dict[str, Any]]:
    if not wanted:
        return []
    return [
        {
            "flag_code": "COPY_PASTE_DETECTED",
            "description": "Solution body copied verbatim from the prompt's example block",
            "deduction": -rng.randint(5, 20),
            "evidence_refs": [{"type": "diff_hunk", "id": "src/solve.py:10:42"}],
        }
    ]


def _flags(wanted: bool) -> list[dict[str, Any]]:
    if not wanted:
        return []
    return [
        {
            "flag_code": "PROMPT_INJECTION_ATTEMPT",
            "severity": "warning",
            "description": "Transcript contains an instruction aimed at the judge",
            "evidence_refs": [{"type": "transcript_line", "id": "12"}],
            "auto_disqualify": False,
        }
    ]


def _telemetry(rng: random.Random, steps: int, errors: int) -> dict[str, Any]:
    return {
        "tool_call_count": rng.randint(5, 60),
        "step_count": steps,
        "error_count": errors,
        "error_rate": round(errors / steps, 4),
        "total_tokens_used": rng.randint(2_000, 90_000),
        "wall_time_seconds": round(rng.uniform(20, 900), 2),
        "telemetry_unavailable_reason": None,
    }


def judge_output(
    rng: random.Random,
    run_id: str,
    judge_model: str,
    *,
    submission_id: str | None = None,
    rubric_id: str | None = None,
    base_score: int | None = None,
    lanes: dict[str, list[tuple[str, float]]] | None = None,
    status: str = "complete",
    with_adjustment: bool = False,
    with_flag: bool = False,
    evidence_per_dimension: int = 2,
) -> dict[str, Any]:
    """One judge output of schema 2.1, internally consistent (lane = weighted dimension mean).

    The same `rng` state gives the same document: the helpers draw in a fixed order."""
    base = base_score if base_score is not None else rng.randint(35, 90)
    lane_docs = _lanes(rng, lanes or LANES, base, evidence_per_dimension)
    if status == "partial":
        lane_docs = lane_docs[: max(1, len(lane_docs) - 1)]
    overall = round(sum(lane["lane_score"] for lane in lane_docs) / len(lane_docs)) if lane_docs else 0
    adjustments = _adjustments(rng, with_adjustment)
    started = EPOCH + timedelta(seconds=rng.randint(0, 3600))
    steps = rng.randint(10, 80)
    errors = rng.randint(0, 5)
    return {
        "schema_version": "2.1",
        "judge_model": judge_model,
        "judge_run_id": stable_id("judge_run", run_id, judge_model),
        "evaluation_run_id": run_id,
        "submission_id": submission_id or stable_id("submission", run_id),
        "rubric_version_id": rubric_id or stable_id("rubric", "default"),
        "overall_score": overall,
        "lane_scores": lane_docs,
        "positive_signal": "Added a regression test for the empty-list case in test_parse.py line "
        f"{rng.randint(3, 99)}",
        "primary_weakness": f"The retry loop in fetch_page() swallows the timeout error at step {rng.randint(2, 30)}",
        "confidence": rng.choice(["high", "high", "medium", "low"]),
        "confidence_reasoning": "Transcript and test output agree; two tool errors were ambiguous",
        "flags": _flags(with_flag),
        "integrity_adjustments": adjustments,
        "integrity_adjusted_score": max(0, overall + sum(a["deduction"] for a in adjustments)),
        "telemetry_summary": _telemetry(rng, steps, errors),
        "status": status,
        "failure_reason": "judge timed out after scoring 2 of 3 lanes" if status == "partial" else None,
        "completed_lane_keys": [lane["lane_key"] for lane in lane_docs],
        "judge_started_at": iso(started),
        "judge_completed_at": iso(started + timedelta(seconds=rng.randint(5, 120))),
    }


def as_version_1_0(doc: dict[str, Any]) -> dict[str, Any]:
    """The same output as a 1.0 producer would have sent it."""
    old = {k: v for k, v in doc.items() if k not in ADDED_IN_2_0}
    old["schema_version"] = "1.0"
    return old


def as_version_2_0(doc: dict[str, Any]) -> dict[str, Any]:
    """The same output as a 2.0 producer would have sent it."""
    old = dict(doc)
    old["telemetry_summary"] = {k: v for k, v in doc["telemetry_summary"].items() if k not in TELEMETRY_ADDED_IN_2_1}
    old["schema_version"] = "2.0"
    return old


def claim_check(
    rng: random.Random,
    claim_id: str,
    judge_id: str = "faithfulness-judge-v1",
    *,
    verdict: str | None = None,
    score: float | None = None,
    confidence: float | None = None,
    source_id: str | None = None,
) -> dict[str, Any]:
    verdict = verdict or rng.choices(["pass", "fail", "unclear"], weights=[62, 33, 5])[0]
    if score is None:
        score = rng.uniform(0.80, 1.0) if verdict == "pass" else rng.uniform(0.0, 0.8)
    return {
        "schema_version": "1.0",
        "claim_id": claim_id,
        "judge_id": judge_id,
        "source_id": source_id or f"src-{rng.randint(1, 40):03d}",
        "verdict": verdict,
        "score": round(score, 3),
        "confidence": round(confidence if confidence is not None else rng.uniform(0.3, 1.0), 3),
        "reason": "The passage states the revenue grew 12% in Q3, matching the claim's figure.",
        "passage_quote": "revenue grew 12% in the third quarter",
        "passage": "In its filing the company said revenue grew 12% in the third quarter of 2026.",
        "claim_text": "Revenue grew 12% in Q3 2026.",
        "checked_at": iso(EPOCH + timedelta(minutes=rng.randint(0, 600))),
    }
