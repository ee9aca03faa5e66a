"""Warnings that never reject an event: they are stored and shown.

* lane score vs the (rubric-weighted) mean of its dimensions (checklist 7,
  DESIGN decision 2);
* specificity of `positive_signal` / `primary_weakness` (checklist 12): a
  signal should name a concrete thing the submission did, not a generic
  phrase or a restated score;
* partial outputs are flagged with the lanes they did and did not score.
"""

from __future__ import annotations

from schemas.errors import ContractWarning
from schemas.judge_output import JudgeOutput, LaneScore
from schemas.rubric import RubricVersion
from schemas.specificity import signal_codes

WEIGHTED_TOLERANCE = 1.0
UNWEIGHTED_TOLERANCE = 10.0


def lane_warnings(output: JudgeOutput, rubric: RubricVersion | None = None) -> list[ContractWarning]:
    found: list[ContractWarning] = []
    for i, lane in enumerate(output.lane_scores):
        spec = rubric.lane(lane.lane_key) if rubric else None
        if spec is not None:
            weights = spec.dimension_weights()
            mean = _weighted_mean(lane, weights)
            tolerance, how = WEIGHTED_TOLERANCE, "weighted dimension mean"
        elif len(lane.dimension_scores) > 1:
            mean = sum(d.score for d in lane.dimension_scores) / len(lane.dimension_scores)
            tolerance, how = UNWEIGHTED_TOLERANCE, "unweighted dimension mean"
        else:
            continue
        if abs(mean - lane.lane_score) > tolerance:
            found.append(
                ContractWarning(
                    "LANE_SCORE_DIVERGES",
                    ("lane_scores", i, "lane_score"),
                    f"lane {lane.lane_key}: lane_score {lane.lane_score} diverges more than "
                    f"{tolerance:g} from the {how} {mean:.2f}",
                )
            )
    return found


def _weighted_mean(lane: LaneScore, weights: dict[str, float]) -> float:
    total = sum(weights.get(d.dimension_key, 0.0) for d in lane.dimension_scores)
    if total <= 0:
        return sum(d.score for d in lane.dimension_scores) / len(lane.dimension_scores)
    return sum(d.score * weights.get(d.dimension_key, 0.0) for d in lane.dimension_scores) / total


_MESSAGES = {
    "GENERIC_SIGNAL": "uses a stock phrase and names nothing concrete",
    "SIGNAL_RESTATES_SCORE": "restates a score instead of saying what happened",
    "SIGNAL_NOT_CONCRETE": "names no concrete observation (no line, count, identifier, quote or artefact)",
}


def specificity_warnings(output: JudgeOutput) -> list[ContractWarning]:
    """Checklist 12, by the rules of `schemas.specificity`."""
    found: list[ContractWarning] = []
    signals = {"positive_signal": output.positive_signal, "primary_weakness": output.primary_weakness}
    for name, text in signals.items():
        if text is None:
            continue
        found += [ContractWarning(code, (name,), f"{name} {_MESSAGES[code]}") for code in signal_codes(text)]
    pos, weak = output.positive_signal, output.primary_weakness
    if pos is not None and weak is not None and _norm(pos) == _norm(weak):
        found.append(
            ContractWarning("SIGNAL_DUPLICATES_WEAKNESS", ("primary_weakness",), "both signals say the same thing")
        )
    return found


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def partial_warnings(output: JudgeOutput, rubric: RubricVersion | None = None) -> list[ContractWarning]:
    if output.status != "partial":
        return []
    scored = ", ".join(output.completed_lane_keys)
    missing = ""
    if rubric is not None:
        left = [lane.lane_key for lane in rubric.lanes if lane.lane_key not in output.completed_lane_keys]
        missing = f"; not scored: {', '.join(left)}" if left else ""
    return [
        ContractWarning(
            "PARTIAL_OUTPUT",
            ("completed_lane_keys",),
            f"partial output ({output.failure_reason}): scored {scored}{missing}",
        )
    ]


def judge_output_warnings(output: JudgeOutput, rubric: RubricVersion | None = None) -> list[ContractWarning]:
    return lane_warnings(output, rubric) + specificity_warnings(output) + partial_warnings(output, rubric)
