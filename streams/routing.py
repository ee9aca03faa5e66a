"""Claim routing: seed 003's rule, written down once (DESIGN decision 5).

A pure function of a verdict, a score and a confidence, so reviewers,
dashboards and backfills agree. The seed's prose (1,000 claims -> ~120 to
humans) sends confident failures to `done` except a 10% spot sample, chosen
by a hash of claim_id so a replay samples the same rows.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict

from schemas import ClaimCheck, RoutingPolicy

Route = Literal["done", "second_judge", "human_review"]

__all__ = ["Route", "RouteDecision", "RoutingPolicy", "route", "route_invalid", "spot_sampled"]


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


def route(check: ClaimCheck, policy: RoutingPolicy | None = None) -> RouteDecision:
    """Seed 003's four branches in order, then the confident-failure sample."""
    p = policy or RoutingPolicy()
    score, conf, verdict = check.score, check.confidence, check.verdict
    if verdict == "pass" and score is not None and score >= p.pass_score and conf >= p.floor:
        return RouteDecision(route="done", reason="pass_confident")
    if verdict == "fail" and conf < p.floor:
        return RouteDecision(route="human_review", reason="fail_low_confidence")
    if score is not None and p.border <= score < p.pass_score:
        return RouteDecision(route="second_judge", reason="borderline")
    if verdict == "fail":
        # Confident failure with a score outside the border band.
        if spot_sampled(check.claim_id, p.spot_sample_rate):
            return RouteDecision(route="human_review", reason="spot_sample")
        return RouteDecision(route="done", reason="confident_fail")
    if verdict == "unclear":
        return RouteDecision(route="human_review", reason="unclear")
    if conf < p.floor:
        return RouteDecision(route="human_review", reason="pass_low_confidence")
    return RouteDecision(route="human_review", reason="pass_low_score")


def route_invalid() -> RouteDecision:
    """A check that failed validation is read as unclear, confidence 0.0."""
    return RouteDecision(route="human_review", reason="invalid")
