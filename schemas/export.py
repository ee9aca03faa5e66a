"""JSON Schema for every contract and version, for producers in other languages.

The files say what JSON Schema can: types, ranges, the whole-string ASCII patterns of ids, keys and timestamps,
integral floats as integers (JSON Schema's own `integer`), and, as `if` / `then`, the rules that hang on
`status`, `confidence`, telemetry's reason and a claim's `verdict`. What JSON Schema cannot say (one field
compared with another, a key unique across items, rules on the bytes) is in each file's description and in
docs/contract.md. `parse_*` remains the authority; tests/unit/test_schema_differential.py holds the two to
the same answers.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from schemas.claim_check import ClaimCheck
from schemas.events import (
    EvaluationRunStarted,
    HumanReview,
    InvalidEvent,
    ReconciliationRevision,
    RoutingDecision,
    RunReview,
)
from schemas.judge_output import JudgeOutput
from schemas.rubric import RubricVersion
from schemas.versions import ADDED_IN_2_0, HUMAN_REVIEW_VERSIONS, TELEMETRY_ADDED_IN_2_1

REFINEMENTS = (
    "Also enforced by judgeflow (JSON Schema cannot say it): integrity_adjusted_score <= overall_score; "
    "lane_key unique among lane_scores and dimension_key unique within a lane; completed_lane_keys lists "
    "exactly the lanes in lane_scores; judge_completed_at not before judge_started_at; no duplicate JSON keys "
    "and no U+0000 anywhere; once the rubric is known, lane and dimension keys belong to it. Timestamps are "
    "stored normalised to UTC. See docs/contract.md."
)

# What the refinements' str.strip() removes (str.isspace), spelled out: `\s` differs between ECMA-262 and Python.
SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NOT_BLANK = f"[^{SPACE}]"
"""A pattern (unanchored, as JSON Schema's are) for text that is not blank once stripped."""
STRIPPED_20 = f"[^{SPACE}][\\s\\S]{{18,}}[^{SPACE}]"
"""A pattern for text of 20 or more characters once stripped."""

_METRICS_2_0 = ("tool_call_count", "step_count", "error_rate", "total_tokens_used", "wall_time_seconds")
_METRICS_2_1 = (*_METRICS_2_0, "error_count")
_METRICS_DUE = ("tool_call_count", "step_count", "error_rate")  # unless telemetry says why it has none
_NOT_NULL: dict[str, Any] = {"not": {"type": "null"}}


def _when(field: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": [field], "properties": {field: schema}}


def _all_null(names: tuple[str, ...]) -> dict[str, Any]:
    return {"properties": {name: {"type": "null"} for name in names}}


# The refinements of JudgeOutput._refinements that hang on one field's value (a missing `status` is 1.0's
# "complete"): SIGNAL_REQUIRED and LANE_SCORES_REQUIRED, FAILURE_REASON_REQUIRED, LOW_CONFIDENCE_REASONING_REQUIRED.
JUDGE_OUTPUT_RULES: list[dict[str, Any]] = [
    {
        "if": _when("status", {"const": "failed"}),
        "else": {
            "properties": {"lane_scores": {"minItems": 1}, "positive_signal": _NOT_NULL, "primary_weakness": _NOT_NULL}
        },
    },
    {
        "if": _when("status", {"enum": ["failed", "partial"]}),
        "then": _when("failure_reason", {"type": "string", "pattern": NOT_BLANK}),
    },
    {
        "if": _when("confidence", {"const": "low"}),
        "then": {"properties": {"confidence_reasoning": {"pattern": STRIPPED_20}}},
    },
]
# TelemetrySummary (2.1): a reason and no metric, or the three due metrics (TELEMETRY_REASON_WITH_METRICS,
# TELEMETRY_INCOMPLETE).
TELEMETRY_RULE_2_1: dict[str, Any] = {
    "if": _when("telemetry_unavailable_reason", {"type": "string", "pattern": NOT_BLANK}),
    "then": _all_null(_METRICS_2_1),
    "else": {"properties": {name: _NOT_NULL for name in _METRICS_DUE}},
}
# Before 2.1 the reason is not sent: the upcaster gives one when none of the five metrics is reported.
TELEMETRY_RULE_2_0: dict[str, Any] = {
    "if": {"required": ["telemetry_unavailable_reason"]},
    "then": TELEMETRY_RULE_2_1,
    "else": {
        "if": _all_null(_METRICS_2_0),
        "then": _all_null(("error_count",)),
        "else": {"required": list(_METRICS_DUE), "properties": {name: _NOT_NULL for name in _METRICS_DUE}},
    },
}
# ClaimCheck: SCORE_REQUIRED.
CLAIM_CHECK_RULES: list[dict[str, Any]] = [
    {"if": _when("verdict", {"const": "unclear"}), "else": {"properties": {"score": _NOT_NULL}}},
]


def _schema(model: type[BaseModel], version: str) -> dict[str, Any]:
    doc = model.model_json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["properties"]["schema_version"] = {"type": "string", "const": version}
    return doc


def _added_later(doc: dict[str, Any], names: tuple[str, ...], version: str) -> None:
    """Fields a later version added: optional here, and read by their later rules when sent (the upcasters keep
    what was sent), so they stay described rather than becoming anything-goes extra fields."""
    for name in names:
        prop = doc.get("properties", {}).get(name)
        if prop is not None:
            prop["description"] = f"Added in {version}; optional before it, and read by its rules when sent."
    doc["required"] = [r for r in doc.get("required", []) if r not in names]


def _with_rules(doc: dict[str, Any], rules: list[dict[str, Any]]) -> None:
    doc["allOf"] = [*doc.get("allOf", []), *copy.deepcopy(rules)]


def judge_output_schemas() -> dict[str, dict[str, Any]]:
    current = _schema(JudgeOutput, "2.1")
    current["description"] = "Judge output contract 2.1 (seed 000). " + REFINEMENTS
    _with_rules(current, JUDGE_OUTPUT_RULES)
    v20 = copy.deepcopy(current)
    _with_rules(current["$defs"]["TelemetrySummary"], [TELEMETRY_RULE_2_1])
    v20["properties"]["schema_version"]["const"] = "2.0"
    _added_later(v20["$defs"]["TelemetrySummary"], TELEMETRY_ADDED_IN_2_1, "2.1")
    _with_rules(v20["$defs"]["TelemetrySummary"], [TELEMETRY_RULE_2_0])
    v20["description"] = "Judge output contract 2.0: telemetry without error_count and reason. " + REFINEMENTS
    v10 = copy.deepcopy(v20)
    v10["properties"]["schema_version"]["const"] = "1.0"
    _added_later(v10, ADDED_IN_2_0, "2.0")
    v10["required"] = [r for r in v10["required"] if r != "judge_completed_at"]  # optional in 1.0
    v10["description"] = "Judge output contract 1.0: no telemetry, adjustments, status or lanes list. " + REFINEMENTS
    return {"2.1": current, "2.0": v20, "1.0": v10}


def all_schemas() -> dict[str, dict[str, Any]]:
    files = {f"judge_output-{v}.json": s for v, s in judge_output_schemas().items()}
    for name, model, version in (
        ("claim_check", ClaimCheck, "1.0"),
        ("rubric_version", RubricVersion, "1.0"),
        ("evaluation_run_started", EvaluationRunStarted, "1.0"),
        ("human_review", HumanReview, HUMAN_REVIEW_VERSIONS.current),
        ("run_review", RunReview, "1.0"),
        ("invalid_event", InvalidEvent, "1.0"),
        ("reconciliation_revision", ReconciliationRevision, "1.0"),
        ("routing_decision", RoutingDecision, "1.0"),
    ):
        files[f"{name}-{version}.json"] = _schema(model, version)
    _with_rules(files["claim_check-1.0.json"], CLAIM_CHECK_RULES)
    return files


def export_json_schemas(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, doc in sorted(all_schemas().items()):
        path = directory / filename
        path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written
