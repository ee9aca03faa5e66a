"""Claims: the first verdict routed, later verdicts aggregated, state kept only while it can matter.

The first judge's check is routed by its rubric's policy (seed 003's rule). A check from another judge on the
same claim is aggregated with the earlier votes by the rubric's declared mode and tie rule, and the claim is
routed again, terminally. A check's score is validated against its rubric's `claim_score_range`. Checks that
name a rubric not seen yet are held (as the text received, with its source coordinates) until it arrives and
validated with it then: a held check is published as valid, or dead-lettered and queued for humans, only once
its rubric is known, so no refused score is ever published as a valid check. A claim's state is a list of
compact votes; the decisions are regenerated from it when an input is redelivered, so a redelivery re-sends
the same event ids and never decides again.

Once a claim's route is terminal (anything but `second_judge`), its state is deleted after `retention`
(DESIGN decision 11). A check for a claim whose state has expired starts the claim afresh: a redelivered
first check is routed again under the same event id; a new judge's check gets a first-verdict route of its
own. A new judge's check for a claim still within retention after a terminal route is aggregated as usual
and counted as late (`judgeflow_late_events_total`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_json

from schemas import ClaimCheck, RoutingDecision, RoutingPolicy, RubricVersion, StaleWorkAlert, parse_claim_check
from streams.aggregate import aggregate_verdicts
from streams.drift import LOW_CONFIDENCE_DEFAULT, DriftAccumulator, epoch
from streams.edge import Admitted, admit_claim_check, over_hold_limit
from streams.envelope import H_SOURCE, Outgoing, SourceRef, iso, micros
from streams.ids import event_id
from streams.routing import route, route_aggregate
from streams.stage import Clock, HoldBudget, Inbound, RubricLookup, State, Step
from streams.sweep_index import EVERY_TICK

RESUME = b'{"kind":"resume"}'
EXPIRE = b'{"kind":"expire"}'
ALERT = b'{"kind":"alert"}'
DEFAULT_POLICY = RoutingPolicy()
"""The policy of a check without a rubric (seed 003's thresholds)."""


class Vote(BaseModel):
    """One judge's verdict as routing and aggregation read it, and when its decision was made."""

    model_config = ConfigDict(frozen=True)

    judge_id: str
    verdict: str
    score: float | None
    confidence: float
    rubric_version_id: str | None = None
    decided_at: str
    via: str = "check"


class ClaimState(BaseModel):
    claim_id: str
    partition: int
    votes: list[Vote] = Field(default_factory=list)
    held: list[str] = Field(default_factory=list)
    """Checks waiting for their rubric, as received (older states: their validated JSON)."""
    held_from: list[str] = Field(default_factory=list)
    """Source coordinates of `held`, in the same order."""
    released: list[str] = Field(default_factory=list)
    """Checks a resume validated with their rubric (kept so a redelivered resume re-sends the same records)."""
    released_from: list[str] = Field(default_factory=list)
    released_at: str | None = None
    held_judges: list[str] = Field(default_factory=list)
    waiting_for: str | None = None
    rubric_version_id: str | None = None
    decided_at: str | None = None
    """Set once the route is terminal: the retention clock starts here."""
    held_since: str | None = None
    alerted: dict[str, str] = Field(default_factory=dict)

    def knows(self, judge_id: str) -> bool:
        return judge_id in self.held_judges or any(v.judge_id == judge_id for v in self.votes)


@dataclass(frozen=True)
class _Claimed:
    """The view `route()` needs of a vote."""

    claim_id: str
    verdict: str
    score: float | None
    confidence: float


def check_id(claim_id: str, judge_id: str) -> str:
    return f"{claim_id}/{judge_id}"


def on_check(
    state: ClaimState,
    check: ClaimCheck,
    rubrics: RubricLookup,
    now: datetime,
    *,
    raw: bytes | None = None,
    src: SourceRef | None = None,
) -> tuple[ClaimState, list[Outgoing]]:
    """One judge's verdict (`raw` and `src`: what was received, kept if it must wait for its rubric); a
    redelivery (same claim_id and judge_id) re-sends, never re-decides."""
    if state.knows(check.judge_id):
        return state, _resend(state, rubrics, lambda v: v.judge_id == check.judge_id)
    state = _copy(state)
    incoming = (check, raw.decode() if raw is not None else None, src.coordinates() if src is not None else None)
    return state, _advance(state, rubrics, now, via="check", incoming=incoming)


def on_resume(state: ClaimState, rubrics: RubricLookup, now: datetime) -> tuple[ClaimState, list[Outgoing]]:
    """A held rubric arrived: validate what waited for it with the rubric and decide what is valid. A
    redelivered resume re-sends what resumes released."""
    if not state.held:
        released_at = datetime.fromisoformat(state.released_at) if state.released_at else now
        again = [
            r
            for doc, coords in zip(state.released, state.released_from, strict=False)
            for r in _release(state, doc, coords, rubrics, released_at).records
        ]
        return state, again + _resend(state, rubrics, lambda v: v.via == "resume")
    state = _copy(state)
    return state, _advance(state, rubrics, now, via="resume")


def _copy(state: ClaimState) -> ClaimState:
    return state.model_copy(
        update={
            name: list(getattr(state, name))
            for name in ("held", "held_from", "held_judges", "released", "released_from")
        }
    )


def _release(state: ClaimState, doc: str, coords: str, rubrics: RubricLookup, now: datetime) -> Admitted[ClaimCheck]:
    """A held check validated with its rubric, as the edge validates one whose rubric is known on arrival."""
    key = state.claim_id.encode()
    src = SourceRef.parse(coords, key) if coords else SourceRef("checks", state.partition, -1, key)
    return admit_claim_check(doc.encode(), src, now=now, rubrics=rubrics)


def _advance(
    state: ClaimState,
    rubrics: RubricLookup,
    now: datetime,
    *,
    via: str,
    incoming: tuple[ClaimCheck, str | None, str | None] | None = None,
) -> list[Outgoing]:
    """Validate and decide every held check whose rubric is known, then decide `incoming` (held in turn if its
    rubric is not)."""
    out: list[Outgoing] = []
    votes = list(state.votes)
    held: list[str] = []
    held_from: list[str] = []
    held_judges: list[str] = []
    froms = [*state.held_from, *[""] * (len(state.held) - len(state.held_from))]
    pending: list[tuple[ClaimCheck, str | None, str | None, bool]] = [
        (parse_claim_check(doc), doc, coords, True) for doc, coords in zip(state.held, froms, strict=True)
    ]
    if incoming is not None:
        pending.append((*incoming, False))
    waiting_rubric: str | None = None
    at = iso(now)
    for check, doc, coords, was_held in pending:
        if check.rubric_version_id is not None and rubrics(check.rubric_version_id) is None:
            waiting_rubric = waiting_rubric or check.rubric_version_id
            held.append(doc if doc is not None else check.model_dump_json())
            held_from.append(coords or "")
            held_judges.append(check.judge_id)
            state.held_since = state.held_since or at
            continue
        if was_held and doc is not None:
            released = _release(state, doc, coords or "", rubrics, now)
            out.extend(released.records)
            state.released.append(doc)
            state.released_from.append(coords or "")
            state.released_at = at
            if released.event is None:  # refused with its rubric: dead-lettered and queued for humans
                continue
        votes.append(
            Vote(
                judge_id=check.judge_id,
                verdict=check.verdict,
                score=check.score,
                confidence=check.confidence,
                rubric_version_id=check.rubric_version_id,
                decided_at=at,
                via=via,
            )
        )
        record, terminal = _decision(state.claim_id, votes, rubrics)
        out.append(record)
        state.decided_at = at if terminal else None
    state.votes, state.held, state.held_from, state.held_judges = votes, held, held_from, held_judges
    state.waiting_for = "rubric" if held else None
    state.held_since = state.held_since if held else None
    state.rubric_version_id = waiting_rubric
    return out


def _resend(state: ClaimState, rubrics: RubricLookup, pick: Callable[[Vote], bool]) -> list[Outgoing]:
    return [
        _decision(state.claim_id, state.votes[: i + 1], rubrics)[0] for i, vote in enumerate(state.votes) if pick(vote)
    ]


DECISION_TEMPLATE: dict[str, Any] = {
    name: None if f.is_required() else f.get_default(call_default_factory=True)
    for name, f in RoutingDecision.model_fields.items()
}
"""Every field of a routing decision, in its order, at its default: a decision's JSON is this with its own
values merged in, serialised by pydantic-core (the serialiser `model_dump_json` uses)."""


def _decision(claim_id: str, votes: list[Vote], rubrics: RubricLookup) -> tuple[Outgoing, bool]:
    """The routing decision made when `votes[-1]` arrived; a pure function of the votes so far. Its fields were
    validated on the way in, so it is serialised straight from a dict (no model built, ~15% of a claim's CPU
    before); a differential test holds the bytes equal to a validated decision's."""
    latest = votes[-1]
    rubric: RubricVersion | None = rubrics(latest.rubric_version_id) if latest.rubric_version_id else None
    if len(votes) == 1:
        claimed = _Claimed(claim_id, latest.verdict, latest.score, latest.confidence)
        return _first_decision(claimed, latest.judge_id, rubric, latest.decided_at)
    policy = rubric.routing if rubric else DEFAULT_POLICY
    judge_ids = [v.judge_id for v in votes]
    ident = event_id("route-claim", claim_id, *judge_ids)
    mode = rubric.aggregation_mode if rubric else "majority"
    tie = rubric.tie_rule if rubric else "unclear"
    agg = aggregate_verdicts(votes, mode, tie)
    decision = route_aggregate(agg)
    fields = {
        "event_id": ident,
        "subject": "claim",
        "claim_id": claim_id,
        "route": decision.route,
        "reason": decision.reason,
        "verdict": agg.verdict,
        "judge_ids": judge_ids,
        "policy": policy,
        "aggregation_mode": mode,
        "tie_rule": tie,
        "agreement": None if agg.agreement is None else float(agg.agreement),
        "decided_at": latest.decided_at,
        "input_ids": [check_id(claim_id, v.judge_id) for v in votes],
    }
    value = to_json(DECISION_TEMPLATE | fields)
    return Outgoing(decision.route, claim_id.encode(), value), decision.route != "second_judge"


def _first_decision(
    vote: _Claimed | ClaimCheck, judge_id: str, rubric: RubricVersion | None, decided_at: str
) -> tuple[Outgoing, bool]:
    """The decision on a claim's first verdict (seed 003's rule under its rubric's policy), and whether its
    route is terminal."""
    claim_id = vote.claim_id
    policy = rubric.routing if rubric else DEFAULT_POLICY
    decision = route(vote, policy)
    fields = {
        "event_id": event_id("route-claim", claim_id, judge_id),
        "subject": "claim",
        "claim_id": claim_id,
        "route": decision.route,
        "reason": decision.reason,
        "verdict": vote.verdict,
        "score": vote.score,
        "confidence": vote.confidence,
        "judge_ids": [judge_id],
        "policy": policy,
        "input_ids": [check_id(claim_id, judge_id)],
        "decided_at": decided_at,
    }
    value = to_json(DECISION_TEMPLATE | fields)
    return Outgoing(decision.route, claim_id.encode(), value), decision.route != "second_judge"


def expired(state: ClaimState, now: datetime, retention: timedelta) -> bool:
    return (
        state.decided_at is not None and not state.held and datetime.fromisoformat(state.decided_at) + retention <= now
    )


def _due(doc: State, now: datetime, retention: timedelta) -> bool:
    decided = doc.get("decided_at")
    return isinstance(decided, str) and not doc.get("held") and datetime.fromisoformat(decided) + retention <= now


def wake_at(doc: State, retention: timedelta, grace: timedelta) -> int | None:
    """The earliest time (µs since the epoch) the sweep could have a record to send for this claim: every tick
    while it waits for its rubric; once decided, when its retention runs out or its held checks' grace (alert);
    None for a claim still being judged. A lower bound: `ClaimStage.sweep` sends nothing before it."""
    if doc.get("waiting_for") == "rubric":
        return EVERY_TICK
    decided = doc.get("decided_at")
    if not isinstance(decided, str):
        return None
    held = bool(doc.get("held"))
    times = [] if held else [micros(datetime.fromisoformat(decided) + retention)]
    since = doc.get("held_since")
    if held and isinstance(since, str) and "held_too_long" not in (doc.get("alerted") or {}):
        times.append(micros(datetime.fromisoformat(since) + grace))
    return min(times) if times else None


def held_too_long(doc: State, now: datetime, grace: timedelta) -> bool:
    """Checks held for their rubric longer than the grace, and no alert raised yet."""
    since = doc.get("held_since")
    return (
        isinstance(since, str)
        and bool(doc.get("held"))
        and "held_too_long" not in (doc.get("alerted") or {})
        and datetime.fromisoformat(since) + grace <= now
    )


def _alert(state: ClaimState, raised_at: str) -> Outgoing:
    alert = StaleWorkAlert(
        event_id=event_id("stale-alert", "held_too_long", state.claim_id),
        kind="held_too_long",
        subject="claim",
        subject_id=state.claim_id,
        waiting_for="rubric",
        rubric_version_id=state.rubric_version_id,
        held_events=len(state.held),
        first_seen_at=state.held_since or raised_at,
        reason=f"{len(state.held)} check(s) held for rubric {state.rubric_version_id} since {state.held_since}",
        raised_at=raised_at,
    )
    return Outgoing("alerts", state.claim_id.encode(), alert.model_dump_json().encode())


class ClaimStage:
    """Validate, route and aggregate claim checks in one step (one consume per check)."""

    name = "route_claims"
    reads: tuple[str, ...] = ("checks", "checks_rekeyed", "claims_control")
    writes: tuple[str, ...] = (
        "checks_valid",
        "checks_rekeyed",
        "invalid",
        "done",
        "second_judge",
        "human_review",
        "alerts",
    )
    keeps = "claim_state"
    does = (
        "validate each claim check, route the first verdict by its rubric's policy, aggregate later judges' "
        "verdicts; re-key a check whose key is not its claim_id; hold checks whose rubric is unknown"
    )

    def __init__(
        self,
        rubrics: RubricLookup,
        *,
        clock: Clock,
        retention: timedelta,
        max_payload_bytes: int,
        stale_after: timedelta = timedelta(minutes=5),
        hold: HoldBudget | None = None,
        drift: DriftAccumulator | None = None,
        direct_first_checks: bool = True,
    ) -> None:
        self.rubrics = rubrics
        self.direct_first_checks = direct_first_checks
        """A claim's first check, its rubric known, skips the state model (`_first_check`); False sends every
        check through it (the reference the differential test compares with)."""
        self.stale_after = stale_after
        self.hold = hold
        self.drift = drift
        """Drift deltas: every check a claim state accepts is observed once (`streams.drift`)."""
        self.clock = clock
        self.retention = retention
        self.max_payload_bytes = max_payload_bytes

    def handle(self, record: Inbound, stored: State | None) -> Step:
        now = self.clock()
        key = (record.key or b"").decode(errors="replace")
        if record.role == "claims_control":
            if stored is None:
                return Step.emit([])
            state = ClaimState.model_validate(stored)
            kind = json.loads(record.value or b"{}").get("kind")
            if kind == "expire":
                return Step.store(None, []) if expired(state, now, self.retention) else Step.emit([])
            if kind == "alert":
                return self._alert(state, now)
            before = len(state.votes)
            state, out = on_resume(state, self.rubrics, now)
            self._observe(state, before, None, record, now)
            return self._keep(state, out, now)
        admitted = admit_claim_check(
            record.value or b"", record.origin(), now=now, max_bytes=self.max_payload_bytes, rubrics=self.rubrics
        )
        check = admitted.event
        if check is None:
            return Step.emit(admitted.records)
        if record.role == "checks" and key != check.claim_id:
            return Step.emit(
                [Outgoing("checks_rekeyed", check.claim_id.encode(), record.value or b"", _origin_header(record))]
            )
        waits = check.rubric_version_id is not None and self.rubrics(check.rubric_version_id) is None
        if not stored and not waits and self.direct_first_checks:
            return self._first_check(check, admitted.records, record, now)
        state = (
            ClaimState.model_validate(stored)
            if stored
            else ClaimState(claim_id=check.claim_id, partition=record.src.partition)
        )
        known = state.knows(check.judge_id)
        if not known and waits and self.hold is not None and self.hold.full():
            return Step.emit([over_hold_limit(record.value or b"", record.origin(), "claim_check", self.hold.limit)])
        decided = state.decided_at is not None
        before = len(state.votes)
        state, out = on_check(state, check, self.rubrics, now, raw=record.value or b"", src=record.origin())
        published = [] if waits else admitted.records  # a held check is published once its rubric validated it
        if known:
            return Step.emit([*published, *out])
        self._observe(state, before, check, record, now)
        step = self._keep(state, [*published, *out], now)
        return Step(step.records, step.state, step.changed, late=decided)

    def _first_check(self, check: ClaimCheck, published: list[Outgoing], record: Inbound, now: datetime) -> Step:
        """A claim's first check, with its rubric known (or none named): what `on_check`, `_observe` and
        `_keep` make of it, without the `ClaimState` and `Vote` models built only to be dumped. Most checks
        take this path; tests/unit/test_fast_paths.py holds it equal to the reference."""
        at = iso(now)
        rubric = self.rubrics(check.rubric_version_id) if check.rubric_version_id else None
        decision, terminal = _first_decision(check, check.judge_id, rubric, at)
        if self.drift is not None:
            fallback = record.timestamp if record.timestamp is not None else now.timestamp()
            floor = rubric.routing.floor if rubric else LOW_CONFIDENCE_DEFAULT
            at_s = epoch(check.checked_at, fallback)
            self.drift.observe_check(check.judge_id, check.verdict, check.score, check.confidence, floor, at_s)
        out = [*published, decision]
        if terminal and self.retention <= timedelta(0) and datetime.fromisoformat(at) + self.retention <= now:
            return Step.store(None, out)
        vote: State = {"judge_id": check.judge_id, "verdict": check.verdict, "score": check.score}
        vote["confidence"] = check.confidence
        if check.rubric_version_id is not None:
            vote["rubric_version_id"] = check.rubric_version_id
        vote["decided_at"] = at
        state: State = {"claim_id": check.claim_id, "partition": record.src.partition, "votes": [vote]}
        if terminal:
            state["decided_at"] = at
        return Step.store(state, out)

    def _observe(
        self, state: ClaimState, before: int, check: ClaimCheck | None, record: Inbound, now: datetime
    ) -> None:
        """Hand the votes this step added to the drift accumulator, each at its check's own time."""
        if self.drift is None or len(state.votes) == before:
            return
        fallback = record.timestamp if record.timestamp is not None else now.timestamp()
        for vote in state.votes[before:]:
            rubric = self.rubrics(vote.rubric_version_id) if vote.rubric_version_id else None
            if check is not None and vote.judge_id == check.judge_id:
                at = epoch(check.checked_at, fallback)
            else:  # released from the hold (rare): its checked_at is in the released text
                at = next(
                    (
                        epoch(d.get("checked_at"), fallback)
                        for d in map(json.loads, state.released)
                        if d.get("judge_id") == vote.judge_id
                    ),
                    fallback,
                )
            self.drift.observe_check(
                vote.judge_id,
                vote.verdict,
                vote.score,
                vote.confidence,
                rubric.routing.floor if rubric else LOW_CONFIDENCE_DEFAULT,
                at,
            )

    def _keep(self, state: ClaimState, out: list[Outgoing], now: datetime) -> Step:
        if self.retention <= timedelta(0) and expired(state, now, self.retention):
            return Step.store(None, out)
        return Step.store(state.model_dump(mode="json", exclude_defaults=True), out)

    def wake_at(self, doc: State) -> int | None:
        """When the sweep next needs this stored claim (`wake_at`)."""
        return wake_at(doc, self.retention, self.stale_after)

    def sweep(self, states: list[tuple[str, State]]) -> list[Outgoing]:
        """Control records for the claims that need one: a held rubric arrived, checks held too long (alert),
        or retention ran out."""
        now = self.clock()
        out = []
        for key, doc in states:
            if doc.get("waiting_for") == "rubric" and self.rubrics(doc.get("rubric_version_id") or ""):
                out.append(Outgoing("claims_control", key.encode(), RESUME))
            elif _due(doc, now, self.retention):
                out.append(Outgoing("claims_control", key.encode(), EXPIRE))
            if held_too_long(doc, now, self.stale_after):
                out.append(Outgoing("claims_control", key.encode(), ALERT))
        return out

    def _alert(self, state: ClaimState, now: datetime) -> Step:
        kind = "held_too_long"
        if kind in state.alerted:
            return Step.emit([_alert(state, state.alerted[kind])])  # a redelivered signal
        if not held_too_long(state.model_dump(mode="json"), now, self.stale_after):
            return Step.emit([])
        state = state.model_copy(update={"alerted": {**state.alerted, kind: iso(now)}})
        return self._keep(state, [_alert(state, state.alerted[kind])], now)


def _origin_header(record: Inbound) -> list[tuple[str, bytes]]:
    return [(H_SOURCE, record.origin().coordinates().encode())]
