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
