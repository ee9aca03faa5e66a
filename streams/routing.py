"""Claim routing: seed 003's rule, written down once (DESIGN decision 5).

A pure function of a verdict, a score and a confidence, so reviewers,
dashboards and backfills agree. The seed's prose (1,000 claims -> ~120 to
humans) sends confident failures to `done` except a 10% spot sample, chosen
by a hash of claim_id so a replay samples the same rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from schemas import ClaimCheck, ReconciliationResult, RoutingPolicy
from streams.aggregate import AggregateVerdict
from streams.judge_summary import JudgeSummary

Route = Literal["done", "second_judge", "human_review"]

__all__ = [
    "Route",
    "RouteDecision",
    "RoutingPolicy",
    "route",
    "route_aggregate",
    "route_evaluation",
    "route_invalid",
    "spot_sampled",
]


class Verdict(Protocol):
    """What routing reads of a claim check (a `ClaimCheck`, or the compact vote a claim's state keeps)."""

    @property
    def claim_id(self) -> str: ...
    @property
    def verdict(self) -> str: ...
    @property
    def score(self) -> float | None: ...
    @property
    def confidence(self) -> float: ...


class RouteDecision(BaseModel):
    model_config = ConfigDict(frozen=True)

    route: Route
    reason: str


def spot_sampled(claim_id: str, rate: float) -> bool:
    """Deterministic Bernoulli(rate) draw keyed by claim_id."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    digest = hashlib.sha256(claim_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


# The first-verdict decisions, made once: a decision is frozen, and building one per claim was a tenth of
# the claim step's routing time.
_PASS_CONFIDENT = RouteDecision(route="done", reason="pass_confident")
_FAIL_LOW_CONFIDENCE = RouteDecision(route="human_review", reason="fail_low_confidence")
_BORDERLINE = RouteDecision(route="second_judge", reason="borderline")
_SPOT_SAMPLE = RouteDecision(route="human_review", reason="spot_sample")
_CONFIDENT_FAIL = RouteDecision(route="done", reason="confident_fail")
_UNCLEAR = RouteDecision(route="human_review", reason="unclear")
_PASS_LOW_CONFIDENCE = RouteDecision(route="human_review", reason="pass_low_confidence")
_PASS_LOW_SCORE = RouteDecision(route="human_review", reason="pass_low_score")


def route(check: Verdict | ClaimCheck, policy: RoutingPolicy | None = None) -> RouteDecision:
    """Seed 003's four branches in order, then the confident-failure sample."""
    p = policy or RoutingPolicy()
    score, conf, verdict = check.score, check.confidence, check.verdict
    if verdict == "pass" and score is not None and score >= p.pass_score and conf >= p.floor:
        return _PASS_CONFIDENT
    if verdict == "fail" and conf < p.floor:
        return _FAIL_LOW_CONFIDENCE
    if score is not None and p.border <= score < p.pass_score:
        return _BORDERLINE
    if verdict == "fail":
        # Confident failure with a score outside the border band.
        if spot_sampled(check.claim_id, p.spot_sample_rate):
            return _SPOT_SAMPLE
        return _CONFIDENT_FAIL
    if verdict == "unclear":
        return _UNCLEAR
    if conf < p.floor:
        return _PASS_LOW_CONFIDENCE
    return _PASS_LOW_SCORE


def route_invalid() -> RouteDecision:
    """A check that failed validation is read as unclear, confidence 0.0."""
    return RouteDecision(route="human_review", reason="invalid")


def route_evaluation(result: ReconciliationResult | None, outputs: Sequence[JudgeSummary]) -> RouteDecision:
    """DESIGN decision 10, for a final reconciliation.

    Human review when judges contradict each other, any judge set an
    auto-disqualify or critical flag, or every successful judge had low
    confidence (the reason names each); `done` otherwise."""
    if result is None:
        return RouteDecision(route="human_review", reason="no_successful_judge")
    successful = [o for o in outputs if o.status != "failed"]
    reasons = []
    if result.has_contradictions:
        reasons.append("contradictions")
    if any(o.auto_disqualify for o in successful):
        reasons.append("auto_disqualify")
    if any(o.critical for o in successful):
        reasons.append("critical_flag")
    if successful and all(o.confidence == "low" for o in successful):
        reasons.append("low_confidence")
    if reasons:
        return RouteDecision(route="human_review", reason="+".join(reasons))
    return RouteDecision(route="done", reason="reconciled")


def route_aggregate(verdict: AggregateVerdict) -> RouteDecision:
    """The final route once a second (or later) judge has voted: terminal,
    so a claim never loops back to the second-judge queue."""
    if verdict.verdict == "unclear":
        reason = "all_abstain" if verdict.pass_votes + verdict.fail_votes == 0 else "tie_unclear"
        return RouteDecision(route="human_review", reason=reason)
    return RouteDecision(route="done", reason=f"aggregated_{verdict.verdict}")
