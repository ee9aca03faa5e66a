"""Worker crashes (reliability scenarios 1 and 6), checked by the checker: every
published event in the read models or dead-lettered, once, and no decision
made twice.

Both depend on the two faust-streaming fixes in `streams/durable_commit.py`;
without them a restarted worker lost the first records of partitions its group
had not committed yet, and state changes whose offsets were committed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import RELIABILITY
from tests.reliability.scenario import SOAK, Scenario, split, wait_progress
from tests.support import projected_topic_ends, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600 * SOAK)]


def test_worker_sigkilled_repeatedly_mid_run(kafka_bootstrap: str, database_url: str, tmp_path: Path) -> None:
    sc = Scenario(kafka_bootstrap, database_url, tmp_path, seed=101)
    kills = 3 * SOAK
    chunks = split(sc.workload(), kills + 1)
    with sc.projector() as projector:
        worker = sc.worker().start()
        try:
            decided = 0
            for i, chunk in enumerate(chunks):
                sc.send(chunk)
                if i == len(chunks) - 1:
                    break
                # Kill while the worker is inside this chunk: some of it decided, the rest not.
                decided += max(1, len(chunk) // 6)
                wait_progress(kafka_bootstrap, sc.names, decided, worker)
                worker.kill()
                sc.faults.append(f"SIGKILL worker after {decided}+ decisions")
                worker = sc.worker(f"w{i + 1}").start()
            restarted = time.monotonic()
            done = sc.wait_accounted(300, worker, projector)
        finally:
            worker.stop()
    RELIABILITY[f"1 worker SIGKILL x{kills}"] = sc.verdict(f"1 worker SIGKILL x{kills}", done - restarted)


def test_two_workers_one_killed(kafka_bootstrap: str, database_url: str, tmp_path: Path) -> None:
    # Every 4th run has a judge that never answers: its stub comes from whichever worker owns the run.
    sc = Scenario(kafka_bootstrap, database_url, tmp_path, seed=606, silent_every=4, judge_timeout_s=20.0)
    first, second = split(sc.workload(), 2)
    with sc.projector() as projector:
        a = sc.worker("a").start()
        try:
            sc.send(first[:50])
            wait_progress(kafka_bootstrap, sc.names, 1, a, timeout=180)
            # Scale out one worker after the other, as a deployment does.
            with sc.worker("b") as b:
                sc.send(first[50:])
                wait_progress(kafka_bootstrap, sc.names, len(first) // 4, b, timeout=180)
                a.kill()
                killed = time.monotonic()
                sc.faults.append("SIGKILL one of two workers mid-run")
                sc.send(second)
                done = sc.wait_accounted(300, b, projector)
        finally:
            a.stop()
    RELIABILITY["6 two workers, one killed"] = sc.verdict("6 two workers, one killed", done - killed)


def _committed(bootstrap: str, group: str, topics: list[str]) -> dict[tuple[str, int], int]:
    """The group's committed offset per partition of `topics` (absent: never committed)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    asked = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t in topics for p in range(4)])
    got = admin.list_consumer_group_offsets([asked])[group].result(timeout=30)
    return {(tp.topic, tp.partition): tp.offset for tp in got.topic_partitions if tp.offset >= 0}


def test_worker_killed_after_publishing_before_committing(
    kafka_bootstrap: str, database_url: str, tmp_path: Path
) -> None:
    """Scenario 11: the worker publishes every decision through librdkafka, commits no offset (its commit
    interval is an hour) and is SIGKILLed. The next worker reads every input again: nothing is lost, and what
    it publishes again carries the ids it had (redelivered, never decided twice)."""
    sc = Scenario(kafka_bootstrap, database_url, tmp_path, seed=1111)
    inputs = [sc.names.runs, sc.names.judge_outputs, sc.names.checks]
    with sc.projector() as projector:
        worker = sc.worker("uncommitted", JUDGEFLOW_COMMIT_INTERVAL="3600").start()
        group = worker.env["JUDGEFLOW_APP_ID"]
        try:
            sc.send(sc.workload())
            sc.wait_accounted(300, worker, projector)  # every decision published and projected
            assert _committed(kafka_bootstrap, group, inputs) == {}, "the worker committed before the kill"
            worker.kill()
            sc.faults.append("SIGKILL worker with every decision published and no offset committed")
            killed = time.monotonic()
            worker = sc.worker("next").start()
            ends = projected_topic_ends(kafka_bootstrap, sc.names)
            wanted = {tp: end for tp, end in ends.items() if tp[0] in inputs and end > 0}
            wait_for(lambda: all(_committed(kafka_bootstrap, group, inputs).get(tp, -1) >= end
                                 for tp, end in wanted.items()), 300 * SOAK, "the next worker committed",
                     worker)  # fmt: skip
            done = sc.wait_accounted(300, worker, projector)
        finally:
            worker.stop()
    row = sc.verdict("11 worker SIGKILL between publish and commit", done - killed)
    RELIABILITY["11 worker SIGKILL between publish and commit"] = row
