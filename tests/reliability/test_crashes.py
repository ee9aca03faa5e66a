"""Projector crashes and a broker restart (reliability scenarios 2 and 4),
checked by the checker: every published event in the read models or
dead-lettered, once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from judgeflow.services.kafka import KafkaBroker
from tests.conftest import RELIABILITY
from tests.reliability.scenario import SOAK, Scenario, split, wait_progress
from tests.support import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600 * SOAK)]


def test_projector_killed_inside_and_after_its_commit(kafka_bootstrap: str, database_url: str, tmp_path: Path) -> None:
    sc = Scenario(kafka_bootstrap, database_url, tmp_path, seed=202)
    records = sc.workload()
    first, second = split(records, 2)
    with sc.worker() as worker:
        sc.send(first)
        # Small batches, so the faults land mid-run; each projector kills itself at its 3rd batch.
        for label, fault in (("in", "JUDGEFLOW_FAULT_KILL_IN_BATCH"), ("after", "JUDGEFLOW_FAULT_KILL_AFTER_COMMIT")):
            p = sc.projector(f"p-{label}", **{fault: "3", "JUDGEFLOW_PROJECTOR_BATCH": "50"}).start()
            wait_for(lambda p=p: not p.alive(), 120, f"projector killed {label} its commit")  # type: ignore[misc]
            sc.faults.append(f"projector SIGKILL {label} the commit of batch 3")
        sc.send(second)
        restarted = time.monotonic()
        with sc.projector("p-clean") as projector:
            done = sc.wait_accounted(300, worker, projector)
    RELIABILITY["2 projector SIGKILL around commit"] = sc.verdict("2 projector SIGKILL around commit",
                                                                  done - restarted)  # fmt: skip


def test_single_broker_restarted_mid_run(database_url: str, tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path / "kafka").start()
    try:
        sc = Scenario(broker.bootstrap, database_url, tmp_path, seed=404)
        first, second = split(sc.workload(), 2)
        with sc.worker() as worker, sc.projector() as projector:
            sc.send(first)
            wait_progress(broker.bootstrap, sc.names, len(first) // 8, worker)
            t0 = time.monotonic()
            broker.restart()
            down = time.monotonic() - t0
            sc.faults.append(f"broker stopped and restarted ({down:.1f}s without a broker)")
            sc.send(second)
            done = sc.wait_accounted(300, worker, projector)
        RELIABILITY["4 broker restart"] = sc.verdict("4 broker restart", done - t0 - down)
    finally:
        broker.stop()
