"""Three brokers, the leader of a busy partition SIGKILLed (reliability
scenario 5): with replication 3, min.insync.replicas 2 and acks=all, every
event the producer saw acknowledged is in the read models or dead-lettered."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from judgeflow.services.kafka import KafkaCluster
from tests.conftest import RELIABILITY
from tests.reliability.scenario import SOAK, Scenario, split, wait_progress

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600 * SOAK)]


def partition_leader(bootstrap: str, topic: str, partition: int) -> int:
    async def ask() -> int:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            (described,) = await admin.describe_topics([topic])
            return next(int(p["leader"]) for p in described["partitions"] if p["partition"] == partition)
        finally:
            await admin.close()

    return asyncio.run(ask())


def test_leader_of_a_busy_partition_killed(database_url: str, tmp_path: Path) -> None:
    # The controller declares a SIGKILLed broker dead after its session timeout.
    cluster = KafkaCluster(tmp_path / "kafka", properties={"broker.session.timeout.ms": "6000",
                                                            "broker.heartbeat.interval.ms": "1000"})  # fmt: skip
    cluster.start()
    try:
        sc = Scenario(cluster.bootstrap, database_url, tmp_path, seed=505, replication=3)
        first, second = split(sc.workload(), 2)
        with sc.worker() as worker, sc.projector() as projector:
            sc.send(first)
            wait_progress(cluster.bootstrap, sc.names, len(first) // 8, worker)
            leader = partition_leader(cluster.bootstrap, sc.names.judge_outputs, 0)
            cluster.node(leader).kill()
            t0 = time.monotonic()
            sc.faults.append(f"SIGKILL broker {leader} of 3, leader of judge.outputs[0], mid-run")
            sc.send(second)  # acks=all: raises unless every event is acknowledged
            done = sc.wait_accounted(300, worker, projector)
        RELIABILITY["5 partition leader killed (3 brokers)"] = sc.verdict("5 partition leader killed (3 brokers)",
                                                                          done - t0)  # fmt: skip
    finally:
        cluster.stop()
