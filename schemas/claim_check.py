"""One judge's verdict on one claim (seed 003)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from schemas.base import Contract
from schemas.types import SchemaVersion, Timestamp, Uuid

CURRENT_VERSION = "1.0"

Verdict = Literal["pass", "fail", "unclear"]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]
NonEmpty = Annotated[str, Field(min_length=1)]


class ClaimCheck(Contract):
    """Identity is (claim_id, judge_id). `verdict` stays categorical; `score`
    (0..1, fixed per rubric) is for thresholds. A judge that cannot assess
    says `unclear` and may leave `score` null. Once its rubric is known, `score` must lie inside the
    rubric's `claim_score_range` (CLAIM_SCORE_OUT_OF_RANGE)."""

    schema_version: SchemaVersion
    claim_id: NonEmpty
    judge_id: NonEmpty
    source_id: NonEmpty
    verdict: Verdict
    score: Unit | None
    confidence: Unit
    reason: NonEmpty
    passage_quote: str | None
    passage: str
    claim_text: NonEmpty
    rubric_version_id: Uuid | None = None
    checked_at: Timestamp | None = None

    @model_validator(mode="after")
    def _score_needed(self) -> ClaimCheck:
        if self.score is None and self.verdict != "unclear":
            raise PydanticCustomError("SCORE_REQUIRED", "score may be null only when verdict is unclear")
        return self
