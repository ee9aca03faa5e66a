"""Per-claim state machine: first verdict routed, later verdicts aggregated.

The first judge's check is routed by the rubric's policy (seed 003's rule).
A check from another judge on the same claim is aggregated with the stored
ones by the rubric's declared mode and tie rule, and the claim is routed
again, terminally (done, or human review on an unclear result). Checks that
name a rubric not seen yet are held. Pure: no Faust, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from schemas import ClaimCheck, RoutingDecision, RoutingPolicy, RubricVersion
from streams.aggregate import aggregate_verdicts
from streams.edge import Outgoing
from streams.ids import event_id
from streams.outbox import from_dict, to_dict
from streams.routing import route, route_aggregate

RubricLookup = Callable[[str], RubricVersion | None]


class ClaimState(BaseModel):
    claim_id: str
    partition: int
    checks: list[ClaimCheck] = Field(default_factory=list)
    held: list[ClaimCheck] = Field(default_factory=list)
    outbox: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    waiting_for: str | None = None
    rubric_version_id: str | None = None

    def knows(self, judge_id: str) -> bool:
        return any(c.judge_id == judge_id for c in (*self.checks, *self.held))


def _copy(state: ClaimState) -> ClaimState:
    """A copy safe to change: new containers, shared (frozen) checks; cheaper than a deep copy."""
    return state.model_copy(update={"checks": list(state.checks), "held": list(state.held),
                                    "outbox": dict(state.outbox)})  # fmt: skip


def check_id(check: ClaimCheck) -> str:
    return f"{check.claim_id}/{check.judge_id}"


def on_check(
    state: ClaimState, check: ClaimCheck, rubrics: RubricLookup, now: datetime
) -> tuple[ClaimState, list[Outgoing]]:
    """One judge's verdict; a redelivery (same claim_id and judge_id) re-sends, never re-decides."""
    if state.knows(check.judge_id):
        return state, [from_dict(r) for r in state.outbox.get(check.judge_id, [])]
    state = _copy(state)
    state.held.append(check)
    out = _advance(state, rubrics, now)
    state.outbox[check.judge_id] = [to_dict(r) for r in out]
    return state, out


def on_resume(state: ClaimState, rubrics: RubricLookup, now: datetime) -> tuple[ClaimState, list[Outgoing]]:
    state = _copy(state)
    out = _advance(state, rubrics, now)
    if out:
        state.outbox[f"resume-{len(state.checks)}"] = [to_dict(r) for r in out]
    return state, out


def _rubric_of(check: ClaimCheck, rubrics: RubricLookup) -> tuple[bool, RubricVersion | None]:
    if check.rubric_version_id is None:
        return True, None
    rubric = rubrics(check.rubric_version_id)
    return rubric is not None, rubric


def _advance(state: ClaimState, rubrics: RubricLookup, now: datetime) -> list[Outgoing]:
    out: list[Outgoing] = []
    still_held = []
    for check in state.held:
        known, rubric = _rubric_of(check, rubrics)
        if not known:
            still_held.append(check)
            continue
        state.checks.append(check)
        out.append(_decide(state, rubric, now))
    state.held = still_held
    state.waiting_for = "rubric" if still_held else None
    state.rubric_version_id = still_held[0].rubric_version_id if still_held else None
    return out


def _decide(state: ClaimState, rubric: RubricVersion | None, now: datetime) -> Outgoing:
    policy = rubric.routing if rubric else RoutingPolicy()
    checks = state.checks
    judge_ids = [c.judge_id for c in checks]
    latest = checks[-1]
    if len(checks) == 1:
        decision = route(latest, policy)
        routed = RoutingDecision(
            event_id=event_id("route-claim", state.claim_id, *judge_ids),
            subject="claim", claim_id=state.claim_id, route=decision.route, reason=decision.reason,
            verdict=latest.verdict, score=latest.score, confidence=latest.confidence,
            judge_ids=judge_ids, input_ids=[check_id(latest)], policy=policy,
            decided_at=now.isoformat().replace("+00:00", "Z"),
        )  # fmt: skip
    else:
        mode = rubric.aggregation_mode if rubric else "majority"
        tie = rubric.tie_rule if rubric else "unclear"
        agg = aggregate_verdicts(checks, mode, tie)
        decision = route_aggregate(agg)
        routed = RoutingDecision(
            event_id=event_id("route-claim", state.claim_id, *judge_ids),
            subject="claim", claim_id=state.claim_id, route=decision.route, reason=decision.reason,
            verdict=agg.verdict, score=None, confidence=None, judge_ids=judge_ids,
            input_ids=[check_id(c) for c in checks], policy=policy, aggregation_mode=mode,
            tie_rule=tie, agreement=agg.agreement, decided_at=now.isoformat().replace("+00:00", "Z"),
        )  # fmt: skip
    return Outgoing(decision.route, state.claim_id.encode(), routed.model_dump_json().encode())
