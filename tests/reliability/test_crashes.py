"""Crashes and restarts (reliability scenario 2), checked by the checker: every
published event in the read models or dead-lettered, once.

Scenarios 1 (worker SIGKILLed three times) and 4 (broker restarted) are not
here: both make the worker's group rebalance, and after a rebalance Faust can
leave a partition unfetched (scenario 1 left 15 of 40 runs unreconciled in a
full run; see the README's Reliability section)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import RELIABILITY
from tests.reliability.scenario import Scenario, split
from tests.support import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


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
