"""Worker memory over a long run of claim checks (the claim step's speed is `bench.backlog`'s).

The pass gets fresh topics, starts one worker, pushes one warm-up claim through it (start-up and the group
join are not measured), then sends the claims and reads the worker's RSS after the first and the last
decision is on the routing topics.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from pathlib import Path

from bench import harness
from judgeflow import workload
from streams.topics import TopicNames


def claims(names: TopicNames, count: int, seed: int, start: int = 0) -> list[harness.Record]:
    rng = random.Random(seed * 1_000_003 + start)
    out: list[harness.Record] = []
    for c in range(start, start + count):
        claim_id = f"claim-{seed}-{c:07d}"
        out.append((names.checks, claim_id.encode(), json.dumps(workload.claim_check(rng, claim_id)).encode()))
    return out


def _routes(names: TopicNames) -> list[str]:
    return [names.done, names.second_judge, names.human_review]


async def _warm(bootstrap: str, names: TopicNames, procs: list[harness.Process]) -> None:
    rng = random.Random(0)
    await harness.send_all(bootstrap, [(names.checks, b"warm", json.dumps(workload.claim_check(rng, "warm")).encode())])
    await harness.wait_for_count(
        bootstrap, _routes(names), 1, timeout=180.0, alive=lambda: all(p.alive() for p in procs)
    )


@dataclass
class MemoryResult:
    small: int
    large: int
    rss_small_mb: float
    rss_large_mb: float
    events_per_s: float
    store: str


async def measure_memory(
    bootstrap: str, workdir: Path, *, small: int, large: int, seed: int = 5, store: str = "rocksdb://"
) -> MemoryResult:
    """Worker RSS after `small` and after `large` claim checks, one worker process."""
    prefix = harness.new_prefix("mem")
    names = TopicNames.with_prefix(prefix)
    await harness.create(bootstrap, names)
    env = harness.worker_env(bootstrap, prefix, workdir, JUDGEFLOW_STORE=store)
    worker = harness.Process(["worker", "--loglevel", "warn"], env, workdir / f"{prefix}worker.log").start()
    try:
        await _warm(bootstrap, names, [worker])
        t0 = time.time()
        await harness.send_all(bootstrap, claims(names, small, seed))
        await harness.wait_for_count(bootstrap, _routes(names), 1 + small, timeout=900.0, alive=worker.alive)
        rss_small = worker.rss_mb()
        sent = small
        while sent < large:  # in chunks, so the producer's memory is not what we measure
            chunk = min(50_000, large - sent)
            await harness.send_all(bootstrap, claims(names, chunk, seed, start=sent))
            sent += chunk
        done = await harness.wait_for_count(bootstrap, _routes(names), 1 + large, timeout=1800.0, alive=worker.alive)
        return MemoryResult(small, large, rss_small, worker.rss_mb(), large / (done - t0), store)
    finally:
        worker.stop()
