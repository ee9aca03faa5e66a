"""Stateful agents on the real broker: timeouts, out-of-order arrival,
redelivery after SIGKILL, the second judge, and reconciliation throughput."""

from __future__ import annotations

import json
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from judgeflow import workload
from schemas import ReconciliationRevision, RoutingDecision
from streams.topics import TopicNames
from tests.conftest import MEASURED
from tests.support import Worker, consume_until, create_topics, produce, unique_prefix

pytestmark = pytest.mark.integration
FAST = {"JUDGEFLOW_TIMER_INTERVAL": "0.5"}


def setup(kafka: str) -> tuple[TopicNames, str]:
    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka, names)
    return names, prefix


def rubric_record(names: TopicNames, rubric_id: str) -> tuple[str, bytes, bytes]:
    return (names.rubrics, rubric_id.encode(), json.dumps(workload.rubric(rubric_id)).encode())


def run_record(names: TopicNames, run_id: str, rubric_id: str, timeout: float = 30.0) -> tuple[str, bytes, bytes]:
    doc = workload.evaluation_run(run_id, rubric_id=rubric_id, timeout_s=timeout)
    doc["started_at"] = workload.iso(workload.datetime.now(workload.UTC))
    return (names.runs, run_id.encode(), json.dumps(doc).encode())


def output_records(names: TopicNames, run_id: str, rubric_id: str, judges: tuple[str, ...],
                   seed: int = 1) -> list[tuple[str, bytes, bytes]]:  # fmt: skip
    rng = random.Random(seed)
    return [(names.judge_outputs, run_id.encode(),
             json.dumps(workload.judge_output(rng, run_id, j, rubric_id=rubric_id,
                                              submission_id=workload.stable_id("sub", seed))).encode())
            for j in judges]  # fmt: skip


def finals(records: list[Any], names: TopicNames) -> dict[str, ReconciliationRevision]:
    out = {}
    for r in records:
        if r.topic == names.reconciled:
            rev = ReconciliationRevision.model_validate_json(r.value)
            if rev.status == "final":
                out[rev.evaluation_run_id] = rev
    return out


def test_missing_judge_times_out_into_a_failed_stub(kafka_bootstrap: str, tmp_path: Path) -> None:
    names, prefix = setup(kafka_bootstrap)
    rid, run_id = workload.stable_id("rubric", prefix), workload.stable_id("run", prefix)
    produce(kafka_bootstrap, [rubric_record(names, rid), run_record(names, run_id, rid, timeout=3.0),
                              *output_records(names, run_id, rid, workload.JUDGE_MODELS[:2])])  # fmt: skip
    with Worker(kafka_bootstrap, prefix, tmp_path, **FAST) as worker:
        routes = (names.done, names.human_review)

        def settled(rs: list[Any]) -> bool:  # the final revision and the run's routing decision
            return run_id in finals(rs, names) and any(r.topic in routes for r in rs)

        got = consume_until(kafka_bootstrap, [names.reconciled, names.judge_outputs, *routes], settled, timeout=90,
                            worker=worker)  # fmt: skip
        assert worker.alive(), worker.log()
    final = finals(got, names)[run_id]
    assert final.final_reason == "timeout"
    assert final.result.judge_count == 3 and final.result.successful_judge_count == 2
    assert final.result.failed_judges == [workload.JUDGE_MODELS[2]]
    assert final.result.notice == f"1 judge unavailable: {workload.JUDGE_MODELS[2]} timed out"
    stubs = [json.loads(r.value) for r in got if r.topic == names.judge_outputs
             and json.loads(r.value).get("status") == "failed"]  # fmt: skip
    assert len(stubs) == 1 and stubs[0]["failure_reason"].startswith("timeout:")
    evaluation = [RoutingDecision.model_validate_json(r.value) for r in got
                  if r.topic in (names.done, names.human_review)]  # fmt: skip
    assert [d.evaluation_run_id for d in evaluation] == [run_id]


def test_out_of_order_arrival_ends_in_the_same_final_revision(kafka_bootstrap: str, tmp_path: Path) -> None:
    names, prefix = setup(kafka_bootstrap)
    in_rubric, late_rubric = workload.stable_id("rubric", prefix, 1), workload.stable_id("rubric", prefix, 2)
    in_order, out_of_order = workload.stable_id("run", prefix, 1), workload.stable_id("run", prefix, 2)
    with Worker(kafka_bootstrap, prefix, tmp_path, **FAST) as worker:
        first = [rubric_record(names, in_rubric), run_record(names, in_order, in_rubric)]
        produce(kafka_bootstrap, first + output_records(names, in_order, in_rubric, workload.JUDGE_MODELS))
        # Outputs before their run, the run before its rubric.
        produce(kafka_bootstrap, output_records(names, out_of_order, late_rubric, workload.JUDGE_MODELS))
        produce(kafka_bootstrap, [run_record(names, out_of_order, late_rubric)])
        consume_until(
            kafka_bootstrap,
            [names.reconciled],
            lambda rs: in_order in finals(rs, names),
            timeout=90,
            worker=worker,
        )
        produce(kafka_bootstrap, [rubric_record(names, late_rubric)])
        got = consume_until(kafka_bootstrap, [names.reconciled],
                            lambda rs: {in_order, out_of_order} <= set(finals(rs, names)), timeout=90,
                            worker=worker)  # fmt: skip
        assert worker.alive(), worker.log()
    a, b = finals(got, names)[in_order], finals(got, names)[out_of_order]
    assert a.result == b.result and a.revision == b.revision == 4
    assert a.final_reason == b.final_reason == "all_judges_in"


@pytest.mark.parametrize("store", ["memory://", "rocksdb://"])
def test_second_judge_answer_ends_in_the_aggregated_route(kafka_bootstrap: str, tmp_path: Path, store: str) -> None:
    names, prefix = setup(kafka_bootstrap)
    rng = random.Random(5)
    first = workload.claim_check(rng, "claim-2j", judge_id="judge-a", verdict="pass", score=0.6, confidence=0.9)
    produce(kafka_bootstrap, [(names.checks, b"claim-2j", json.dumps(first).encode())])
    with Worker(kafka_bootstrap, prefix, tmp_path, JUDGEFLOW_STORE=store, **FAST) as worker:
        consume_until(kafka_bootstrap, [names.second_judge], lambda rs: len(rs) >= 1, timeout=90, worker=worker)
        second = workload.claim_check(rng, "claim-2j", judge_id="judge-b", verdict="pass", score=0.92,
                                      confidence=0.8)  # fmt: skip
        produce(kafka_bootstrap, [(names.checks, b"claim-2j", json.dumps(second).encode())])
        got = consume_until(kafka_bootstrap, [names.done], lambda rs: len(rs) >= 1, timeout=90, worker=worker)
        assert worker.alive(), worker.log()
    decision = RoutingDecision.model_validate_json(got[0].value)
    assert (decision.reason, decision.verdict, decision.judge_ids) == ("aggregated_pass", "pass",
                                                                       ["judge-a", "judge-b"])  # fmt: skip
    assert decision.aggregation_mode == "majority" and decision.tie_rule == "unclear"


def test_redelivery_after_sigkill_changes_no_decision_id(kafka_bootstrap: str, tmp_path: Path) -> None:
    names, prefix = setup(kafka_bootstrap)
    rng = random.Random(9)
    n = 1500
    checks = [(names.checks, f"c{i}".encode(), json.dumps(workload.claim_check(rng, f"c{i}")).encode())
              for i in range(n)]  # fmt: skip
    produce(kafka_bootstrap, checks)
    routes = [names.done, names.second_judge, names.human_review]
    worker = Worker(kafka_bootstrap, prefix, tmp_path, **FAST).start()
    consume_until(kafka_bootstrap, routes, lambda rs: len(rs) >= 50, timeout=90, worker=worker)
    worker.kill()  # offsets of what it just did are not committed yet
    with Worker(kafka_bootstrap, prefix, tmp_path, **FAST) as again:
        got = consume_until(
            kafka_bootstrap,
            routes,
            lambda rs: len({json.loads(r.value)["claim_id"] for r in rs}) >= n,
            timeout=300,
            worker=again,
        )
        assert again.alive(), again.log()
    ids_by_claim: dict[str, set[str]] = defaultdict(set)
    for r in got:
        doc = json.loads(r.value)
        ids_by_claim[doc["claim_id"]].add(doc["event_id"])
    assert len(ids_by_claim) == n
    assert all(len(ids) == 1 for ids in ids_by_claim.values())
    MEASURED["redelivery"] = f"{len(got) - n} decisions re-sent after SIGKILL, all with their original ids"


def test_reconciliation_throughput(kafka_bootstrap: str, tmp_path: Path) -> None:
    names, prefix = setup(kafka_bootstrap)
    rid = workload.stable_id("rubric", prefix)
    n_runs = 300
    warmup = workload.stable_id("run", prefix, "warmup")
    records = []
    for i in range(n_runs):
        run_id = workload.stable_id("run", prefix, i)
        records.append(run_record(names, run_id, rid))
        records += output_records(names, run_id, rid, workload.JUDGE_MODELS, seed=i)
    with Worker(kafka_bootstrap, prefix, tmp_path, **FAST) as worker:
        # Warm up (assignment, rubric cache) so the clock measures processing, not start-up.
        produce(kafka_bootstrap, [rubric_record(names, rid), run_record(names, warmup, rid),
                                  *output_records(names, warmup, rid, workload.JUDGE_MODELS)])  # fmt: skip
        consume_until(kafka_bootstrap, [names.reconciled], lambda rs: warmup in finals(rs, names),
                      timeout=90, worker=worker)  # fmt: skip
        t0 = time.monotonic()
        produce(kafka_bootstrap, records)
        got = consume_until(
            kafka_bootstrap,
            [names.reconciled],
            lambda rs: len(finals(rs, names)) >= n_runs + 1,
            timeout=240,
            worker=worker,
        )
        elapsed = time.monotonic() - t0
        assert worker.alive(), worker.log()
    events = n_runs * 4  # run + 3 outputs, each through validation then reconciliation
    revisions = sum(r.topic == names.reconciled for r in got)
    assert revisions == (n_runs + 1) * 4  # 3 provisional + 1 final each, no duplicates in a clean run
    MEASURED["reconciliation"] = (f"{n_runs} runs, {events} input events in {elapsed:.1f}s = "
                                  f"{events / elapsed:.0f} events/s end to end (one worker)")  # fmt: skip
