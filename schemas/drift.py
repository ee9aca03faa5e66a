"""A judge's drift alert: one statistic of one window that moved away from its trailing baseline.

Published on `judge.alerts` by the worker's drift stage (`streams.drift`). `event_id` is uuid5 of judge, source,
statistic, lane and window, so a redelivered or replayed alert repeats it and the projector adds nothing.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.base import Contract
from schemas.types import SchemaVersion, Timestamp, Uuid

NonEmpty = Annotated[str, Field(min_length=1)]
Statistic = Literal["mean_score", "fail_rate", "contradiction_rate", "low_confidence_share", "lane_mean_score",
                    "failure_rate", "timeout_rate"]  # fmt: skip


class JudgeDriftAlert(Contract):
    """The evidence of one drift finding: the window's value and size, the baseline it was tested against, the
    test statistic and the thresholds it passed. Scores and rates are on the 0-1 scale (lane scores / 100)."""

    schema_version: SchemaVersion = "1.0"
    event_id: Uuid
    judge: NonEmpty
    source: Literal["claim_check", "judge_output"]
    statistic: Statistic
    lane: str | None = None
    window_seconds: int = Field(gt=0)
    window_start: Timestamp
    window_end: Timestamp
    value: float
    n: int = Field(ge=1)
    baseline_mean: float
    baseline_sd: float = Field(ge=0)
    baseline_windows: int = Field(ge=1)
    baseline_n: int = Field(ge=1)
    z: float
    z_threshold: float = Field(gt=0)
    min_delta: float = Field(ge=0)
    direction: Literal["up", "down"]
    raised_at: Timestamp
