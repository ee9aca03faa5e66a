"""The judge output contract, version 2.1 (seed 000), with DESIGN decision 1.

Older versions are upcast to this shape in `schemas.versions` before they are
validated here, so this module only knows the current contract.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from schemas.base import Contract
from schemas.types import FlagCode, IntegralFloat, Key, SchemaVersion, Timestamp, Uuid, parse_timestamp

CURRENT_VERSION = "2.1"

EvidenceType = Literal["transcript_line", "tool_call", "diff_hunk", "test_result", "code_artifact", "error_event"]
Confidence = Literal["high", "medium", "low"]
Status = Literal["complete", "partial", "failed"]
Severity = Literal["info", "warning", "critical"]
# Integral floats (70.0, 7e1) are these integers, as JSON Schema's `integer` says; 70.5 is not.
Score100 = Annotated[int, Field(ge=0, le=100), IntegralFloat]
INT4_MAX = 2_147_483_647
"""The largest count Postgres's INTEGER columns hold: what the contract accepts, Postgres stores."""
Count = Annotated[int, Field(ge=0, le=INT4_MAX), IntegralFloat]


class EvidenceRef(Contract):
    """A structured pointer into the submission, never a prose blob (checklist 2)."""

    type: EvidenceType
    id: Annotated[str, Field(min_length=1)]
    location: str | None = None
    excerpt: Annotated[str, Field(max_length=300)] | None = None


class IntegrityAdjustment(Contract):
    """A deduction in -50..0 that must cite evidence (checklist 6)."""

    flag_code: FlagCode
    description: Annotated[str, Field(min_length=10)]
    deduction: Annotated[int, Field(ge=-50, le=0), IntegralFloat]
    evidence_refs: Annotated[list[EvidenceRef], Field(min_length=1)]


class Flag(Contract):
    """A machine-readable flag (checklist 9)."""

    flag_code: FlagCode
    severity: Severity
    description: Annotated[str, Field(min_length=5)]
    evidence_refs: list[EvidenceRef] | None = None
    auto_disqualify: bool = False


class DimensionScore(Contract):
    dimension_key: Key
    score: Score100
    reasoning: Annotated[str, Field(min_length=20)]
    evidence_refs: Annotated[list[EvidenceRef], Field(max_length=10)]
    band_label: str


class LaneScore(Contract):
    lane_key: Key
    lane_score: Score100
    dimension_scores: Annotated[list[DimensionScore], Field(min_length=1)]

    @model_validator(mode="after")
    def _unique_dimensions(self) -> LaneScore:
        if len({d.dimension_key for d in self.dimension_scores}) != len(self.dimension_scores):
            raise PydanticCustomError("DUPLICATE_DIMENSION_KEY", "a dimension_key appears twice in one lane")
        return self


class TelemetrySummary(Contract):
    """Metrics, or all null with a reason (checklist 8)."""

    tool_call_count: Count | None
    step_count: Count | None
    error_count: Count | None
    error_rate: Annotated[float, Field(ge=0, le=1)] | None
    total_tokens_used: Count | None
    wall_time_seconds: Annotated[float, Field(ge=0, le=99_999_999.99)] | None  # its column is NUMERIC(10,2)
    telemetry_unavailable_reason: str | None

    @model_validator(mode="after")
    def _present_or_explained(self) -> TelemetrySummary:
        metrics = (
            self.tool_call_count,
            self.step_count,
            self.error_count,
            self.error_rate,
            self.total_tokens_used,
            self.wall_time_seconds,
        )
        reason = (self.telemetry_unavailable_reason or "").strip()
        if reason:
            if any(m is not None for m in metrics):
                raise PydanticCustomError(
                    "TELEMETRY_REASON_WITH_METRICS",
                    "telemetry_unavailable_reason is set, so every metric must be null",
                )
        elif None in (self.tool_call_count, self.step_count, self.error_rate):
            raise PydanticCustomError(
                "TELEMETRY_INCOMPLETE",
                "tool_call_count, step_count and error_rate must be non-null, "
                "or every metric null with telemetry_unavailable_reason",
            )
        return self

    @property
    def available(self) -> bool:
        return not (self.telemetry_unavailable_reason or "").strip()


Signal = Annotated[str, Field(min_length=20, max_length=500)]


class JudgeOutput(Contract):
    """One judge's complete verdict on one submission (seed 000, v2.1)."""

    schema_version: SchemaVersion
    judge_model: Annotated[str, Field(min_length=3)]
    judge_run_id: Uuid
    evaluation_run_id: Uuid
    submission_id: Uuid
    rubric_version_id: Uuid

    overall_score: Score100
    lane_scores: list[LaneScore]

    positive_signal: Signal | None
    primary_weakness: Signal | None

    confidence: Confidence
    confidence_reasoning: str

    flags: list[Flag] = Field(default_factory=list)
    integrity_adjustments: list[IntegrityAdjustment] = Field(default_factory=list)
    integrity_adjusted_score: Score100

    telemetry_summary: TelemetrySummary

    status: Status
    failure_reason: str | None
    completed_lane_keys: list[str]

    judge_started_at: Timestamp
    judge_completed_at: Timestamp | None

    @model_validator(mode="after")
    def _refinements(self) -> JudgeOutput:
        # Seed refinements, then DESIGN decision 1 for failed / partial outputs.
        if self.confidence == "low" and len(self.confidence_reasoning.strip()) < 20:
            raise PydanticCustomError(
                "LOW_CONFIDENCE_REASONING_REQUIRED",
                "confidence_reasoning must be substantive (>= 20 chars) when confidence is low",
            )
        if self.integrity_adjusted_score > self.overall_score:
            raise PydanticCustomError(
                "ADJUSTED_EXCEEDS_OVERALL", "integrity_adjusted_score cannot exceed overall_score"
            )
        if self.status in ("failed", "partial") and not (self.failure_reason or "").strip():
            raise PydanticCustomError("FAILURE_REASON_REQUIRED", f"{self.status} outputs must include failure_reason")
        if self.status != "failed":
            if not self.lane_scores:
                raise PydanticCustomError(
                    "LANE_SCORES_REQUIRED", "a complete or partial output needs at least one lane"
                )
            if self.positive_signal is None or self.primary_weakness is None:
                raise PydanticCustomError(
                    "SIGNAL_REQUIRED",
                    "positive_signal and primary_weakness may be null only when status is failed",
                )
        lane_keys = {lane.lane_key for lane in self.lane_scores}
        if len(lane_keys) != len(self.lane_scores):
            raise PydanticCustomError("DUPLICATE_LANE_KEY", "a lane_key appears twice")
        completed = set(self.completed_lane_keys)
        if len(completed) != len(self.completed_lane_keys) or completed != lane_keys:
            raise PydanticCustomError(
                "COMPLETED_LANES_MISMATCH",
                "completed_lane_keys must list exactly the lanes present in lane_scores",
            )
        if self.judge_completed_at is not None and parse_timestamp(self.judge_completed_at) < parse_timestamp(
            self.judge_started_at
        ):
            raise PydanticCustomError("TIMESTAMPS_OUT_OF_ORDER", "judge_completed_at is before judge_started_at")
        return self

    @property
    def total_deduction(self) -> int:
        return sum(adj.deduction for adj in self.integrity_adjustments)

    @property
    def succeeded(self) -> bool:
        return self.status != "failed"
