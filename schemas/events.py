"""Orchestrator and review events, and the events judgeflow itself emits.

Every emitted event carries a deterministic `event_id` (uuid5 of its input
identity and step, DESIGN decision 9) so consumers drop redeliveries.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from schemas.base import Contract
from schemas.claim_check import Verdict
from schemas.judge_output import Score100
from schemas.rubric import AggregationMode, ReconciliationMethod, RoutingPolicy, TieRule
from schemas.types import Key, SchemaVersion, Timestamp, Uuid

NonEmpty = Annotated[str, Field(min_length=1)]


class EvaluationRunStarted(Contract):
    """An orchestrator opened a run: which judges to expect and how long to wait."""

    schema_version: SchemaVersion = "1.0"
    evaluation_run_id: Uuid
    submission_id: Uuid
    rubric_version_id: Uuid
    # uniqueItems: JSON Schema says DUPLICATE_JUDGE_MODEL itself.
    expected_judge_models: Annotated[
        list[Annotated[str, Field(min_length=3)]], Field(min_length=1, json_schema_extra={"uniqueItems": True})
    ]
    judge_timeout_seconds: Annotated[float, Field(ge=0.001, le=9_999_999.999)]
    """A millisecond to about 115 days: its column is NUMERIC(10,3), where less than half a millisecond is 0."""
    started_at: Timestamp

    @model_validator(mode="after")
    def _unique_judges(self) -> EvaluationRunStarted:
        if len(set(self.expected_judge_models)) != len(self.expected_judge_models):
            raise PydanticCustomError("DUPLICATE_JUDGE_MODEL", "a judge model is expected twice")
        return self


ReviewSource = Literal["routed", "audit", "overlap"]
"""Why a claim reached a person: the policy routed it to human review, the audit sample of claims routed `done`,
or a second, blind review of an item to measure agreement between people."""


class HumanReview(Contract):
    """A reviewer's final verdict on a claim (seed 003's `reviews`).

    1.1 adds, all optional (a 1.0 review is read with them null): how long the review took, the verdict the
    reviewer chose before the judges' verdicts were shown (`blind_verdict`), why the claim reached a person
    (`source`) and the desk's lease it was made under (`lease_id`)."""

    schema_version: SchemaVersion = "1.1"
    review_id: Uuid
    claim_id: NonEmpty
    reviewer: NonEmpty
    final_verdict: Verdict
    notes: str | None = None
    created_at: Timestamp
    review_seconds: Annotated[float, Field(ge=0, le=86_400)] | None = None
    blind_verdict: Verdict | None = None
    source: ReviewSource | None = None
    lease_id: Uuid | None = None


LaneScores = Annotated[dict[Key, Score100], Field(min_length=1)]


class RunReview(Contract):
    """A reviewer's accepted final scores for an evaluation run routed to human review: per lane and overall.

    Published to `reviews` beside the claims' `HumanReview`s, keyed by the run id; a `reviews` record that
    names an `evaluation_run_id` is a run review. `blind_*` are the scores the reviewer gave before the judges'
    scores were shown; `source` is always `routed` (runs have no audit sample)."""

    schema_version: SchemaVersion = "1.0"
    review_id: Uuid
    evaluation_run_id: Uuid
    reviewer: NonEmpty
    lane_scores: LaneScores
    final_overall_score: Score100
    notes: str | None = None
    created_at: Timestamp
    review_seconds: Annotated[float, Field(ge=0, le=86_400)] | None = None
    blind_lane_scores: LaneScores | None = None
    blind_overall_score: Score100 | None = None
    source: Literal["routed"] | None = None
    lease_id: Uuid | None = None


class InvalidEvent(Contract):
    """A dead-letter record: the original bytes (base64), where they came
    from, and why they were refused. Nothing is lost."""

    schema_version: SchemaVersion = "1.0"
    event_id: Uuid
    contract: Literal["judge_output", "claim_check", "evaluation_run", "rubric", "review"]
    source_topic: str
    source_partition: int
    source_offset: int
    source_key_b64: str | None
    original_b64: str
    original_size: int
    original_sha256: str
    original_truncated: bool = False
    error_codes: Annotated[list[str], Field(min_length=1)]
    errors: list[dict[str, Any]]
    received_at: Timestamp


class ContradictionScore(Contract):
    judge_model: str
    score: int


class ContradictionDetail(Contract):
    lane_key: str
    scores: list[ContradictionScore]
    spread: int


class ReconciliationResult(Contract):
    """Seed 000's ReconciliationResult in snake_case, plus what users need to
    read a partial panel: which judges are missing and a notice."""

    final_overall_score: int
    final_adjusted_score: int
    judge_count: int
    successful_judge_count: int
    has_contradictions: bool
    contradiction_details: list[ContradictionDetail]
    lane_scores_by_judge: dict[str, dict[str, int]]
    reconciled_lane_scores: dict[str, int]
    method: ReconciliationMethod
    weighted_final_score: float | None = None
    missing_judges: list[str] = Field(default_factory=list)
    failed_judges: list[str] = Field(default_factory=list)
    notice: str | None = None


class ReconciliationRevision(Contract):
    """One revision of a run's reconciled score on `evaluation.reconciled`."""

    schema_version: SchemaVersion = "1.0"
    event_id: Uuid
    evaluation_run_id: Uuid
    submission_id: Uuid
    rubric_version_id: Uuid
    revision: Annotated[int, Field(ge=1)]
    status: Literal["provisional", "final"]
    final_reason: Literal["all_judges_in", "timeout"] | None = None
    judge_run_ids: list[str]
    expected_judge_models: list[str]
    result: ReconciliationResult
    emitted_at: Timestamp


class RoutingDecision(Contract):
    """Where a claim (or a whole evaluation run) goes next, and why."""

    schema_version: SchemaVersion = "1.0"
    event_id: Uuid
    subject: Literal["claim", "evaluation"]
    claim_id: str | None = None
    evaluation_run_id: str | None = None
    route: Literal["done", "second_judge", "human_review"]
    reason: str
    verdict: Verdict | None = None
    score: float | None = None
    confidence: float | None = None
    judge_ids: list[str] = Field(default_factory=list)
    input_ids: list[str] = Field(default_factory=list)
    policy: RoutingPolicy | None = None
    aggregation_mode: AggregationMode | None = None
    tie_rule: TieRule | None = None
    agreement: float | None = None
    decided_at: Timestamp


class StaleWorkAlert(Contract):
    """Work that is not moving: a run not final by its deadline + grace, or events held waiting for a rubric
    or run longer than the hold grace. An alert, never a routing decision: a run that completes later still
    gets exactly one decision. One alert per (kind, subject): `event_id` is uuid5 of both."""

    schema_version: SchemaVersion = "1.0"
    event_id: Uuid
    kind: Literal["run_overdue", "held_too_long"]
    subject: Literal["evaluation_run", "claim"]
    subject_id: NonEmpty
    waiting_for: Literal["run", "rubric", "judges"] | None = None
    rubric_version_id: str | None = None
    held_events: int = Field(ge=0)
    first_seen_at: Timestamp
    deadline: Timestamp | None = None
    reason: NonEmpty
    raised_at: Timestamp
