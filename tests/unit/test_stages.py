"""The stages as the wiring drives them, without a broker: one consume per event, re-keying, compact state,
retention, and redeliveries that regenerate the same records."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from faust.serializers import codecs

from judgeflow import workload
from judgeflow.cli import main
from schemas import InvalidEvent, ReconciliationRevision, RoutingDecision, StaleWorkAlert, parse_rubric
from streams.claims import ClaimStage
from streams.envelope import SourceRef
from streams.runs import RunStage
from streams.stage import HoldBudget, Inbound, State, Step

NOW = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)
RUBRIC = parse_rubric(workload.rubric())
RUN_ID = workload.stable_id("run", "stages")


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


class Table:
    """What the wiring does with a `Step`: store, delete or leave the key's state."""

    def __init__(self) -> None:
        self.data: dict[str, State] = {}
        self.offset = 0

    def feed(self, stage: Any, role: str, key: str | None, value: Any, follow: bool = False) -> list[Any]:
        """One record through the stage (`follow`: what it sends to a re-keyed topic it reads comes back to it,
        as in the wired topology)."""
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        self.offset += 1
        kb = key.encode() if key is not None else None
        step: Step = stage.handle(Inbound(role, kb, raw, SourceRef(role, 0, self.offset, kb)), self.data.get(key or ""))
        assert all(r.role in stage.writes for r in step.records), "the wiring refuses undeclared writes"
        if step.changed:
            if step.state is None:
                self.data.pop(key or "", None)
            else:
                self.data[key or ""] = json.loads(json.dumps(step.state))
        sent = list(step.records)
        for r in step.records if follow else ():
            if r.role.endswith("_rekeyed") and r.role in stage.reads:
                sent += self.feed(stage, r.role, (r.key or b"").decode(), r.value, follow)
        return sent


def run_stage(clock: Clock, retention: timedelta = timedelta(days=7)) -> RunStage:
    return RunStage(lambda rid: RUBRIC if rid == RUBRIC.rubric_version_id else None, clock=clock,
                    retention=retention, max_payload_bytes=1_000_000)  # fmt: skip


def claim_stage(clock: Clock, retention: timedelta = timedelta(days=7)) -> ClaimStage:
    return ClaimStage(lambda rid: RUBRIC if rid == RUBRIC.rubric_version_id else None, clock=clock,
                      retention=retention, max_payload_bytes=1_000_000)  # fmt: skip


def outputs() -> list[dict[str, Any]]:
    rng = random.Random(4)
    return [workload.judge_output(rng, RUN_ID, m) for m in workload.JUDGE_MODELS]


def test_one_step_validates_reconciles_and_routes_a_run() -> None:
    clock, table = Clock(), Table()
    stage = run_stage(clock)
    sent = table.feed(stage, "runs", RUN_ID, workload.evaluation_run(RUN_ID))
    for doc in outputs():
        sent += table.feed(stage, "judge_outputs", RUN_ID, doc)
    roles = [r.role for r in sent]
    assert roles.count("judge_outputs_valid") == 3 and roles.count("reconciled") == 4
    assert sum(r in ("done", "human_review") for r in roles) == 1
    final = ReconciliationRevision.model_validate_json([r for r in sent if r.role == "reconciled"][-1].value)
    assert final.status == "final" and final.result.judge_count == 3


def test_run_state_is_compact() -> None:
    clock, table = Clock(), Table()
    stage = run_stage(clock)
    table.feed(stage, "runs", RUN_ID, workload.evaluation_run(RUN_ID))
    for doc in outputs():
        table.feed(stage, "judge_outputs", RUN_ID, doc)
    size = len(codecs.dumps("json", table.data[RUN_ID]))  # the changelog record's value
    print(f"[measured] run state after 3 judges: {size} bytes")
    assert size <= 1024  # whole documents would be ~16 KB


def test_redelivered_output_regenerates_the_same_records() -> None:
    clock, table = Clock(), Table()
    stage = run_stage(clock)
    table.feed(stage, "runs", RUN_ID, workload.evaluation_run(RUN_ID))
    docs = outputs()
    first = [table.feed(stage, "judge_outputs", RUN_ID, d) for d in docs]
    before = dict(table.data)
    clock.now += timedelta(minutes=3)
    for doc, original in zip(docs, first, strict=True):
        again = table.feed(stage, "judge_outputs", RUN_ID, doc)
        assert [(r.role, r.key, r.value) for r in again] == [(r.role, r.key, r.value) for r in original]
    assert table.data == before


def test_misskeyed_output_is_rekeyed_not_dead_lettered() -> None:
    clock, table = Clock(), Table()
    [record] = table.feed(run_stage(clock), "judge_outputs", "wrong-key", outputs()[0])
    assert record.role == "judge_outputs_rekeyed" and record.key == RUN_ID.encode()
    assert dict(record.headers)["judgeflow-source"] == b"judge_outputs/0/1"
    assert table.data == {}


def test_final_run_is_deleted_after_retention() -> None:
    clock, table = Clock(), Table()
    stage = run_stage(clock, timedelta(hours=1))
    table.feed(stage, "runs", RUN_ID, workload.evaluation_run(RUN_ID))
    for doc in outputs():
        table.feed(stage, "judge_outputs", RUN_ID, doc)
    assert stage.sweep([(RUN_ID, table.data[RUN_ID])]) == []
    clock.now += timedelta(hours=1, seconds=1)
    [expire] = stage.sweep([(RUN_ID, table.data[RUN_ID])])
    assert expire.role == "reconcile_control"
    table.feed(stage, "reconcile_control", RUN_ID, expire.value)
    assert RUN_ID not in table.data


def test_zero_retention_deletes_at_once_and_a_late_output_is_held_not_lost() -> None:
    clock, table = Clock(), Table()
    stage = run_stage(clock, timedelta(0))
    table.feed(stage, "runs", RUN_ID, workload.evaluation_run(RUN_ID))
    docs = outputs()
    for doc in docs:
        table.feed(stage, "judge_outputs", RUN_ID, doc)
    assert table.data == {}
    late = table.feed(stage, "judge_outputs", RUN_ID, docs[0])
    assert late == []  # held, as for a run not seen yet (its raw event is projected from the input topic)
    assert table.data[RUN_ID]["waiting"] == "run" and len(table.data[RUN_ID]["held"]) == 1


def claim(judge: str, verdict: str, score: float, conf: float = 0.9) -> dict[str, Any]:
    doc = workload.claim_check(random.Random(1), "claim-x", judge_id=judge, verdict=verdict, confidence=conf)
    return {**doc, "score": score, "rubric_version_id": None}


def test_claim_in_one_step_and_state_per_claim() -> None:
    clock, table = Clock(), Table()
    stage = claim_stage(clock)
    sent = table.feed(stage, "checks", "claim-x", claim("judge-a", "pass", 0.6))
    assert [r.role for r in sent] == ["checks_valid", "second_judge"]
    size = len(json.dumps(table.data["claim-x"], separators=(",", ":")))
    print(f"[measured] claim state after one check: {size} bytes")
    assert size <= 300
    sent = table.feed(stage, "checks", "claim-x", claim("judge-b", "pass", 0.9))
    decision = RoutingDecision.model_validate_json(sent[-1].value)
    assert (decision.route, decision.reason) == ("done", "aggregated_pass")
    again = table.feed(stage, "checks", "claim-x", claim("judge-b", "pass", 0.9))
    assert [r.value for r in again] == [r.value for r in sent]


def test_decided_claim_expires_and_a_redelivery_after_expiry_keeps_its_event_id() -> None:
    clock, table = Clock(), Table()
    stage = claim_stage(clock, timedelta(0))
    first = table.feed(stage, "checks", "claim-x", claim("judge-a", "pass", 0.95))
    assert first[-1].role == "done" and table.data == {}
    clock.now += timedelta(days=1)
    again = table.feed(stage, "checks", "claim-x", claim("judge-a", "pass", 0.95))
    ids = [RoutingDecision.model_validate_json(r.value).event_id for r in (first[-1], again[-1])]
    assert ids[0] == ids[1]


def test_misskeyed_check_is_rekeyed() -> None:
    clock, table = Clock(), Table()
    [record] = table.feed(claim_stage(clock), "checks", None, claim("judge-a", "pass", 0.95))
    assert record.role == "checks_rekeyed" and record.key == b"claim-x"


def test_topology_is_printed_from_the_wired_app() -> None:
    result = CliRunner().invoke(main, ["topology"], env={"JUDGEFLOW_TOPIC_PREFIX": ""})
    assert result.exit_code == 0, result.output
    golden = (Path(__file__).parent / "topology.golden.txt").read_text()
    assert result.output == golden


def test_output_without_its_run_raises_one_alert_and_the_run_still_gets_one_decision() -> None:
    clock, table = Clock(), Table()
    stage = run_stage(clock)
    docs = outputs()
    table.feed(stage, "judge_outputs", RUN_ID, docs[0])
    assert stage.sweep([(RUN_ID, table.data[RUN_ID])]) == []
    clock.now += timedelta(minutes=6)
    [signal] = [r for r in stage.sweep([(RUN_ID, table.data[RUN_ID])]) if r.role == "reconcile_control"]
    [alert] = table.feed(stage, "reconcile_control", RUN_ID, signal.value)
    parsed = StaleWorkAlert.model_validate_json(alert.value)
    assert (alert.role, parsed.kind, parsed.subject_id, parsed.held_events) == ("alerts", "held_too_long", RUN_ID, 1)
    assert stage.sweep([(RUN_ID, table.data[RUN_ID])]) == []  # raised once
    again = table.feed(stage, "reconcile_control", RUN_ID, signal.value)  # a redelivered signal
    assert [r.value for r in again] == [alert.value]
    sent = table.feed(stage, "runs", RUN_ID, workload.evaluation_run(RUN_ID), follow=True)
    for doc in docs[1:]:
        sent += table.feed(stage, "judge_outputs", RUN_ID, doc)
    assert sum(r.role in ("done", "human_review") for r in sent) == 1


def test_run_past_its_deadline_and_grace_raises_run_overdue() -> None:
    clock, table = Clock(), Table()
    stage = RunStage(lambda _rid: None, clock=clock, retention=timedelta(days=7), max_payload_bytes=1_000_000)
    table.feed(stage, "runs", RUN_ID, workload.evaluation_run(RUN_ID, timeout_s=30))  # its rubric never comes
    clock.now += timedelta(seconds=30 + 299)
    assert [r for r in stage.sweep([(RUN_ID, table.data[RUN_ID])]) if b"alert" in r.value] == []
    clock.now += timedelta(seconds=2)
    [signal] = [r for r in stage.sweep([(RUN_ID, table.data[RUN_ID])]) if b"alert" in r.value]
    [alert] = table.feed(stage, "reconcile_control", RUN_ID, signal.value)
    parsed = StaleWorkAlert.model_validate_json(alert.value)
    assert (parsed.kind, parsed.waiting_for) == ("run_overdue", "rubric")


def test_a_full_hold_dead_letters_instead_of_holding() -> None:
    clock, table = Clock(), Table()
    hold = HoldBudget(1)
    stage = RunStage(lambda _rid: None, clock=clock, retention=timedelta(days=7), max_payload_bytes=1_000_000,
                     hold=hold)  # fmt: skip
    docs = outputs()
    table.feed(stage, "judge_outputs", RUN_ID, docs[0])
    hold.note(RUN_ID, len(table.data[RUN_ID]["held"]))
    [dlq] = table.feed(stage, "judge_outputs", RUN_ID, docs[1])
    assert dlq.role == "invalid" and InvalidEvent.model_validate_json(dlq.value).error_codes == ["HOLD_LIMIT_EXCEEDED"]
    assert len(table.data[RUN_ID]["held"]) == 1


def test_check_held_for_its_rubric_too_long_raises_an_alert() -> None:
    clock, table = Clock(), Table()
    stage = ClaimStage(lambda _rid: None, clock=clock, retention=timedelta(days=7), max_payload_bytes=1_000_000)
    doc = {**claim("judge-a", "pass", 0.95), "rubric_version_id": RUBRIC.rubric_version_id}
    assert table.feed(stage, "checks", "claim-x", doc) == []  # published once its rubric has validated it
    clock.now += timedelta(minutes=6)
    [signal] = stage.sweep([("claim-x", table.data["claim-x"])])
    [alert] = table.feed(stage, "claims_control", "claim-x", signal.value)
    parsed = StaleWorkAlert.model_validate_json(alert.value)
    assert (parsed.kind, parsed.subject, parsed.waiting_for) == ("held_too_long", "claim", "rubric")
    assert stage.sweep([("claim-x", table.data["claim-x"])]) == []


def test_output_for_a_final_run_is_projected_and_counted_late() -> None:
    clock, table = Clock(), Table()
    stage = run_stage(clock)
    table.feed(stage, "runs", RUN_ID, workload.evaluation_run(RUN_ID))
    docs = outputs()
    for doc in docs:
        table.feed(stage, "judge_outputs", RUN_ID, doc)
    late = {**docs[0], "judge_run_id": workload.stable_id("late-judge")}
    step = stage.handle(Inbound("judge_outputs", RUN_ID.encode(), json.dumps(late).encode(),
                                SourceRef("judge_outputs", 0, 99)), table.data[RUN_ID])  # fmt: skip
    assert step.late and not step.changed and [r.role for r in step.records] == ["judge_outputs_valid"]


def test_the_run_step_hands_each_accepted_judge_to_drift_once_at_its_completion_hour() -> None:
    """Drift counts a judge output when its run accepts it (lane scores on the 0-1 scale, in the hour of its
    `judge_completed_at`); a redelivery the run already knows adds nothing; a timeout stub counts as failed
    and timed out."""
    from streams.drift import DriftAccumulator, DriftOptions

    clock, table = Clock(), Table()
    acc = DriftAccumulator(DriftOptions(windows=(3600,)))
    stage = RunStage(lambda rid: RUBRIC if rid == RUBRIC.rubric_version_id else None, clock=clock,
                     retention=timedelta(days=7), max_payload_bytes=1_000_000, drift=acc)  # fmt: skip
    table.feed(stage, "runs", RUN_ID, workload.evaluation_run(RUN_ID, timeout_s=30.0))
    docs = outputs()[:2]
    for doc in docs + docs[:1]:  # the first one redelivered
        table.feed(stage, "judge_outputs", RUN_ID, doc)
    clock.now += timedelta(minutes=5)  # the third judge times out: the sweep's stub comes back as input
    for key, state in list(table.data.items()):
        for record in stage.sweep([(key, state)]):
            if record.role == "judge_outputs":
                table.feed(stage, "judge_outputs", RUN_ID, json.loads(record.value))
    counted = {judge: c for (judge, _size, _start), c in acc.outputs.items()}
    assert sorted(counted) == sorted(workload.JUDGE_MODELS)
    for doc in docs:
        n, failed, timed_out, low, lanes = counted[doc["judge_model"]]
        assert (n, failed, timed_out) == (1, 0, 0) and low == (doc["confidence"] == "low")
        assert lanes == {lane["lane_key"]: [1.0, lane["lane_score"] / 100, (lane["lane_score"] / 100) ** 2]
                         for lane in doc["lane_scores"]}  # fmt: skip
        completed = datetime.fromisoformat(doc["judge_completed_at"].replace("Z", "+00:00")).timestamp()
        [start] = [s for (j, _size, s) in acc.outputs if j == doc["judge_model"]]
        assert start == completed - completed % 3600
    [stub] = [c for j, c in counted.items() if j not in {d["judge_model"] for d in docs}]
    assert stub[:3] == [1, 1, 1]
