"""judgeflow end to end: worker and projector processes, producer to Postgres.

Throughput is input events over the time from the first send to the moment
Postgres shows every decision and has projected every record. Latency
(`LATENCY`) is, per judge output and per claim check, the judge's send to the
commit that made the input's own row visible: its `judge_outputs` row (or
`claim_checks` row), written from the worker's validated record. The
projector stores its offsets in the same transaction as the rows, so polling
`projection_offsets` every 20 ms says when each record's rows became visible.
The decision latency (`DECISION_LATENCY`) is reported beside it.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psycopg

from bench import harness
from judgeflow import workload
from projections.migrate import migrate
from projections.projector import PROJECTED_ROLES
from streams.topics import TopicNames

LATENCY = "judge's send -> its judge_outputs / claim_checks row visible in Postgres (20 ms polls)"
DECISION_LATENCY = "judge's send -> the commit that made its decision visible (first revision or routing decision)"


@dataclass
class Workload:
    records: list[harness.Record]
    runs: int
    outputs: int
    claims: int
    claim_of: dict[str, int] = field(default_factory=dict)  # claim_id -> record index
    output_of: dict[str, int] = field(default_factory=dict)  # judge_run_id -> record index


def build_workload(names: TopicNames, runs: int, claims: int, seed: int) -> Workload:
    """`runs` evaluation runs with three judges each, and `claims` claim checks,
    interleaved so both streams are in flight together."""
    rng = random.Random(seed)
    rubric = workload.rubric(workload.stable_id("bench-rubric", seed))
    rid = rubric["rubric_version_id"]
    run_part: list[tuple[harness.Record, str | None]] = []
    for i in range(runs):
        run_id = workload.stable_id("bench-run", seed, i)
        run = workload.evaluation_run(run_id, rubric_id=rid, timeout_s=3600.0)
        run_part.append(((names.runs, run_id.encode(), json.dumps(run).encode()), None))
        for judge in workload.JUDGE_MODELS:
            doc = workload.judge_output(rng, run_id, judge, rubric_id=rid, submission_id=run["submission_id"])
            run_part.append(((names.judge_outputs, run_id.encode(), json.dumps(doc).encode()), doc["judge_run_id"]))
    claim_part = []
    for c in range(claims):
        claim_id = f"bench-{seed}-{c:06d}"
        doc = workload.claim_check(rng, claim_id)
        claim_part.append(((names.checks, claim_id.encode(), json.dumps(doc).encode()), claim_id))
    wl = Workload(
        records=[(names.rubrics, rid.encode(), json.dumps(rubric).encode())],
        runs=runs,
        outputs=runs * len(workload.JUDGE_MODELS),
        claims=claims,
    )
    # Interleave proportionally: the run events and the claim batch share the time.
    total = len(run_part) + len(claim_part)
    ri = ci = 0
    for _ in range(total):
        take_run = ci >= len(claim_part) or (ri < len(run_part) and ri * len(claim_part) <= ci * len(run_part))
        if take_run:
            record, jrid = run_part[ri]
            ri += 1
            if jrid:
                wl.output_of[jrid] = len(wl.records)
        else:
            record, claim_id = claim_part[ci]
            ci += 1
            wl.claim_of[str(claim_id)] = len(wl.records)
        wl.records.append(record)
    return wl


@dataclass
class PipelineResult:
    events: int
    seconds: float
    events_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    """`LATENCY`, percentiles in ms."""
    rate: float | None
    worker_rss_mb: float
    samples: int
    worker_cpu_s: float = 0.0
    projector_cpu_s: float = 0.0
    prefix: str = ""
    """The run's topic prefix: its topics stay, for the projector-alone measurement."""
    decision_p50_ms: float = 0.0
    """`DECISION_LATENCY`, percentiles in ms."""
    decision_p95_ms: float = 0.0
    decision_p99_ms: float = 0.0


class VisibilityPoller:
    """Polls the projector's committed offsets; answers when a record became visible."""

    def __init__(self, database_url: str, schema: str):
        self.database_url = database_url
        self.schema = schema
        self.history: list[tuple[float, dict[tuple[str, int], int]]] = []
        self.counts: tuple[int, int] = (0, 0)

    async def poll_until(
        self, runs: int, claims: int, topics: list[str], bootstrap: str, *, timeout: float, alive: Any
    ) -> float:
        conn = await psycopg.AsyncConnection.connect(
            self.database_url, autocommit=True, options=f"-c search_path={self.schema}"
        )
        deadline = time.monotonic() + timeout
        ends: dict[tuple[str, int], int] | None = None
        try:
            while True:
                now = time.time()
                cur = await conn.execute("SELECT topic, partition, next_offset FROM projection_offsets")
                offsets = {(t, p): o for t, p, o in await cur.fetchall()}
                self.history.append((now, offsets))
                if ends is None:
                    cur = await conn.execute(
                        "SELECT (SELECT count(*) FROM evaluation_reconciled_scores WHERE finalized_at IS NOT NULL),"
                        " (SELECT count(*) FROM routing_decisions WHERE subject = 'claim')"
                    )
                    row = await cur.fetchone()
                    assert row is not None
                    self.counts = (int(row[0]), int(row[1]))
                    if self.counts[0] >= runs and self.counts[1] >= claims:
                        ends = await harness.end_offsets(bootstrap, topics)
                if ends is not None and all(offsets.get(tp, 0) >= end for tp, end in ends.items()):
                    return now
                if not alive():
                    raise RuntimeError("the worker or the projector died")
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"pipeline: {self.counts} of ({runs} final runs, {claims} claims) after {timeout}s"
                    )
                await asyncio.sleep(0.02)  # the poll interval: latency resolution is 20 ms
        finally:
            await conn.close()

    def visible_at(self, topic: str, partition: int, offset: int) -> float | None:
        lo, hi = 0, len(self.history)
        while lo < hi:  # first poll whose committed offset covers `offset`
            mid = (lo + hi) // 2
            if self.history[mid][1].get((topic, partition), 0) > offset:
                hi = mid
            else:
                lo = mid + 1
        return self.history[lo][0] if lo < len(self.history) else None


async def run_pipeline(
    bootstrap: str,
    database_url: str,
    workdir: Path,
    *,
    runs: int,
    claims: int,
    rate: float | None = None,
    seed: int = 11,
    timeout: float = 900.0,
) -> PipelineResult:
    """One measured pass: fresh topics and schema, one worker, one projector."""
    prefix = harness.new_prefix("pipe")
    names = TopicNames.with_prefix(prefix)
    schema = prefix.rstrip(".").replace("-", "_")
    await harness.create(bootstrap, names)
    await asyncio.to_thread(migrate, database_url, schema)
    env = harness.worker_env(bootstrap, prefix, workdir) | {"DATABASE_URL": database_url}
    worker = harness.Process(["worker", "--loglevel", "warn"], env, workdir / f"{prefix}worker.log").start()
    projector = harness.Process(["projector", "--schema", schema], env, workdir / f"{prefix}projector.log").start()
    procs = (worker, projector)
    try:
        alive = lambda: all(p.alive() for p in procs)  # noqa: E731
        # Warm-up: one claim through worker and projector, so start-up and group joins are not measured.
        rng = random.Random(seed + 1)
        await harness.send_all(
            bootstrap, [(names.checks, b"warm", json.dumps(workload.claim_check(rng, "warm")).encode())]
        )
        warm = VisibilityPoller(database_url, schema)
        await warm.poll_until(0, 1, [names.checks], bootstrap, timeout=180.0, alive=alive)

        wl = build_workload(names, runs, claims, seed)
        poller = VisibilityPoller(database_url, schema)
        topics = [getattr(names, r) for r in PROJECTED_ROLES]
        polling = asyncio.create_task(
            poller.poll_until(runs, claims + 1, topics, bootstrap, timeout=timeout, alive=alive)
        )
        cpu0 = [p.cpu_seconds() for p in procs]
        sent = await harness.send_all(bootstrap, wl.records, rate=rate)
        done_at = await polling
        rss = worker.rss_mb()
        cpu = [p.cpu_seconds() - c for p, c in zip(procs, cpu0, strict=True)]
    finally:
        for p in procs:
            p.stop()
    latencies = await _row_latencies(bootstrap, names, wl, sent, poller)
    decisions = await _latencies(bootstrap, names, wl, sent, poller)
    seconds = done_at - sent[0]
    return PipelineResult(
        events=len(wl.records),
        seconds=seconds,
        events_per_s=len(wl.records) / seconds,
        p50_ms=harness.percentile(latencies, 50),
        p95_ms=harness.percentile(latencies, 95),
        p99_ms=harness.percentile(latencies, 99),
        rate=rate,
        worker_rss_mb=rss,
        samples=len(latencies),
        worker_cpu_s=cpu[0],
        projector_cpu_s=cpu[1],
        prefix=prefix,
        decision_p50_ms=harness.percentile(decisions, 50),
        decision_p95_ms=harness.percentile(decisions, 95),
        decision_p99_ms=harness.percentile(decisions, 99),
    )


async def _row_latencies(
    bootstrap: str, names: TopicNames, wl: Workload, sent: list[float], poller: VisibilityPoller
) -> list[float]:
    """`LATENCY` per judge output and claim check: its send -> the commit of its own
    row, which the projector writes from the worker's validated record."""
    validated = await harness.read_all(bootstrap, [names.judge_outputs_valid, names.checks_valid])
    latencies: list[float] = []
    for record in validated:
        doc = orjson.loads(record.value)
        if record.topic == names.judge_outputs_valid:
            index = wl.output_of.get(doc.get("judge_run_id"))
        else:
            index = wl.claim_of.get(doc.get("claim_id"))
        at = poller.visible_at(record.topic, record.partition, record.offset)
        if index is None or at is None:
            continue  # the warm-up claim
        latencies.append((at - sent[index]) * 1000)
    if not latencies:
        raise RuntimeError("no judge output or claim check row became visible")
    return latencies


async def _latencies(
    bootstrap: str, names: TopicNames, wl: Workload, sent: list[float], poller: VisibilityPoller
) -> list[float]:
    """`DECISION_LATENCY` per input: send time -> its decision's rows visible (claims:
    the routing decision; judge outputs: the first revision that includes them)."""
    decided = await harness.read_all(bootstrap, [names.done, names.second_judge, names.human_review, names.reconciled])
    latencies: list[float] = []
    seen: set[str] = set()
    for record in decided:
        at = poller.visible_at(record.topic, record.partition, record.offset)
        if at is None:
            continue
        doc = json.loads(record.value)
        if record.topic == names.reconciled:
            ids = [j for j in doc.get("judge_run_ids", []) if j in wl.output_of]
        elif doc.get("subject") == "claim" and doc.get("claim_id") in wl.claim_of:
            ids = [doc["claim_id"]]
        else:
            ids = []
        for input_id in ids:
            if input_id in seen:
                continue
            seen.add(input_id)
            index = wl.output_of.get(input_id, wl.claim_of.get(input_id))
            assert index is not None
            latencies.append((at - sent[index]) * 1000)
    if not latencies:
        raise RuntimeError("no decision became visible")
    return latencies
