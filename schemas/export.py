"""JSON Schema for every contract and version, for producers in other languages.

Cross-field refinements (low confidence needs reasoning, adjusted <= overall,
failed needs failure_reason, ...) cannot be said in JSON Schema; each file's
description lists them, and `parse_*` remains the authority.
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
)
from schemas.judge_output import JudgeOutput
from schemas.rubric import RubricVersion
from schemas.versions import ADDED_IN_2_0, TELEMETRY_ADDED_IN_2_1

REFINEMENTS = (
    "Also enforced by judgeflow (not expressible here): confidence 'low' needs "
    "confidence_reasoning of >= 20 chars; integrity_adjusted_score <= overall_score; "
    "failed and partial outputs need failure_reason; a failed output may have empty "
    "lane_scores and null signals, others need both; completed_lane_keys lists exactly "
    "the lanes in lane_scores; lane and dimension keys are unique and, when the rubric "
    "is known, belong to it; telemetry metrics are present or all null with "
    "telemetry_unavailable_reason."
)

_NOT_IN_1_0 = (
    "telemetry_summary",
    "integrity_adjustments",
    "integrity_adjusted_score",
    "status",
    "failure_reason",
    "completed_lane_keys",
)
_TELEMETRY_NOT_IN_2_0 = ("error_count", "telemetry_unavailable_reason")


def _schema(model: type[BaseModel], version: str) -> dict[str, Any]:
    doc = model.model_json_schema()
    doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    doc["properties"]["schema_version"] = {"type": "string", "const": version}
    return doc


def _drop(doc: dict[str, Any], names: tuple[str, ...]) -> None:
    for name in names:
        doc.get("properties", {}).pop(name, None)
    doc["required"] = [r for r in doc.get("required", []) if r not in names]


def judge_output_schemas() -> dict[str, dict[str, Any]]:
    current = _schema(JudgeOutput, "2.1")
    current["description"] = "Judge output contract 2.1 (seed 000). " + REFINEMENTS
    v20 = copy.deepcopy(current)
    v20["properties"]["schema_version"]["const"] = "2.0"
    _drop(v20["$defs"]["TelemetrySummary"], TELEMETRY_ADDED_IN_2_1)
    v20["description"] = "Judge output contract 2.0: telemetry without error_count and reason."
    v10 = copy.deepcopy(current)
    v10["properties"]["schema_version"]["const"] = "1.0"
    _drop(v10, ADDED_IN_2_0)
    v10["required"] = [r for r in v10["required"] if r != "judge_completed_at"]  # optional in 1.0
    v10["description"] = "Judge output contract 1.0: no telemetry, adjustments, status or lanes list."
    return {"2.1": current, "2.0": v20, "1.0": v10}


def all_schemas() -> dict[str, dict[str, Any]]:
    files = {f"judge_output-{v}.json": s for v, s in judge_output_schemas().items()}
    for name, model in (
        ("claim_check", ClaimCheck),
        ("rubric_version", RubricVersion),
        ("evaluation_run_started", EvaluationRunStarted),
        ("human_review", HumanReview),
        ("invalid_event", InvalidEvent),
        ("reconciliation_revision", ReconciliationRevision),
        ("routing_decision", RoutingDecision),
    ):
        files[f"{name}-1.0.json"] = _schema(model, "1.0")
    return files


def export_json_schemas(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, doc in sorted(all_schemas().items()):
        path = directory / filename
        path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written
