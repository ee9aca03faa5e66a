"""Worker memory over a long run of claim checks (the claim step's speed is `bench.backlog`'s).

The pass gets fresh topics, starts one worker, pushes one warm-up claim through it (start-up and the group
join are not measured), then sends the claims and reads the worker's RSS after the first and the last
decision is on the routing topics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from bench import backlog, harness
from streams.topics import TopicNames


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
        routes = backlog.outputs_of("judgeflow", names)
        await backlog.warm(routes, [worker], backlog.warm_check(names), bootstrap)
        t0 = time.time()
        await harness.send_all(bootstrap, list(backlog.claim_checks(names, small, seed * 1_000_003)))
        await harness.wait_for_count(bootstrap, routes, 1 + small, timeout=900.0, alive=worker.alive)
        rss_small = worker.rss_mb()
        sent = small
        while sent < large:  # in chunks, so the producer's memory is not what we measure
            chunk = min(50_000, large - sent)
            chunk_checks = backlog.claim_checks(names, chunk, seed * 1_000_003 + sent, start=sent)
            await harness.send_all(bootstrap, list(chunk_checks))
            sent += chunk
        done = await harness.wait_for_count(bootstrap, routes, 1 + large, timeout=1800.0, alive=worker.alive)
        return MemoryResult(small, large, rss_small, worker.rss_mb(), large / (done - t0), store)
    finally:
        worker.stop()
