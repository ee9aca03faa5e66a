"""Second-judge aggregation (DESIGN decision 6).

`unclear` is an abstention (CANNOT_ASSESS): it does not vote. Modes:
majority (strictly more than half of the voting judges), weighted (summed
confidence of pass votes vs fail votes), unanimous (pass only if every voting
judge passes), any_vote (pass if any voting judge passes). A tie resolves by
the rubric's tie rule, declared before the batch: unclear (to human review),
fail, pass, or first_judge (the verdict of the earliest voting judge).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from pydantic import BaseModel, ConfigDict

from schemas import ClaimCheck
from schemas.claim_check import Verdict
from schemas.rubric import AggregationMode, TieRule

__all__ = ["AggregateVerdict", "aggregate_verdicts"]


class Vote(Protocol):
    """What aggregation reads of one judge's check."""

    @property
    def verdict(self) -> str: ...
    @property
    def confidence(self) -> float: ...


class AggregateVerdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    agreement: float | None
    """Share of voting judges that gave the majority verdict (None if nobody voted)."""
    pass_votes: int
    fail_votes: int
    abstentions: int
    tie: bool
    mode: AggregationMode
    tie_rule: TieRule


def aggregate_verdicts(
    checks: Sequence[Vote | ClaimCheck], mode: AggregationMode = "majority", tie_rule: TieRule = "unclear"
) -> AggregateVerdict:
    """`checks` in arrival order (first_judge depends on it)."""
    voting = [c for c in checks if c.verdict != "unclear"]
    passes = sum(c.verdict == "pass" for c in voting)
    fails = len(voting) - passes
    tie = False
    verdict: Verdict
    if not voting:
        verdict = "unclear"
    elif mode == "majority":
        if passes * 2 > len(voting):
            verdict = "pass"
        elif fails * 2 > len(voting):
            verdict = "fail"
        else:
            tie, verdict = True, "unclear"
    elif mode == "weighted":
        pass_weight = sum(c.confidence for c in voting if c.verdict == "pass")
        fail_weight = sum(c.confidence for c in voting if c.verdict == "fail")
        if pass_weight > fail_weight:
            verdict = "pass"
        elif fail_weight > pass_weight:
            verdict = "fail"
        else:
            tie, verdict = True, "unclear"
    elif mode == "unanimous":
        verdict = "pass" if fails == 0 else "fail"
    elif mode == "any_vote":
        verdict = "pass" if passes > 0 else "fail"
    else:
        raise ValueError(f"unknown aggregation mode {mode!r}")
    if tie:
        verdict = cast(Verdict, voting[0].verdict) if tie_rule == "first_judge" else tie_rule
    agreement = max(passes, fails) / len(voting) if voting else None
    return AggregateVerdict(
        verdict=verdict,
        agreement=agreement,
        pass_votes=passes,
        fail_votes=fails,
        abstentions=len(checks) - len(voting),
        tie=tie,
        mode=mode,
        tie_rule=tie_rule,
    )
