"""The run and claim state machines, without Faust: out-of-order arrival,
holding, duplicates, timeouts, second judge."""

from __future__ import annotations

import base64
import itertools
import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from judgeflow import workload
from schemas import (
    ClaimCheck,
    EvaluationRunStarted,
    InvalidEvent,
    ReconciliationRevision,
    RoutingDecision,
    RubricVersion,
    parse_claim_check,
    parse_evaluation_run,
    parse_judge_output,
    parse_rubric,
)
from streams import claims, runs
from streams.envelope import SourceRef
from streams.stage import Inbound

NOW = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)
RUBRIC = parse_rubric(workload.rubric())
RUN_ID = workload.stable_id("run", "sm")


SRC = SourceRef("judge.outputs", 0, 1)


def raw(output: Any) -> bytes:
    return output.model_dump_json().encode()


def lookup(known: bool = True) -> Any:
    return lambda rid: RUBRIC if known and rid == RUBRIC.rubric_version_id else None


def run_event(timeout: float = 30.0) -> EvaluationRunStarted:
    return parse_evaluation_run(workload.evaluation_run(RUN_ID, timeout_s=timeout))


def outputs() -> list[Any]:
    rng = random.Random(4)
    return [parse_judge_output(workload.judge_output(rng, RUN_ID, m)) for m in workload.JUDGE_MODELS]


def drive(steps: list[tuple[str, Any]], rubric_known_from: int = 0,
          rekeyed_last: bool = False) -> tuple[runs.RunState, list[Any]]:  # fmt: skip
    """The steps through `RunStage.handle` as the wiring runs it: states stored as Faust stores them, records
    the stage sends to the re-keyed topic read back by the same stage (`rekeyed_last`: only after every step,
    as when that topic lags behind)."""
    known = {"rubric": False}
    stage = runs.RunStage(lambda rid: RUBRIC if known["rubric"] and rid == RUBRIC.rubric_version_id else None,
                          clock=lambda: NOW, retention=timedelta(days=7), max_payload_bytes=1_000_000)  # fmt: skip
    stored: dict[str, Any] | None = None
    sent: list[Any] = []
    key = RUN_ID.encode()
    deferred: list[tuple[str, bytes, SourceRef]] = []

    def handle(role: str, value: bytes, src: SourceRef) -> list[Any]:
        """One record through the stage, its state stored as Faust stores it; the records it sends to the
        re-keyed topic."""
        nonlocal stored
        step = stage.handle(Inbound(role, key, value, src, {}), stored)
        if step.changed:
            stored = None if step.state is None else json.loads(json.dumps(step.state))
        sent.extend(step.records)
        return [r for r in step.records if r.role == "judge_outputs_rekeyed"]

    for i, (kind, item) in enumerate([*steps, ("rekeyed", None)]):
        known["rubric"] = i >= rubric_known_from
        if kind == "rekeyed":
            pending, deferred = deferred, []
            while pending:
                role, value, src = pending.pop(0)
                pending += [(r.role, r.value, src) for r in handle(role, value, src)]
            continue
        role, value = {"run": ("runs", item and raw(item)), "output": ("judge_outputs", item and raw(item)),
                       "resume": ("reconcile_control", runs.RESUME)}[kind]  # fmt: skip
        pending: list[tuple[str, bytes, SourceRef]] = [(role, value, SourceRef(role, 0, i, key))]
        while pending:
            role, value, src = pending.pop(0)
            back = [(r.role, r.value, SourceRef(r.role, 0, i, key)) for r in handle(role, value, src)]
            if rekeyed_last:
                deferred += back
            else:
                pending += back
    return (runs.load(stored) if stored else runs.RunState.new(RUN_ID, 0, NOW)), sent


def revisions(sent: list[Any]) -> list[ReconciliationRevision]:
    return [ReconciliationRevision.model_validate_json(r.value) for r in sent if r.role == "reconciled"]


def test_in_order_run_emits_provisionals_then_final_and_route() -> None:
    state, sent = drive([("run", run_event())] + [("output", o) for o in outputs()])
    revs = revisions(sent)
    assert [(r.revision, r.status) for r in revs] == [(1, "provisional"), (2, "provisional"),
                                                      (3, "provisional"), (4, "final")]  # fmt: skip
    assert revs[-1].final_reason == "all_judges_in" and revs[-1].result.judge_count == 3
    assert state.final and [r.role for r in sent if r.role in ("done", "human_review")]


def test_every_arrival_order_ends_in_the_same_final_revision() -> None:
    ref_state, ref = drive([("run", run_event())] + [("output", o) for o in outputs()])
    final = revisions(ref)[-1]
    for perm in itertools.permutations([("run", run_event())] + [("output", o) for o in outputs()]):
        for rubric_from in (0, 2, 4):
            steps = list(perm) + ([("resume", None)] if rubric_from else [])
            _, sent = drive(steps, rubric_known_from=rubric_from)
            got = revisions(sent)[-1]
            assert got.status == "final"
            assert (got.event_id, got.revision, got.result) == (final.event_id, final.revision, final.result)
            assert sorted(got.judge_run_ids) == sorted(final.judge_run_ids)


def test_a_held_output_coming_back_late_changes_no_final_result() -> None:
    """Released outputs return through a topic; others may be accepted before them. The final revision
    lists the judges in the run's order, so it is the same as for outputs that arrived in order."""
    _, ref = drive([("run", run_event())] + [("output", o) for o in outputs()])
    first, *rest = outputs()
    _, sent = drive([("output", first), ("run", run_event()), *[("output", o) for o in rest]], rekeyed_last=True)
    late, final = revisions(sent)[-1], revisions(ref)[-1]
    assert late.status == "final" and late.event_id == final.event_id
    assert late.result.model_dump_json() == final.result.model_dump_json()  # judges in the same order


def test_held_until_rubric_and_run() -> None:
    state, sent = drive([("output", outputs()[0])])
    assert sent == [] and state.waiting_for == "run" and len(state.held) == 1
    state, sent = drive([("output", outputs()[0]), ("run", run_event())], rubric_known_from=9)
    assert sent == [] and state.waiting_for == "rubric"


def test_duplicate_output_changes_nothing_and_resends_the_same_bytes() -> None:
    state, first = drive([("run", run_event()), ("output", outputs()[0])])
    again, resent = runs.on_output(state, outputs()[0], SRC, raw(outputs()[0]), lookup(), NOW + timedelta(1),
                                   checked=True)  # fmt: skip
    assert again == state and [r.value for r in resent] == [r.value for r in first if r.role == "reconciled"]


def test_an_output_its_rubric_refuses_is_dead_lettered_and_counts_as_its_judge_failing() -> None:
    """DESIGN decision 13: the bytes received go to the dead letter with the code, a failed record takes the
    output's place (never its scores), and the run reconciles without that judge at once: no timeout."""
    docs = [workload.judge_output(random.Random(4 + i), RUN_ID, m) for i, m in enumerate(workload.JUDGE_MODELS)]
    docs[1]["lane_scores"][0]["lane_key"] = "vibes"
    docs[1]["completed_lane_keys"][0] = "vibes"
    for held in (False, True):  # refused on arrival, or when its held output is released
        steps: list[tuple[str, Any]] = [("output", parse_judge_output(d)) for d in docs]
        steps = [*steps, ("run", run_event())] if held else [("run", run_event()), *steps]
        state, sent = drive(steps)
        [dlq] = [InvalidEvent.model_validate_json(r.value) for r in sent if r.role == "invalid"]
        assert dlq.error_codes == ["UNKNOWN_LANE_KEY"]
        assert base64.b64decode(dlq.original_b64) == raw(parse_judge_output(docs[1]))
        valid = [json.loads(r.value) for r in sent if r.role == "judge_outputs_valid"]
        refused = [v for v in valid if v["judge_model"] == docs[1]["judge_model"]]
        assert [(v["status"], v["failure_reason"], v["lane_scores"]) for v in refused] == [
            ("failed", "UNKNOWN_LANE_KEY", [])]  # fmt: skip
        final = revisions(sent)[-1]
        assert final.status == "final" and final.final_reason == "all_judges_in" and state.final
        assert final.result.successful_judge_count == 2
        assert final.result.notice == f"1 judge unavailable: {docs[1]['judge_model']} failed"
        assert state.held == [] and runs.timeout_stubs(state, NOW + timedelta(hours=1)) == []


def test_timeout_stubs_then_final_with_notice() -> None:
    run = run_event(timeout=5)
    state, _ = drive([("run", run), ("output", outputs()[0]), ("output", outputs()[1])])
    assert runs.timeout_stubs(state, NOW + timedelta(seconds=4)) == []
    [stub] = runs.timeout_stubs(state, NOW + timedelta(seconds=6))
    assert stub.status == "failed" and stub.judge_model == workload.JUDGE_MODELS[2]
    assert stub.failure_reason and stub.failure_reason.startswith("timeout:")
    assert runs.timeout_stubs(state, NOW + timedelta(seconds=6))[0].judge_run_id == stub.judge_run_id
    state, sent = runs.on_output(state, stub, SRC, raw(stub), lookup(), NOW, checked=True)
    final = revisions(sent)[-1]
    assert final.status == "final" and final.final_reason == "timeout"
    assert final.result.successful_judge_count == 2
    assert final.result.notice == f"1 judge unavailable: {workload.JUDGE_MODELS[2]} timed out"
    assert runs.timeout_stubs(state, NOW + timedelta(seconds=60)) == []


def test_all_judges_failed_routes_to_humans() -> None:
    run = run_event(timeout=1)
    state, _ = drive([("run", run)])
    sent = []
    for stub in runs.timeout_stubs(state, NOW + timedelta(seconds=2)):
        state, out = runs.on_output(state, stub, SRC, raw(stub), lookup(), NOW, checked=True)
        sent += out
    [decision] = [RoutingDecision.model_validate_json(r.value) for r in sent if r.role == "human_review"]
    assert decision.reason == "no_successful_judge" and state.final


def check(judge: str, verdict: str, score: float | None, conf: float = 0.9, rubric: str | None = None) -> ClaimCheck:
    doc = workload.claim_check(random.Random(1), "claim-x", judge_id=judge, verdict=verdict, confidence=conf)
    return parse_claim_check({**doc, "score": score, "rubric_version_id": rubric})


def decisions(sent: list[Any]) -> list[RoutingDecision]:
    return [RoutingDecision.model_validate_json(r.value) for r in sent]


def test_second_judge_flow() -> None:
    state = claims.ClaimState(claim_id="claim-x", partition=0)
    state, out = claims.on_check(state, check("judge-a", "pass", 0.6), lookup(), NOW)
    [first] = decisions(out)
    assert (first.route, first.reason) == ("second_judge", "borderline")
    state, out = claims.on_check(state, check("judge-b", "pass", 0.9), lookup(), NOW)
    [second] = decisions(out)
    assert (second.route, second.reason, second.verdict) == ("done", "aggregated_pass", "pass")
    assert second.judge_ids == ["judge-a", "judge-b"] and second.agreement == 1.0
    again, resent = claims.on_check(state, check("judge-b", "pass", 0.9), lookup(), NOW)
    assert again == state and [r.value for r in resent] == [r.value for r in out]


def test_second_judge_tie_goes_to_humans_by_default_and_by_rule() -> None:
    state = claims.ClaimState(claim_id="claim-x", partition=0)
    state, _ = claims.on_check(state, check("judge-a", "fail", 0.5), lookup(), NOW)
    state, out = claims.on_check(state, check("judge-b", "pass", 0.9), lookup(), NOW)
    assert (decisions(out)[0].route, decisions(out)[0].reason) == ("human_review", "tie_unclear")
    strict: RubricVersion = RUBRIC.model_copy(update={"tie_rule": "fail"})
    state = claims.ClaimState(claim_id="claim-x", partition=0)
    rid = RUBRIC.rubric_version_id
    state, _ = claims.on_check(state, check("judge-a", "fail", 0.5, rubric=rid), lambda _: strict, NOW)
    state, out = claims.on_check(state, check("judge-b", "pass", 0.9, rubric=rid), lambda _: strict, NOW)
    assert (decisions(out)[0].route, decisions(out)[0].verdict) == ("done", "fail")


def test_check_with_unknown_rubric_is_held_then_resumed() -> None:
    state = claims.ClaimState(claim_id="claim-x", partition=0)
    rid = RUBRIC.rubric_version_id
    state, out = claims.on_check(state, check("judge-a", "pass", 0.95, rubric=rid), lookup(False), NOW)
    assert out == [] and state.waiting_for == "rubric"
    state, out = claims.on_resume(state, lookup(), NOW)
    assert [r.role for r in out] == ["checks_valid", "done"]  # published as valid once its rubric validated it
    assert decisions(out[1:])[0].route == "done" and state.waiting_for is None


def test_a_run_learned_late_gives_judges_the_full_timeout() -> None:
    late = NOW + timedelta(hours=2)  # a backlog: the run event is processed two hours after it started
    state, _ = runs.on_run(runs.RunState.new(RUN_ID, 0, late), run_event(timeout=30), lookup(), late)
    assert runs.timeout_stubs(state, late + timedelta(seconds=29)) == []
    assert len(runs.timeout_stubs(state, late + timedelta(seconds=31))) == 3
