"""Multi-judge reconciliation: seed 000's reconcileJudgeOutputs, exactly.

Failed judges are excluded; every lane any successful judge scored is
reconciled by mean, median or confidence weight (1.0 / 0.7 / 0.4), rounding
half up like JavaScript; a lane whose scores spread more than 25 points is a
contradiction; the final score is the (unweighted) mean of reconciled lanes
and the adjusted score adds the worst judge's total deduction, floored at 0.

Beside the seed's fields: a rubric-weighted final score, the judges that
are missing (not in yet) or failed, and a notice that counts only the judges
that failed or timed out, by name: "1 judge unavailable: gpt-4o timed out"
(seed 000 #10). A judge that is merely not in yet is no failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from schemas import ContradictionDetail, JudgeOutput, ReconciliationResult, RubricVersion
from schemas.events import ContradictionScore
from schemas.rubric import ReconciliationMethod
from streams.judge_summary import TIMEOUT_MARK, JudgeSummary, summarize
from streams.rounding import js_round

CONTRADICTION_SPREAD = 25
CONFIDENCE_WEIGHTS = {"high": 1.0, "medium": 0.7, "low": 0.4}

__all__ = ["CONTRADICTION_SPREAD", "NoSuccessfulJudge", "ReconciliationResult", "reconcile", "reconcile_summaries"]


class NoSuccessfulJudge(ValueError):
    """Cannot reconcile: no successful judge output."""


def _lane_value(values: list[int], judges: list[str], method: str, weight_of: dict[str, float]) -> int:
    if method == "mean":
        return js_round(sum(values) / len(values))
    if method == "median":
        ordered = sorted(values)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else js_round((ordered[mid - 1] + ordered[mid]) / 2)
    weighted_sum = total = 0.0
    for judge, score in zip(judges, values, strict=True):
        w = weight_of.get(judge, 0.7)
        weighted_sum += score * w
        total += w
    return js_round(weighted_sum / total)


def reconcile(
    outputs: Sequence[JudgeOutput],
    method: ReconciliationMethod = "mean",
    *,
    expected_judges: Iterable[str] = (),
    rubric: RubricVersion | None = None,
) -> ReconciliationResult:
    """Seed 000's reconciliation of whole judge outputs (DESIGN's public API)."""
    return reconcile_summaries([summarize(o) for o in outputs], method, expected_judges=expected_judges, rubric=rubric)


def reconcile_summaries(
    outputs: Sequence[JudgeSummary],
    method: ReconciliationMethod = "mean",
    *,
    expected_judges: Iterable[str] = (),
    rubric: RubricVersion | None = None,
) -> ReconciliationResult:
    """The same rule over the compact records a run's state keeps."""
    if method not in ("mean", "median", "weighted_judge_confidence"):
        raise ValueError(f"unknown reconciliation method {method!r}")
    successful = [o for o in outputs if o.status != "failed"]
    if not successful:
        raise NoSuccessfulJudge("Cannot reconcile: no successful judge outputs")

    by_judge: dict[str, dict[str, int]] = {}
    for o in successful:
        by_judge[o.judge_model] = dict(o.lanes)
    lane_keys = list(dict.fromkeys(key for o in successful for key in o.lanes))
    weight_of = {o.judge_model: CONFIDENCE_WEIGHTS.get(o.confidence, 0.7) for o in successful}

    contradictions: list[ContradictionDetail] = []
    reconciled: dict[str, int] = {}
    for lane_key in lane_keys:
        # As in the seed: one entry per successful output, read through its judge's map.
        pairs = [
            (o.judge_model, by_judge[o.judge_model][lane_key])
            for o in successful
            if lane_key in by_judge[o.judge_model]
        ]
        if not pairs:
            continue
        judges = [j for j, _ in pairs]
        values = [s for _, s in pairs]
        spread = max(values) - min(values)
        if spread > CONTRADICTION_SPREAD:
            contradictions.append(
                ContradictionDetail(
                    lane_key=lane_key,
                    scores=[ContradictionScore(judge_model=j, score=s) for j, s in pairs],
                    spread=spread,
                )
            )
        reconciled[lane_key] = _lane_value(values, judges, method, weight_of)

    final = js_round(sum(reconciled.values()) / len(reconciled))
    worst = min([0, *(o.total_deduction for o in successful)])
    expected = list(dict.fromkeys(expected_judges))
    present = {o.judge_model for o in outputs}
    missing = [j for j in expected if j not in present]
    failed = list(dict.fromkeys(o.judge_model for o in outputs if o.status == "failed"))
    unavailable: dict[str, str] = {}
    for o in outputs:
        if o.status == "failed" and o.judge_model not in by_judge:
            timed_out = (o.failure_reason or "").startswith(TIMEOUT_MARK)
            unavailable.setdefault(o.judge_model, "timed out" if timed_out else "failed")
    return ReconciliationResult(
        final_overall_score=final,
        final_adjusted_score=max(0, final + worst),
        judge_count=len(outputs),
        successful_judge_count=len(successful),
        has_contradictions=bool(contradictions),
        contradiction_details=contradictions,
        lane_scores_by_judge=by_judge,
        reconciled_lane_scores=reconciled,
        method=method,
        weighted_final_score=_weighted_final(reconciled, rubric),
        missing_judges=missing,
        failed_judges=failed,
        notice=_notice(unavailable),
    )


def _weighted_final(reconciled: dict[str, int], rubric: RubricVersion | None) -> float | None:
    """The rubric-weighted mean of reconciled lanes (the seed leaves weights to the caller)."""
    if rubric is None:
        return None
    weights = {lane.lane_key: lane.weight for lane in rubric.lanes}
    total = sum(weights.get(k, 0.0) for k in reconciled)
    if total <= 0:
        return None
    return round(sum(v * weights.get(k, 0.0) for k, v in reconciled.items()) / total, 2)


def _notice(unavailable: dict[str, str]) -> str | None:
    """E.g. "2 judges unavailable: gpt-4o timed out, gemini-1.5-pro failed"; None when every judge that is in
    succeeded (pending judges are listed in `missing_judges`, not here)."""
    if not unavailable:
        return None
    n = len(unavailable)
    named = ", ".join(f"{judge} {what}" for judge, what in unavailable.items())
    return f"{n} judge{'s' if n > 1 else ''} unavailable: {named}"
