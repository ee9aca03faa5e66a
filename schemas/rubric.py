"""Rubric versions: lanes, dimension weights, bands and the routing policy.

Published compacted on `judge.rubrics`, keyed by rubric_version_id. A rubric
is the place where a team overrides routing thresholds and declares the
second-judge aggregation mode and tie rule before a batch runs.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from schemas.base import Contract
from schemas.types import IntegralFloat, Key, SchemaVersion, Timestamp, Uuid

CURRENT_VERSION = "1.0"

AggregationMode = Literal["majority", "weighted", "unanimous", "any_vote"]
TieRule = Literal["unclear", "fail", "pass", "first_judge"]
ReconciliationMethod = Literal["mean", "median", "weighted_judge_confidence"]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]
Weight = Annotated[float, Field(gt=0.0)]


class RoutingPolicy(Contract):
    """Seed 003's thresholds plus DESIGN decision 5's spot sample of
    confident failures. `spot_sample_rate=1.0` is the seed's literal code."""

    pass_score: Unit = 0.80
    floor: Unit = 0.60
    border: Unit = 0.45
    spot_sample_rate: Unit = 0.10

    @model_validator(mode="after")
    def _ordered(self) -> RoutingPolicy:
        if not self.border <= self.pass_score:
            raise PydanticCustomError("POLICY_THRESHOLDS_UNORDERED", "border must be <= pass_score")
        return self


class DimensionSpec(Contract):
    dimension_key: Key
    weight: Weight = 1.0
    description: str | None = None


class LaneSpec(Contract):
    lane_key: Key
    weight: Weight = 1.0
    dimensions: Annotated[list[DimensionSpec], Field(min_length=1)]

    def dimension_weights(self) -> dict[str, float]:
        return {d.dimension_key: d.weight for d in self.dimensions}


class ScoreBand(Contract):
    label: Annotated[str, Field(min_length=1)]
    min_score: Annotated[int, Field(ge=0, le=100), IntegralFloat]
    max_score: Annotated[int, Field(ge=0, le=100), IntegralFloat]


class ScoreRange(Contract):
    """The scores a rubric's claim checks may give, inside the contract's [0, 1] (seed 003's fixed scale)."""

    min: Unit = 0.0
    max: Unit = 1.0

    @model_validator(mode="after")
    def _ordered(self) -> ScoreRange:
        if self.min > self.max:
            raise PydanticCustomError("CLAIM_SCORE_RANGE_INVERTED", "claim_score_range.min must be <= max")
        return self

    def __contains__(self, score: float) -> bool:
        return self.min <= score <= self.max


class RubricVersion(Contract):
    """A rubric version. Also enforced by judgeflow: lane and dimension keys are unique; claim_score_range has
    min <= max; routing.border <= routing.pass_score, and pass_score, floor and border lie inside
    claim_score_range."""

    schema_version: SchemaVersion = CURRENT_VERSION
    rubric_version_id: Uuid
    name: Annotated[str, Field(min_length=1)]
    lanes: Annotated[list[LaneSpec], Field(min_length=1)]
    bands: list[ScoreBand] = Field(default_factory=list)
    claim_score_range: ScoreRange = ScoreRange()
    routing: RoutingPolicy = RoutingPolicy()
    aggregation_mode: AggregationMode = "majority"
    tie_rule: TieRule = "unclear"
    reconciliation_method: ReconciliationMethod = "mean"
    created_at: Timestamp | None = None

    @model_validator(mode="after")
    def _unique_keys(self) -> RubricVersion:
        lane_keys = [lane.lane_key for lane in self.lanes]
        if len(lane_keys) != len(set(lane_keys)):
            raise PydanticCustomError("DUPLICATE_LANE_KEY", "a lane_key appears twice")
        for lane in self.lanes:
            dims = [d.dimension_key for d in lane.dimensions]
            if len(dims) != len(set(dims)):
                raise PydanticCustomError("DUPLICATE_DIMENSION_KEY", f"lane {lane.lane_key} repeats a dimension_key")
        return self

    @model_validator(mode="after")
    def _thresholds_in_range(self) -> RubricVersion:
        """A threshold outside the range its claim scores can take would route every claim one way."""
        r, policy = self.claim_score_range, self.routing
        outside = [f"{name}={value:g}" for name, value in
                   (("pass_score", policy.pass_score), ("floor", policy.floor), ("border", policy.border))
                   if value not in r]  # fmt: skip
        if outside:
            raise PydanticCustomError(
                "POLICY_THRESHOLD_OUTSIDE_RANGE",
                f"routing thresholds {', '.join(outside)} outside claim_score_range [{r.min:g}, {r.max:g}]",
            )
        return self

    def lane(self, lane_key: str) -> LaneSpec | None:
        return next((lane for lane in self.lanes if lane.lane_key == lane_key), None)
