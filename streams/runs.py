"""Per-evaluation-run state machine: pure, so it is unit-tested without Faust.

An evaluation run collects judge outputs. Outputs that arrive before their
run or rubric are held. Once both are known, each accepted output yields a
provisional revision on `evaluation.reconciled`; when every expected judge
is in (a timed-out judge counts once its failed stub arrives) the run emits a
final revision and its routing decision (DESIGN decisions 7 and 10).
Nothing here reads a clock: `now` is passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from schemas import (
    ContractError,
    EvaluationRunStarted,
    JudgeOutput,
    ReconciliationRevision,
    RoutingDecision,
    RubricVersion,
    check_against_rubric,
)
from schemas.types import parse_timestamp
from streams.edge import Outgoing, SourceRef, dead_letter
from streams.ids import event_id
from streams.outbox import from_dict, to_dict
from streams.reconcile import NoSuccessfulJudge, reconcile
from streams.routing import route_evaluation

TIMEOUT_MARK = "timeout:"
RubricLookup = Callable[[str], RubricVersion | None]


class HeldOutput(BaseModel):
    output: JudgeOutput
    source: str = ""


class RunState(BaseModel):
    evaluation_run_id: str
    partition: int
    run: EvaluationRunStarted | None = None
    held: list[HeldOutput] = Field(default_factory=list)
    accepted: list[JudgeOutput] = Field(default_factory=list)
    revision: int = 0
    final: bool = False
    first_seen_at: str
    run_seen_at: str | None = None
    outbox: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    # Flat copies for the timer, which scans without parsing the whole state.
    deadline: str | None = None
    waiting_for: str | None = None
    rubric_version_id: str | None = None

    @classmethod
    def new(cls, run_id: str, partition: int, now: datetime) -> RunState:
        return cls(evaluation_run_id=run_id, partition=partition, first_seen_at=_iso(now))

    def models_in(self) -> set[str]:
        return {o.judge_model for o in self.accepted} | {h.output.judge_model for h in self.held}

    def knows(self, judge_run_id: str) -> bool:
        return any(o.judge_run_id == judge_run_id for o in self.accepted) or any(
            h.output.judge_run_id == judge_run_id for h in self.held
        )


def _copy(state: RunState) -> RunState:
    """A copy safe to change: the containers are new, their items (frozen
    contract models, outbox entries that are never edited) are shared.
    A deep copy cost more than the rest of the transition."""
    return state.model_copy(update={"held": list(state.held), "accepted": list(state.accepted),
                                    "outbox": dict(state.outbox)})  # fmt: skip


def _iso(ts: datetime) -> str:
    return ts.isoformat().replace("+00:00", "Z")


def _refresh(state: RunState, rubrics: RubricLookup) -> None:
    if state.run is None:
        state.waiting_for = "run"
        state.rubric_version_id = state.held[0].output.rubric_version_id if state.held else None
        return
    state.rubric_version_id = state.run.rubric_version_id
    state.waiting_for = None if rubrics(state.run.rubric_version_id) else "rubric"
    # Judges get the timeout from the later of the run's start and the moment
    # judgeflow learned of the run, so catching up on a backlog (or replaying
    # old runs) does not time out judges whose outputs are still queued.
    started = parse_timestamp(state.run.started_at)
    if state.run_seen_at is not None:
        started = max(started, parse_timestamp(state.run_seen_at))
    state.deadline = _iso(started + timedelta(seconds=state.run.judge_timeout_seconds))


def on_output(
    state: RunState, output: JudgeOutput, source: str, rubrics: RubricLookup, now: datetime
) -> tuple[RunState, list[Outgoing]]:
    """A validated judge output arrived. Duplicates (same judge_run_id) change nothing."""
    if state.knows(output.judge_run_id):
        return state, resend(state, output.judge_run_id)
    state = _copy(state)
    state.held.append(HeldOutput(output=output, source=source))
    out = _advance(state, rubrics, now)
    state.outbox[output.judge_run_id] = [to_dict(r) for r in out]
    return state, out


def on_run(
    state: RunState, run: EvaluationRunStarted, rubrics: RubricLookup, now: datetime
) -> tuple[RunState, list[Outgoing]]:
    if state.run is not None:
        return state, resend(state, "run")
    state = _copy(state)
    state.run = run
    state.run_seen_at = _iso(now)
    out = _advance(state, rubrics, now)
    state.outbox["run"] = [to_dict(r) for r in out]
    return state, out


def on_resume(state: RunState, rubrics: RubricLookup, now: datetime) -> tuple[RunState, list[Outgoing]]:
    """The timer saw the run's rubric arrive: release what was held."""
    state = _copy(state)
    out = _advance(state, rubrics, now)
    if out:
        state.outbox[f"resume-{state.revision}"] = [to_dict(r) for r in out]
    return state, out


def resend(state: RunState, trigger: str) -> list[Outgoing]:
    return [from_dict(r) for r in state.outbox.get(trigger, [])]


def _advance(state: RunState, rubrics: RubricLookup, now: datetime) -> list[Outgoing]:
    _refresh(state, rubrics)
    if state.run is None or state.waiting_for is not None or state.final:
        return []
    rubric = rubrics(state.run.rubric_version_id)
    assert rubric is not None
    out: list[Outgoing] = []
    held, state.held = state.held, []
    for item in held:
        try:
            if item.output.rubric_version_id != state.run.rubric_version_id:
                raise ContractError.single(
                    "RUBRIC_MISMATCH",
                    f"run uses rubric {state.run.rubric_version_id}",
                    ("rubric_version_id",),
                )
            check_against_rubric(item.output, rubric)
        except ContractError as err:
            out.append(dead_letter(item.output.model_dump_json().encode(), _source(item.source),
                                   "judge_output", err))  # fmt: skip
            continue
        state.accepted.append(item.output)
        out.extend(_revision(state, rubric, now, final=False))
    if not state.final and set(state.run.expected_judge_models) <= {o.judge_model for o in state.accepted}:
        out.extend(_revision(state, rubric, now, final=True))
    return out


def _source(coordinates: str) -> SourceRef:
    topic, _, rest = coordinates.rpartition("/")
    topic, _, partition = topic.rpartition("/")
    try:
        return SourceRef(topic, int(partition), int(rest))
    except ValueError:
        return SourceRef(coordinates or "unknown", -1, -1)


def _revision(state: RunState, rubric: RubricVersion, now: datetime, *, final: bool) -> list[Outgoing]:
    assert state.run is not None
    run = state.run
    try:
        result = reconcile(state.accepted, rubric.reconciliation_method,
                           expected_judges=run.expected_judge_models, rubric=rubric)  # fmt: skip
    except NoSuccessfulJudge:
        result = None
    if result is None and not final:
        return []  # nothing to show yet
    state.revision += 1
    ids = [o.judge_run_id for o in state.accepted]
    status = "final" if final else "provisional"
    records = []
    if result is not None:
        timed_out = any((o.failure_reason or "").startswith(TIMEOUT_MARK) for o in state.accepted)
        revision = ReconciliationRevision(
            event_id=event_id("reconciled", run.evaluation_run_id, status, state.revision, *sorted(ids)),
            evaluation_run_id=run.evaluation_run_id,
            submission_id=run.submission_id,
            rubric_version_id=run.rubric_version_id,
            revision=state.revision,
            status=status,  # type: ignore[arg-type]
            final_reason=("timeout" if timed_out else "all_judges_in") if final else None,
            judge_run_ids=ids,
            expected_judge_models=run.expected_judge_models,
            result=result,
            emitted_at=_iso(now),
        )
        records.append(Outgoing("reconciled", run.evaluation_run_id.encode(), revision.model_dump_json().encode()))
    if final:
        state.final = True
        decision = route_evaluation(result, state.accepted)
        routed = RoutingDecision(
            event_id=event_id("route-evaluation", run.evaluation_run_id),
            subject="evaluation",
            evaluation_run_id=run.evaluation_run_id,
            route=decision.route,
            reason=decision.reason,
            judge_ids=[o.judge_model for o in state.accepted],
            input_ids=ids,
            decided_at=_iso(now),
        )
        records.append(Outgoing(decision.route, run.evaluation_run_id.encode(), routed.model_dump_json().encode()))
    return records


def missing_judges_after_deadline(state: dict[str, Any], now: datetime) -> bool:
    """Cheap pre-check on the stored dict, for the timer's sweep."""
    return not state.get("final") and state.get("deadline") is not None and parse_timestamp(state["deadline"]) <= now


def timeout_stubs(state: RunState, now: datetime) -> list[JudgeOutput]:
    """Failed stubs for every expected judge that missed the run's timeout.

    Deterministic judge_run_id per (run, judge), so a stub emitted twice is one output."""
    run = state.run
    if run is None or state.final or state.deadline is None or parse_timestamp(state.deadline) > now:
        return []
    present = state.models_in()
    stubs = []
    for judge in run.expected_judge_models:
        if judge in present:
            continue
        reason = f"{TIMEOUT_MARK} no output within the {run.judge_timeout_seconds:g}s judge timeout"
        stubs.append(
            JudgeOutput.model_validate(
                {
                    "schema_version": "2.1",
                    "judge_model": judge,
                    "judge_run_id": event_id("timeout-stub", run.evaluation_run_id, judge),
                    "evaluation_run_id": run.evaluation_run_id,
                    "submission_id": run.submission_id,
                    "rubric_version_id": run.rubric_version_id,
                    "overall_score": 0,
                    "lane_scores": [],
                    "positive_signal": None,
                    "primary_weakness": None,
                    "confidence": "low",
                    "confidence_reasoning": f"Judge failed: {reason}",
                    "flags": [],
                    "integrity_adjustments": [],
                    "integrity_adjusted_score": 0,
                    "telemetry_summary": {
                        "tool_call_count": None,
                        "step_count": None,
                        "error_count": None,
                        "error_rate": None,
                        "total_tokens_used": None,
                        "wall_time_seconds": None,
                        "telemetry_unavailable_reason": "judge timed out",
                    },  # fmt: skip
                    "status": "failed",
                    "failure_reason": reason,
                    "completed_lane_keys": [],
                    "judge_started_at": run.started_at,
                    "judge_completed_at": None,
                }
            )
        )
    return stubs
