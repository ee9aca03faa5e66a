"""The claim step alone (validate, route, publish), judgeflow against the peer and
against a bare Faust app doing the peer's step, and judgeflow with one and with two
worker processes; worker memory over a long run.

Each pass gets fresh topics, starts its processes, pushes one warm-up claim
through them (start-up and group joins are not measured), then sends the
claims and waits until every decision is on the routing topics.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

from bench import harness
from judgeflow import workload
from streams.topics import TopicNames


@dataclass
class StepResult:
    events: int
    events_per_s: float
    rss_mb: list[float]


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


async def measure_step(
    bootstrap: str,
    workdir: Path,
    *,
    engine: str,
    events: int,
    workers: int = 1,
    seed: int = 3,
    store: str = "memory://",
) -> StepResult:
    """`engine` is "judgeflow" (the worker), "peer" (bench.peer on Quix Streams) or
    "faust_bare" (bench.faust_bare: the peer's step on bare faust-streaming)."""
    prefix = harness.new_prefix(engine[:4])
    names = TopicNames.with_prefix(prefix)
    await harness.create(bootstrap, names)
    if engine == "judgeflow":
        env = harness.worker_env(bootstrap, prefix, workdir, JUDGEFLOW_STORE=store)
        procs = [
            harness.Process(
                ["worker", "--loglevel", os.environ.get("BENCH_WORKER_LOGLEVEL", "warn")],
                env | {"JUDGEFLOW_DATA_DIR": str(workdir / f"{prefix}{i}")},
                workdir / f"{prefix}{i}.log",
            )
            for i in range(workers)
        ]
    elif engine in ("peer", "faust_bare"):
        env = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "BENCH_TOPIC_PREFIX": prefix}
        procs = [harness.Process([], env, workdir / f"{prefix}{engine}.log", module=f"bench.{engine}")]
    else:
        raise ValueError(f"unknown engine {engine!r}")
    procs[0].start()
    try:
        await _warm(bootstrap, names, procs[:1])
        if workers > 1:
            # Scale out the way a deployment does, one worker after the other: with
            # both started at once, Faust's first rebalance sometimes never settled
            # (both idle, no partition fetched; cf. faust-streaming#629).
            for p in procs[1:]:
                p.start()
            await harness.send_all(bootstrap, claims(names, 64, seed, start=10_000_000))
            await harness.wait_for_count(
                bootstrap, _routes(names), 65, timeout=180.0, alive=lambda: all(p.alive() for p in procs)
            )
        ends = await harness.end_offsets(bootstrap, _routes(names))
        already = sum(ends.values())
        records = claims(names, events, seed)
        t0 = time.time()
        await harness.send_all(bootstrap, records)
        done = await harness.wait_for_count(
            bootstrap, _routes(names), already + events, timeout=900.0, alive=lambda: all(p.alive() for p in procs)
        )
        return StepResult(events, events / (done - t0), [p.rss_mb() for p in procs])
    finally:
        for p in procs:
            p.stop()


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
