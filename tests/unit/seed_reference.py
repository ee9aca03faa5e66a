"""A literal port of seed 000's reconcileJudgeOutputs (TypeScript) over plain
dicts, as the independent reference `streams.reconcile` is tested against."""

from __future__ import annotations

import math
from typing import Any


def Math_round(x: float) -> int:  # noqa: N802 - named after the JS function it ports
    # ECMAScript: the Number value closest to x that is an integer; ties toward +Infinity.
    f = math.floor(x)
    return f + 1 if x - f >= 0.5 else f


def reconcile_judge_outputs(outputs: list[dict[str, Any]], method: str = "mean") -> dict[str, Any]:
    successful = [o for o in outputs if o["status"] != "failed"]
    if len(successful) == 0:
        raise ValueError("Cannot reconcile: no successful judge outputs")
    lane_scores_by_judge: dict[str, dict[str, int]] = {}
    for output in successful:
        lane_scores_by_judge[output["judge_model"]] = {}
        for lane in output["lane_scores"]:
            lane_scores_by_judge[output["judge_model"]][lane["lane_key"]] = lane["lane_score"]
    all_lane_keys: list[str] = []
    for o in successful:
        for lane in o["lane_scores"]:
            if lane["lane_key"] not in all_lane_keys:
                all_lane_keys.append(lane["lane_key"])
    contradiction_details = []
    reconciled: dict[str, int] = {}
    for lane_key in all_lane_keys:
        scores = [
            {"judgeModel": o["judge_model"], "score": lane_scores_by_judge[o["judge_model"]][lane_key]}
            for o in successful
            if lane_scores_by_judge[o["judge_model"]].get(lane_key) is not None
        ]
        if len(scores) == 0:
            continue
        values = [s["score"] for s in scores]
        spread = max(values) - min(values)
        if spread > 25:
            contradiction_details.append({"laneKey": lane_key, "scores": scores, "spread": spread})
        if method == "mean":
            reconciled[lane_key] = Math_round(sum(values) / len(values))
        elif method == "median":
            s = sorted(values)
            mid = len(s) // 2
            reconciled[lane_key] = s[mid] if len(s) % 2 != 0 else Math_round((s[mid - 1] + s[mid]) / 2)
        else:
            weights = {"high": 1.0, "medium": 0.7, "low": 0.4}
            judge_conf = {o["judge_model"]: weights.get(o["confidence"], 0.7) for o in successful}
            weighted_sum = 0.0
            total_weight = 0.0
            for s in scores:
                w = judge_conf.get(s["judgeModel"], 0.7)
                weighted_sum += s["score"] * w
                total_weight += w
            reconciled[lane_key] = Math_round(weighted_sum / total_weight)
    lane_values = list(reconciled.values())
    final = Math_round(sum(lane_values) / len(lane_values))
    worst = 0
    for o in successful:
        total = sum(a["deduction"] for a in o["integrity_adjustments"])
        worst = min(worst, total)
    return {
        "finalOverallScore": final,
        "finalAdjustedScore": max(0, final + worst),
        "judgeCount": len(outputs),
        "successfulJudgeCount": len(successful),
        "hasContradictions": len(contradiction_details) > 0,
        "contradictionDetails": contradiction_details,
        "laneScoresByJudge": lane_scores_by_judge,
        "reconciledLaneScores": reconciled,
        "method": method,
    }
