"""What reconciliation and evaluation routing read of one judge's output, and nothing more.

A run's state keeps these instead of whole `JudgeOutput` documents: ~130 bytes per judge rather than
~5 KB, and nothing to re-validate when the state is read back. Stored under the short keys of `STORED_KEYS`, defaults
left out; the field names are read too (states stored before the compact format have them).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from schemas import JudgeOutput

STORED_KEYS = {
    "judge_run_id": "id",
    "judge_model": "model",
    "confidence": "conf",
    "total_deduction": "deduct",
    "auto_disqualify": "dq",
    "failure_reason": "reason",
}
"""Field -> key in stored state, where the two differ."""


TIMEOUT_MARK = "timeout:"
"""How a timeout stub's failure_reason begins (the worker writes one for each judge that missed the timeout)."""


class JudgeSummary(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        alias_generator=lambda name: STORED_KEYS.get(name, name),
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    judge_run_id: str
    judge_model: str
    status: str = "complete"
    lanes: dict[str, int]
    """lane_key -> lane_score, in the output's lane order (the seed's lane order follows it)."""
    confidence: str
    total_deduction: int = 0
    auto_disqualify: bool = False
    critical: bool = False
    failure_reason: str | None = None


def summarize(output: JudgeOutput) -> JudgeSummary:
    return JudgeSummary(
        judge_run_id=output.judge_run_id,
        judge_model=output.judge_model,
        status=output.status,
        lanes={lane.lane_key: lane.lane_score for lane in output.lane_scores},
        confidence=output.confidence,
        total_deduction=output.total_deduction,
        auto_disqualify=any(f.auto_disqualify for f in output.flags),
        critical=any(f.severity == "critical" for f in output.flags),
        failure_reason=output.failure_reason,
    )
