"""The worker run unattended: /healthz and /readyz from its own event loop, and a stall it cannot heal
(its broker link cut for good) ends it with exit code 3 and an ERROR naming the partitions."""

from __future__ import annotations

import base64
import json
import random
import time
from pathlib import Path

import pytest

from judgeflow import workload
from judgeflow.services.ports import free_port
from streams.topics import TopicNames
from tests.conftest import MEASURED
from tests.reliability.netfault import FaultyProxy, broker_with_a_faulty_listener
from tests.support import (
    Worker,
    consume_until,
    create_topics,
    http_get,
    metrics_text,
    produce,
    unique_prefix,
    wait_for,
)

pytestmark = pytest.mark.integration


def claims(names: TopicNames, n: int, seed: int, start: int = 0) -> list[tuple[str, bytes, bytes]]:
    rng = random.Random(seed)
    ids = [f"c{seed}-{i}" for i in range(start, start + n)]
    return [(names.checks, c.encode(), json.dumps(workload.claim_check(rng, c)).encode()) for c in ids]


def routes(names: TopicNames) -> list[str]:
    return [names.done, names.second_judge, names.human_review]


def test_worker_health_and_readiness(kafka_bootstrap: str, tmp_path: Path) -> None:
    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names)
    port = free_port()
    with Worker(kafka_bootstrap, prefix, tmp_path, JUDGEFLOW_METRICS_PORT=str(port), JUDGEFLOW_READY_LAG="0",
                JUDGEFLOW_STALL_SECONDS="8") as worker:  # fmt: skip
        produce(kafka_bootstrap, claims(names, 200, 1))
        consume_until(kafka_bootstrap, routes(names), lambda rs: len(rs) >= 200, timeout=120, worker=worker)
        wait_for(lambda: http_get(port, "/readyz")[0] == 200, 60, "/readyz 200 once caught up", worker)
        code, body = http_get(port, "/healthz")
        assert code == 200 and body["live"] is True and body["stalled_partitions"] == []
        code, ready = http_get(port, "/readyz")
        assert ready["ready"] is True and ready["lag"] == 0 and ready["assigned_partitions"] > 0
        text = metrics_text(port)
        assert 'judgeflow_events_total{agent="route_claims"} 200.0' in text
        assert "judgeflow_stalled_partitions 0.0" in text


def test_worker_cut_off_from_its_broker_exits_non_zero(database_url: str, tmp_path: Path) -> None:
    broker, faulty_port, proxied_port = broker_with_a_faulty_listener(tmp_path / "kafka")
    broker.start()
    try:
        prefix = unique_prefix()
        names = TopicNames.with_prefix(prefix)
        create_topics(broker.bootstrap, names)
        port = free_port()
        with FaultyProxy(faulty_port, port=proxied_port) as link:
            worker = Worker(f"127.0.0.1:{link.port}", prefix, tmp_path / "w", JUDGEFLOW_METRICS_PORT=str(port),
                            JUDGEFLOW_STALL_SECONDS="4", JUDGEFLOW_STALL_RECOVERY_SECONDS="4",
                            JUDGEFLOW_OUTAGE_EXIT_SECONDS="8").start()  # fmt: skip
            try:
                produce(broker.bootstrap, claims(names, 50, 2))
                consume_until(broker.bootstrap, routes(names), lambda rs: len(rs) >= 50, timeout=120, worker=worker)
                wait_for(lambda: http_get(port, "/healthz")[0] == 200, 60, "/healthz 200", worker)
                link.stall()  # for good: neither a rejoin nor anything else in the process can heal this
                cut = time.monotonic()
                produce(broker.bootstrap, claims(names, 50, 2, start=50))
                wait_for(lambda: http_get(port, "/healthz")[0] == 503 or not worker.alive(), 90, "/healthz 503")
                unhealthy = time.monotonic() - cut
                reason = str(http_get(port, "/healthz")[1].get("reason", "")) if worker.alive() else ""
                assert worker.process is not None
                worker.process.wait(120)
                exited = time.monotonic() - cut
            finally:
                worker.stop()
                link.resume()  # the proxy closes cleanly only when no link is stalled
        # The broker out of reach is an outage: its own policy ends the process (status 4), not the stall
        # watchdog, and health says what is unreachable.
        assert worker.process.returncode == 4
        log = worker.log()
        assert f"broker 127.0.0.1:{link.port} unreachable" in log, log[-3000:]
        assert "JUDGEFLOW_OUTAGE_EXIT_SECONDS=8" in log, log[-3000:]
        assert reason.startswith(f"broker 127.0.0.1:{link.port} unreachable for"), reason
        MEASURED["worker watchdog"] = (f"stall 4 s, outage exit 8 s, broker link cut: /healthz 503 after "
                                       f"{unhealthy:.1f}s, exit 4 after {exited:.1f}s")  # fmt: skip
    finally:
        broker.stop()


def test_held_output_raises_one_stale_alert_and_its_run_still_decides_once(kafka_bootstrap: str,
                                                                           tmp_path: Path) -> None:  # fmt: skip
    from schemas import RoutingDecision, StaleWorkAlert

    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names)
    rubric = workload.rubric()
    run_id = workload.stable_id("run", prefix)
    rng = random.Random(5)
    outputs = [workload.judge_output(rng, run_id, m, rubric_id=rubric["rubric_version_id"])
               for m in workload.JUDGE_MODELS]  # fmt: skip
    with Worker(kafka_bootstrap, prefix, tmp_path, JUDGEFLOW_STALE_AFTER="2") as worker:
        produce(kafka_bootstrap, [(names.rubrics, rubric["rubric_version_id"].encode(), json.dumps(rubric).encode()),
                                  (names.judge_outputs, run_id.encode(), json.dumps(outputs[0]).encode())])  # fmt: skip
        [alert] = consume_until(kafka_bootstrap, [names.alerts], lambda rs: len(rs) >= 1, timeout=90, worker=worker)
        parsed = StaleWorkAlert.model_validate_json(alert.value)
        assert (parsed.kind, parsed.subject_id, parsed.waiting_for) == ("held_too_long", run_id, "run")
        run = workload.evaluation_run(run_id, rubric_id=rubric["rubric_version_id"])
        produce(kafka_bootstrap, [(names.runs, run_id.encode(), json.dumps(run).encode())]
                + [(names.judge_outputs, run_id.encode(), json.dumps(o).encode()) for o in outputs[1:]])  # fmt: skip
        got = consume_until(kafka_bootstrap, [names.done, names.human_review, names.alerts],
                            lambda rs: any(r.topic != names.alerts for r in rs), timeout=90, worker=worker)  # fmt: skip
    decisions = [RoutingDecision.model_validate_json(r.value) for r in got if r.topic != names.alerts]
    assert [d.evaluation_run_id for d in decisions] == [run_id]
    assert len({r.value for r in got if r.topic == names.alerts}) == 1


def test_hold_limit_dead_letters_past_it_and_releases_what_it_held(kafka_bootstrap: str, tmp_path: Path) -> None:
    """JUDGEFLOW_MAX_HELD_EVENTS bounds the outputs held for runs not seen yet, across every run: past it an
    output is dead-lettered (HOLD_LIMIT_EXCEEDED), and the held ones are validated once their runs arrive."""
    from schemas import InvalidEvent

    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names)
    rubric = workload.rubric()
    rng = random.Random(9)
    run_ids = [workload.stable_id("run", prefix, i) for i in range(8)]
    outputs = [workload.judge_output(rng, r, "gpt-4o", rubric_id=rubric["rubric_version_id"]) for r in run_ids]
    port = free_port()
    with Worker(kafka_bootstrap, prefix, tmp_path, JUDGEFLOW_MAX_HELD_EVENTS="5",
                JUDGEFLOW_METRICS_PORT=str(port)) as worker:  # fmt: skip
        keyed = [(names.judge_outputs, o["evaluation_run_id"].encode(), json.dumps(o).encode()) for o in outputs]
        produce(kafka_bootstrap, [(names.rubrics, rubric["rubric_version_id"].encode(), json.dumps(rubric).encode())]
                + keyed)  # fmt: skip
        dead = consume_until(kafka_bootstrap, [names.invalid], lambda rs: len(rs) >= 3, timeout=90, worker=worker)
        assert [InvalidEvent.model_validate_json(d.value).error_codes for d in dead] == [["HOLD_LIMIT_EXCEEDED"]] * 3
        wait_for(lambda: "judgeflow_held_events 5.0" in metrics_text(port), 60, "held-events gauge at 5", worker)
        runs = [workload.evaluation_run(r, rubric_id=rubric["rubric_version_id"]) for r in run_ids]
        produce(kafka_bootstrap, [(names.runs, d["evaluation_run_id"].encode(), json.dumps(d).encode()) for d in runs])
        valid = consume_until(kafka_bootstrap, [names.judge_outputs_valid], lambda rs: len(rs) >= 5, timeout=90,
                              worker=worker)  # fmt: skip
        wait_for(lambda: "judgeflow_held_events 0.0" in metrics_text(port), 60, "held-events gauge back at 0", worker)
    held_ids = {json.loads(v.value)["judge_run_id"] for v in valid}
    dead_ids = {json.loads(base64.b64decode(InvalidEvent.model_validate_json(d.value).original_b64))["judge_run_id"]
                for d in dead}  # fmt: skip
    assert len(held_ids) == 5 and not held_ids & dead_ids
    assert held_ids | dead_ids == {o["judge_run_id"] for o in outputs}
