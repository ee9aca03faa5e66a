"""Evaluation runs: collect judge outputs, reconcile, route the final result; keep only what that needs.

Outputs that arrive before their run or rubric are held as the bytes received (one bounded hold for all
held events) and validated against the rubric when it is known: only then is one published as valid, so no
refused score is ever published. An output refused against its run's rubric (DESIGN decision 13) is
dead-lettered with the bytes and key received, and counts at once as its judge's failure in the run: a failed
record (`status` failed, `failure_reason` the codes) is published in its place and the run reconciles without
it instead of waiting for the judge's timeout. Each accepted output yields a provisional
revision on `evaluation.reconciled`; when every expected judge is in (a timed-out judge counts once its
failed stub arrives) the run emits a final revision and its routing decision (DESIGN decisions 7 and 10).

The state keeps one `JudgeSummary` per accepted judge and one line per revision (how many judges it saw,
whether final, when, and which input caused it), never whole documents or the records sent: a redelivered
input regenerates exactly the records it caused, with the same ids and bytes. Once final, the state is
deleted after the retention (DESIGN decision 11); an output for a run whose state has expired is held like
one for an unknown run, and reported stale. Nothing here reads a clock: `now` is passed in.

The stored form is compact (under 1 KB for a run of three judges; every changelog write carries it): short
keys (`STORED_KEYS`, `JudgeSummary`'s), defaults left out, each id once, times as whole microseconds since the
epoch (`streams.envelope.micros`; a revision's and an alert's as microseconds after `first_seen_at`), the
final revision known as the last of a final run, and a revision's trigger named only when it is not the judge
the revision added. The timer reads `partition`, `final_at`, `deadline`, `waiting`, `rubric`, `held`, `seen`
and `alerted` from the stored dict without parsing the state. A state stored before this format (its keys are
the field names, its times ISO strings) is read as well (`load`, `upgrade`) and written back compact.
"""

from __future__ import annotations

import base64
import json
import logging
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from schemas import (
    ContractError,
    EvaluationRunStarted,
    JudgeOutput,
    ReconciliationResult,
    ReconciliationRevision,
    RoutingDecision,
    RubricVersion,
    StaleWorkAlert,
    parse_evaluation_run,
)
from schemas.types import parse_timestamp
from streams.drift import DriftAccumulator, epoch
from streams.edge import admit_judge_output, dead_letter, over_hold_limit, require_key
from streams.envelope import H_ERROR_CODES, H_SOURCE, H_SOURCE_VERSION, Outgoing, SourceRef, from_micros, iso, micros
from streams.ids import event_id
from streams.judge_summary import TIMEOUT_MARK, JudgeSummary, summarize
from streams.reconcile import NoSuccessfulJudge, reconcile_summaries
from streams.routing import route_evaluation
from streams.stage import Clock, HoldBudget, Inbound, RubricLookup, State, Step
from streams.sweep_index import EVERY_TICK

_MICROSECOND = timedelta(microseconds=1)
log = logging.getLogger("judgeflow.streams")
RESUME = b'{"kind":"resume"}'
EXPIRE = b'{"kind":"expire"}'


STORED_KEYS = {
    "evaluation_run_id": "id",
    "rubric_version_id": "rubric",
    "judges": "j",
    "revisions": "revs",
    "first_seen_at": "seen",
    "finalized_at": "final_at",
    "waiting_for": "waiting",  # RunState
    "submission_id": "sub",
    "expected_judge_models": "expect",
    "judge_timeout_seconds": "timeout",
    "started_at": "start",  # RunInfo
    "released_by": "rel_by",  # RunState
    "trigger": "by",  # Revision
    "judge_run_id": "id",
    "judge_model": "model",
    "raw_b64": "raw",  # HeldOutput
}
"""Field -> key in stored state, where the two differ (`JudgeSummary` has its own)."""
OLD_FORMAT_KEY = "evaluation_run_id"
"""Only a state stored before the compact format has this key."""


class Stored(BaseModel):
    """Stored under `STORED_KEYS`; the field names are read too."""

    model_config = ConfigDict(
        alias_generator=lambda name: STORED_KEYS.get(name, name),
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class HeldOutput(Stored):
    """A judge output waiting for its run or rubric: the bytes received, where from, and its identity."""

    judge_run_id: str
    judge_model: str
    source: str
    raw_b64: str

    def raw(self) -> bytes:
        return base64.b64decode(self.raw_b64)


class Revision(Stored):
    """Revision `index + 1` of a run: reconciled over the first `judges` accepted judges. The last revision of a
    final run is the final one (nothing is revised after it)."""

    model_config = ConfigDict(alias_generator=lambda name: {"judges": "n"}.get(name, STORED_KEYS.get(name, name)))

    judges: int
    at: int
    """Microseconds after the run's `first_seen_at` (a few digits instead of sixteen)."""
    trigger: str | None = None
    """The input that caused it (a judge_run_id, "run" or "resume"); None: the judge it added, `judges[judges-1]`."""


class RunInfo(Stored):
    """What the state keeps of the run's `EvaluationRunStarted` (its ids are the state's own)."""

    submission_id: str
    expected_judge_models: list[str]
    judge_timeout_seconds: float
    started_at: str
    """As received: a timeout stub carries it as its `judge_started_at`."""


class RunState(Stored):
    evaluation_run_id: str
    partition: int
    rubric_version_id: str | None = None
    """The run's rubric, once the run is known."""
    run: RunInfo | None = None
    held: list[HeldOutput] = Field(default_factory=list)
    released_by: str | None = None
    """The input ("run" or "resume") that released the held outputs: each goes back through the re-keyed topic
    and is validated with the rubric there like any output; it stays held until it is back (a redelivered
    release sends what is still held again)."""
    judges: list[JudgeSummary] = Field(default_factory=list)
    revisions: list[Revision] = Field(default_factory=list)
    first_seen_at: int
    """Microseconds since the epoch, as `finalized_at` and `deadline` (the timer compares them)."""
    finalized_at: int | None = None
    """Set by the final revision: the run is final."""
    alerted: dict[str, int] = Field(default_factory=dict)
    """Stale-work alerts raised for this run: kind -> when, in microseconds after `first_seen_at` (a redelivered
    alert signal re-sends the same alert)."""
    deadline: int | None = None
    """When judges time out: the judge timeout from the later of the run's start and when it was learned."""
    waiting_for: str | None = None

    @classmethod
    def new(cls, run_id: str, partition: int, now: datetime) -> RunState:
        return cls(evaluation_run_id=run_id, partition=partition, first_seen_at=micros(now))

    def doc(self) -> State:
        """The stored form."""
        return self.model_dump(mode="json", exclude_defaults=True)

    @property
    def final(self) -> bool:
        return self.finalized_at is not None

    @property
    def revision(self) -> int:
        return len(self.revisions)

    def is_final(self, index: int) -> bool:
        return self.final and index == len(self.revisions) - 1

    def time(self, after_first_seen: int) -> str:
        """The ISO form of a time kept as microseconds after `first_seen_at`."""
        return iso(from_micros(self.first_seen_at + after_first_seen))

    def trigger_of(self, rev: Revision) -> str:
        return rev.trigger if rev.trigger is not None else self.judges[rev.judges - 1].judge_run_id

    def models_in(self) -> set[str]:
        return {j.judge_model for j in self.judges} | {h.judge_model for h in self.held}

    def knows(self, judge_run_id: str) -> bool:
        return any(j.judge_run_id == judge_run_id for j in self.judges) or any(
            h.judge_run_id == judge_run_id for h in self.held
        )


def _copy(state: RunState) -> RunState:
    """A copy safe to change: new containers, shared frozen items."""
    return state.model_copy(
        update={"held": list(state.held), "judges": list(state.judges), "revisions": list(state.revisions)}
    )


def load(stored: State) -> RunState:
    """A stored state, in the compact format or the one before it."""
    return RunState.model_validate(_from_old_format(stored) if OLD_FORMAT_KEY in stored else stored)


def upgrade(stored: State) -> State:
    """The stored dict in the compact format (the timer reads its keys); unchanged if it already is."""
    return load(stored).doc() if OLD_FORMAT_KEY in stored else stored


def _from_old_format(doc: State) -> State:
    """A state stored before the compact format: its keys are the field names (read as they are), its times ISO
    strings, and every revision names its trigger. The run's copy of its ids, `final` and `run_seen_at` (the
    deadline is stored) are left out as unknown keys."""

    def us(value: str | None) -> int | None:
        return micros(parse_timestamp(value)) if value is not None else None

    seen = micros(parse_timestamp(doc["first_seen_at"]))
    judges = doc.get("judges") or []
    revisions = [
        {
            "judges": rev["judges"],
            "at": micros(parse_timestamp(rev["at"])) - seen,
            "trigger": None if rev["trigger"] == judges[rev["judges"] - 1]["judge_run_id"] else rev["trigger"],
        }
        for rev in doc.get("revisions") or []
    ]
    alerted = {kind: micros(parse_timestamp(at)) - seen for kind, at in (doc.get("alerted") or {}).items()}
    return {
        **doc,
        "first_seen_at": seen,
        "finalized_at": us(doc.get("finalized_at")),
        "deadline": us(doc.get("deadline")),
        "revisions": revisions,
        "alerted": alerted,
    }


def _refresh(state: RunState, rubrics: RubricLookup) -> None:
    if state.rubric_version_id is None:
        state.waiting_for = "run"
        return
    state.waiting_for = None if rubrics(state.rubric_version_id) else "rubric"


def on_output(
    state: RunState,
    output: JudgeOutput,
    source: SourceRef,
    raw: bytes,
    rubrics: RubricLookup,
    now: datetime,
    *,
    checked: bool = False,
) -> tuple[RunState, list[Outgoing]]:
    """A valid judge output arrived (`checked`: validated against the run's rubric). Unchecked, it is held. A
    duplicate (same judge_run_id) re-sends what it caused, and changes nothing; a released output coming back
    checked takes its place among the judges."""
    if any(j.judge_run_id == output.judge_run_id for j in state.judges):
        return state, resend(state, output.judge_run_id, rubrics)
    if state.final:
        return state, []  # late (e.g. after its judge's timeout stub): projected, not reconciled
    waiting = _held_index(state, output.judge_run_id)
    if not (checked and state.run is not None):
        if waiting is not None:
            return state, []  # another copy of an output already held
        state = _copy(state)
        state.held.append(
            HeldOutput(
                judge_run_id=output.judge_run_id,
                judge_model=output.judge_model,
                source=source.coordinates(),
                raw_b64=base64.b64encode(raw).decode(),
            )
        )
        return state, _advance(state, rubrics, now, output.judge_run_id)
    state = _copy(state)
    _unhold(state, waiting)
    state.judges.append(summarize(output))
    out = _revise(state, rubrics, now, output.judge_run_id, final=False)
    return state, out + _advance(state, rubrics, now, output.judge_run_id)


def _held_index(state: RunState, judge_run_id: str) -> int | None:
    return next((i for i, h in enumerate(state.held) if h.judge_run_id == judge_run_id), None)


def _unhold(state: RunState, index: int | None) -> None:
    if index is not None:
        del state.held[index]
        if not state.held:
            state.released_by = None


def on_refused(
    state: RunState, output: JudgeOutput, dead: Outgoing, rubrics: RubricLookup, now: datetime
) -> tuple[RunState, list[Outgoing]]:
    """A judge output its run's rubric refused (`dead`: its dead letter): that judge failed in this run. A
    redelivery re-sends the failed record and what it caused."""
    stub = _refused_stub(state, output, dead)
    if stub is None:
        return state, []
    if any(j.judge_run_id == stub.judge_run_id for j in state.judges):
        return state, [_published(stub, dead)] + resend(state, stub.judge_run_id, rubrics)
    if state.final:
        return state, []
    state = _copy(state)
    _unhold(state, _held_index(state, output.judge_run_id))
    state.judges.append(summarize(stub))
    out = [_published(stub, dead), *_revise(state, rubrics, now, stub.judge_run_id, final=False)]
    return state, out + _advance(state, rubrics, now, stub.judge_run_id)


def _refused_stub(state: RunState, output: JudgeOutput, dead: Outgoing) -> JudgeOutput | None:
    """The failed record standing for an output refused against the rubric (None if it is not this run's)."""
    if state.run is None or output.evaluation_run_id != state.evaluation_run_id:
        return None
    codes = dict(dead.headers).get(H_ERROR_CODES, b"").decode() or "REFUSED"
    return _stub(
        state,
        state.run,
        output.judge_model,
        codes,
        judge_run_id=event_id("refused-stub", state.evaluation_run_id, output.judge_run_id),
        telemetry_reason="judge output refused against its rubric",
        started_at=output.judge_started_at,
    )


def _published(stub: JudgeOutput, dead: Outgoing) -> Outgoing:
    """A failed record goes on the validated topic like any output, pointing at the refused output's source."""
    source = dict(dead.headers).get(H_SOURCE, b"")
    return Outgoing(
        "judge_outputs_valid",
        stub.evaluation_run_id.encode(),
        stub.model_dump_json().encode(),
        [(H_SOURCE, source), (H_SOURCE_VERSION, stub.schema_version.encode())],
    )


def _reinjected(state: RunState) -> list[Outgoing]:
    """The held outputs, sent back through the re-keyed topic (with their source coordinates) to be validated
    with the rubric that is now known."""
    key = state.evaluation_run_id.encode()
    return [
        Outgoing("judge_outputs_rekeyed", key, item.raw(), [(H_SOURCE, item.source.encode())]) for item in state.held
    ]


def on_run(
    state: RunState, run: EvaluationRunStarted, rubrics: RubricLookup, now: datetime
) -> tuple[RunState, list[Outgoing]]:
    if state.run is not None:
        return state, resend(state, "run", rubrics)
    state = _copy(state)
    state.run = RunInfo(
        submission_id=run.submission_id,
        expected_judge_models=run.expected_judge_models,
        judge_timeout_seconds=run.judge_timeout_seconds,
        started_at=run.started_at,
    )
    state.rubric_version_id = run.rubric_version_id
    # Judges get the timeout from the later of the run's start and the moment
    # judgeflow learned of the run, so catching up on a backlog (or replaying
    # old runs) does not time out judges whose outputs are still queued.
    started = max(parse_timestamp(run.started_at), now)
    state.deadline = micros(started + timedelta(seconds=run.judge_timeout_seconds))
    return state, _advance(state, rubrics, now, "run")


def on_resume(state: RunState, rubrics: RubricLookup, now: datetime) -> tuple[RunState, list[Outgoing]]:
    """The timer saw the run's rubric arrive: release what was held (a redelivered resume re-sends)."""
    if not state.held:
        return state, resend(state, "resume", rubrics)
    state = _copy(state)
    return state, _advance(state, rubrics, now, "resume")


def resend(state: RunState, trigger: str, rubrics: RubricLookup) -> list[Outgoing]:
    """The records `trigger` caused when it was first processed, regenerated from the state."""
    if state.run is None or state.rubric_version_id is None:
        return []
    rubric = rubrics(state.rubric_version_id)
    if rubric is None:
        return []
    released = _reinjected(state) if state.held and trigger == state.released_by else []
    return released + [
        r
        for i, rev in enumerate(state.revisions)
        if state.trigger_of(rev) == trigger
        for r in _records(state, rubric, i)
    ]


def _advance(state: RunState, rubrics: RubricLookup, now: datetime, trigger: str) -> list[Outgoing]:
    _refresh(state, rubrics)
    if state.run is None or state.rubric_version_id is None or state.waiting_for is not None or state.final:
        return []
    out: list[Outgoing] = []
    if state.held and state.released_by is None:
        state.released_by = trigger
        out += _reinjected(state)
    if not state.final and set(state.run.expected_judge_models) <= {j.judge_model for j in state.judges}:
        out += _revise(state, rubrics, now, trigger, final=True)
    return out


def _in_run_order(state: RunState, judges: list[JudgeSummary]) -> list[JudgeSummary]:
    """The judges in the order the run expects them (others after, as they came): a revision over the same
    judges is the same whatever order their outputs arrived in (held ones come back through a topic)."""
    assert state.run is not None
    rank = {model: i for i, model in enumerate(state.run.expected_judge_models)}
    return sorted(judges, key=lambda j: rank.get(j.judge_model, len(rank)))


def _reconcile(state: RunState, rubric: RubricVersion, judges: list[JudgeSummary]) -> ReconciliationResult | None:
    assert state.run is not None
    try:
        return reconcile_summaries(
            judges, rubric.reconciliation_method, expected_judges=state.run.expected_judge_models, rubric=rubric
        )
    except NoSuccessfulJudge:
        return None


def _revise(state: RunState, rubrics: RubricLookup, now: datetime, trigger: str, *, final: bool) -> list[Outgoing]:
    assert state.rubric_version_id is not None
    rubric = rubrics(state.rubric_version_id)
    assert rubric is not None
    if not final and _reconcile(state, rubric, state.judges) is None:
        return []  # nothing to show yet
    added = state.judges[-1].judge_run_id  # a final revision has every expected judge: never none
    state.revisions.append(
        Revision(
            judges=len(state.judges),
            at=micros(now) - state.first_seen_at,
            trigger=None if trigger == added else trigger,
        )
    )
    if final:
        state.finalized_at = micros(now)
    return _records(state, rubric, len(state.revisions) - 1)


def _records(state: RunState, rubric: RubricVersion, index: int) -> list[Outgoing]:
    """Revision `index + 1` (and, when final, the run's routing decision), a pure function of the state."""
    run, run_id, rev, final = state.run, state.evaluation_run_id, state.revisions[index], state.is_final(index)
    assert run is not None and state.rubric_version_id is not None
    at = state.time(rev.at)
    judges = _in_run_order(state, state.judges[: rev.judges])
    result = _reconcile(state, rubric, judges)
    ids = [j.judge_run_id for j in judges]
    status = "final" if final else "provisional"
    number = index + 1
    records = []
    if result is not None:
        timed_out = any((j.failure_reason or "").startswith(TIMEOUT_MARK) for j in judges)
        revision = ReconciliationRevision(
            event_id=event_id("reconciled", run_id, status, number, *sorted(ids)),
            evaluation_run_id=run_id,
            submission_id=run.submission_id,
            rubric_version_id=state.rubric_version_id,
            revision=number,
            status=status,  # type: ignore[arg-type]
            final_reason=("timeout" if timed_out else "all_judges_in") if final else None,
            judge_run_ids=ids,
            expected_judge_models=run.expected_judge_models,
            result=result,
            emitted_at=at,
        )
        records.append(Outgoing("reconciled", run_id.encode(), revision.model_dump_json().encode()))
    if final:
        decision = route_evaluation(result, judges)
        routed = RoutingDecision(
            event_id=event_id("route-evaluation", run_id),
            subject="evaluation",
            evaluation_run_id=run_id,
            route=decision.route,
            reason=decision.reason,
            judge_ids=[j.judge_model for j in judges],
            input_ids=ids,
            decided_at=at,
        )
        records.append(Outgoing(decision.route, run_id.encode(), routed.model_dump_json().encode()))
    return records


def missing_judges_after_deadline(state: State, now: datetime) -> bool:
    """Cheap pre-check on the stored dict (compact format), for the timer's sweep."""
    deadline = state.get("deadline")
    return "final_at" not in state and isinstance(deadline, int) and deadline <= micros(now)


def timeout_stubs(state: RunState, now: datetime) -> list[JudgeOutput]:
    """Failed stubs for every expected judge that missed the run's timeout.

    Deterministic judge_run_id per (run, judge), so a stub emitted twice is one output."""
    run = state.run
    if run is None or state.final or state.deadline is None or state.deadline > micros(now):
        return []
    present = state.models_in()
    reason = f"{TIMEOUT_MARK} no output within the {run.judge_timeout_seconds:g}s judge timeout"
    return [_stub(state, run, judge, reason) for judge in run.expected_judge_models if judge not in present]


def _stub(
    state: RunState,
    run: RunInfo,
    judge: str,
    reason: str,
    *,
    judge_run_id: str | None = None,
    telemetry_reason: str = "judge timed out",
    started_at: str | None = None,
) -> JudgeOutput:
    unavailable = {
        "tool_call_count": None,
        "step_count": None,
        "error_count": None,
        "error_rate": None,
        "total_tokens_used": None,
        "wall_time_seconds": None,
        "telemetry_unavailable_reason": telemetry_reason,
    }
    return JudgeOutput.model_validate(
        {
            "schema_version": "2.1",
            "judge_model": judge,
            "judge_run_id": judge_run_id or event_id("timeout-stub", state.evaluation_run_id, judge),
            "evaluation_run_id": state.evaluation_run_id,
            "submission_id": run.submission_id,
            "rubric_version_id": state.rubric_version_id,
            "overall_score": 0,
            "lane_scores": [],
            "positive_signal": None,
            "primary_weakness": None,
            "confidence": "low",
            "confidence_reasoning": f"Judge failed: {reason}",
            "flags": [],
            "integrity_adjustments": [],
            "integrity_adjusted_score": 0,
            "telemetry_summary": unavailable,
            "status": "failed",
            "failure_reason": reason,
            "completed_lane_keys": [],
            "judge_started_at": started_at or run.started_at,
            "judge_completed_at": None,
        }
    )


def expired(state: State, now: datetime, retention: timedelta) -> bool:
    """Whether a final run's retention ran out (on the stored dict, compact format)."""
    finalized = state.get("final_at")
    return isinstance(finalized, int) and finalized <= micros(now - retention)


def wake_at(stored: State, retention: timedelta, grace: timedelta) -> int | None:
    """The earliest time (µs since the epoch) the sweep could have a record to send for this run: a final run's
    retention, an open run's deadline (stubs) or its held outputs' grace (alert); every tick while it waits for
    its rubric; None while nothing in it is timed. A lower bound: `RunStage.sweep` sends nothing before it."""
    doc = upgrade(stored)
    if "final_at" in doc:
        finalized = doc["final_at"]
        return finalized + retention // _MICROSECOND if isinstance(finalized, int) else None
    if doc.get("waiting") == "rubric":
        return EVERY_TICK
    times = []
    deadline = doc.get("deadline")
    if isinstance(deadline, int):
        times.append(deadline)  # stubs at the deadline; `run_overdue` comes later still
    if doc.get("held") and "held_too_long" not in (doc.get("alerted") or {}):
        times.append(doc["seen"] + grace // _MICROSECOND)
    return min(times) if times else None


def alerts_due(doc: State, now: datetime, grace: timedelta) -> list[str]:
    """Stale-work alerts a run needs and has not had: past its deadline + grace and still not final
    (`run_overdue`), or holding outputs for its run or rubric longer than the grace (`held_too_long`).
    Reads the stored dict (compact format)."""
    if "final_at" in doc:
        return []
    kinds = []
    since = micros(now - grace)
    deadline = doc.get("deadline")
    if isinstance(deadline, int) and deadline <= since:
        kinds.append("run_overdue")
    if doc.get("held") and doc["seen"] <= since:
        kinds.append("held_too_long")
    return [k for k in kinds if k not in (doc.get("alerted") or {})]


def _alert(state: RunState, kind: str) -> Outgoing:
    waiting = state.waiting_for or ("judges" if state.run is not None else None)
    first_seen = iso(from_micros(state.first_seen_at))
    deadline = iso(from_micros(state.deadline)) if state.deadline is not None else None
    reasons = {
        "run_overdue": f"not final {deadline} + grace: waiting for {waiting}",
        "held_too_long": f"{len(state.held)} output(s) held since {first_seen} waiting for the {waiting}",
    }
    alert = StaleWorkAlert(
        event_id=event_id("stale-alert", kind, state.evaluation_run_id),
        kind=kind,  # type: ignore[arg-type]
        subject="evaluation_run",
        subject_id=state.evaluation_run_id,
        waiting_for=waiting,  # type: ignore[arg-type]
        rubric_version_id=state.rubric_version_id,
        held_events=len(state.held),
        first_seen_at=first_seen,
        deadline=deadline,
        reason=reasons[kind],
        raised_at=state.time(state.alerted[kind]),
    )
    return Outgoing("alerts", state.evaluation_run_id.encode(), alert.model_dump_json().encode())


class RunStage:
    """Validate judge outputs with their run's rubric, reconcile, and route the final result, in one step."""

    name = "reconcile_runs"
    reads: tuple[str, ...] = ("judge_outputs", "judge_outputs_rekeyed", "runs", "reconcile_control")
    writes: tuple[str, ...] = (
        "judge_outputs_valid",
        "judge_outputs_rekeyed",
        "invalid",
        "reconciled",
        "done",
        "human_review",
        "alerts",
    )
    keeps = "run_state"
    does = (
        "validate each judge output (with its run's rubric once known), hold it until run and rubric are known, "
        "provisional revision per judge, final when all expected judges are in; route the final evaluation; "
        "re-key an output whose key is not its evaluation_run_id"
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
    ) -> None:
        self.rubrics = rubrics
        self.hold = hold
        self.drift = drift
        """Drift deltas: every judge a run accepts (output, failed or timed-out stub) is observed once."""
        self.clock = clock
        self.retention = retention
        self.max_payload_bytes = max_payload_bytes
        self.stale_after = stale_after

    def handle(self, record: Inbound, stored: State | None) -> Step:
        now = self.clock()
        key = (record.key or b"").decode(errors="replace")
        raw = record.value or b""
        if record.role == "runs":
            try:
                run = parse_evaluation_run(raw)
            except ContractError as err:
                return Step.emit([dead_letter(raw, record.src, "evaluation_run", err)])
            try:
                require_key(record.key, run.evaluation_run_id, "evaluation_run_id")
            except ContractError as mismatch:
                return Step.emit([dead_letter(raw, record.src, "evaluation_run", mismatch)])
            state = self._load(stored, run.evaluation_run_id, record, now)
            known = state.run is not None
            state, out = on_run(state, run, self.rubrics, now)
            return Step.emit(out) if known else self._keep(state, out, now)
        if record.role == "reconcile_control":
            if stored is None:
                return Step.emit([])
            signal = json.loads(raw or b"{}")
            if signal.get("kind") == "expire":
                return Step.store(None, []) if expired(upgrade(stored), now, self.retention) else Step.emit([])
            if signal.get("kind") == "alert":
                return self._alert(load(stored), str(signal.get("alert")), now)
            state, out = on_resume(load(stored), self.rubrics, now)
            return self._keep(state, out, now)
        known_state = load(stored) if stored else None

        def rubric_for(output: JudgeOutput) -> RubricVersion | None:
            """The rubric of the run this output names, once that run is known here."""
            if (
                known_state is None
                or known_state.run is None
                or known_state.evaluation_run_id != output.evaluation_run_id
            ):
                return None
            return self.rubrics(known_state.rubric_version_id or "")

        origin = record.origin()
        admitted = admit_judge_output(raw, origin, rubric_for=rubric_for, max_bytes=self.max_payload_bytes)
        output = admitted.event
        if output is None:
            if admitted.refused is None or known_state is None:
                return Step.emit(admitted.records)
            state, out = on_refused(known_state, admitted.refused, admitted.records[0], self.rubrics, now)
            self._observe(known_state, state, admitted.refused.judge_completed_at, record, now)
            records = [*admitted.records, *out]
            return Step.emit(records) if state is known_state else self._keep(state, records, now)
        if record.role == "judge_outputs" and key != output.evaluation_run_id:
            return Step.emit(
                [
                    Outgoing(
                        "judge_outputs_rekeyed",
                        output.evaluation_run_id.encode(),
                        raw,
                        [(H_SOURCE, origin.coordinates().encode())],
                    )
                ]
            )
        state = known_state or RunState.new(output.evaluation_run_id, record.src.partition, now)
        known = state.knows(output.judge_run_id)
        checked = rubric_for(output) is not None
        if not known and not checked and not state.final and self.hold is not None and self.hold.full():
            return Step.emit([over_hold_limit(raw, origin, "judge_output", self.hold.limit)])
        final = state.final
        before = state
        state, out = on_output(state, output, origin, raw, self.rubrics, now, checked=checked)
        self._observe(before, state, output.judge_completed_at, record, now)
        # Published as valid only once validated with its rubric: a held output is published when released.
        records = [*(admitted.records if checked else []), *out]
        if final and not known:
            return Step.emit(records, late=True)
        return Step.emit(records) if state is before else self._keep(state, records, now)

    def _observe(
        self, before: RunState, state: RunState, completed_at: str | None, record: Inbound, now: datetime
    ) -> None:
        """Hand the judge this step added to the run (if any) to the drift accumulator, at its completion time."""
        if self.drift is None or len(state.judges) <= len(before.judges):
            return
        fallback = record.timestamp if record.timestamp is not None else now.timestamp()
        at = epoch(completed_at, fallback)
        for judge in state.judges[len(before.judges) :]:
            self.drift.observe_output(judge, at)

    def _alert(self, state: RunState, kind: str, now: datetime) -> Step:
        if kind in state.alerted:
            return Step.emit([_alert(state, kind)])  # a redelivered signal
        if kind not in alerts_due(state.doc(), now, self.stale_after):
            return Step.emit([])  # the run moved on meanwhile
        state = state.model_copy(update={"alerted": {**state.alerted, kind: micros(now) - state.first_seen_at}})
        return self._keep(state, [_alert(state, kind)], now)

    def _load(self, stored: State | None, run_id: str, record: Inbound, now: datetime) -> RunState:
        return load(stored) if stored else RunState.new(run_id, record.src.partition, now)

    def _keep(self, state: RunState, out: list[Outgoing], now: datetime) -> Step:
        doc = state.doc()
        if self.retention <= timedelta(0) and expired(doc, now, self.retention):
            return Step.store(None, out)
        return Step.store(doc, out)

    def wake_at(self, stored: State) -> int | None:
        """When the sweep next needs this stored run (`wake_at`)."""
        return wake_at(stored, self.retention, self.stale_after)

    def sweep(self, states: list[tuple[str, State]]) -> list[Outgoing]:
        """Control and stub records for the runs that need one: a held rubric arrived (resume), judges past
        the timeout (failed stubs, deterministic ids), stale work (alert), or retention ran out (expire)."""
        now = self.clock()
        out: list[Outgoing] = []
        for key, stored in states:
            doc = upgrade(stored)
            if expired(doc, now, self.retention):
                out.append(Outgoing("reconcile_control", key.encode(), EXPIRE))
                continue
            if "final_at" in doc:
                continue
            if doc.get("waiting") == "rubric" and self.rubrics(doc.get("rubric") or ""):
                out.append(Outgoing("reconcile_control", key.encode(), RESUME))
            if missing_judges_after_deadline(doc, now):
                out += [
                    Outgoing("judge_outputs", key.encode(), stub.model_dump_json().encode())
                    for stub in timeout_stubs(load(doc), now)
                ]
            out += [
                Outgoing("reconcile_control", key.encode(), json.dumps({"kind": "alert", "alert": kind}).encode())
                for kind in alerts_due(doc, now, self.stale_after)
            ]
        return out
