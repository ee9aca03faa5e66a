"""judgeflow end to end: worker and projector processes, producer to Postgres.

Throughput is input events over the time from the first send to the moment
Postgres shows every decision and has projected every record. Latency
(`LATENCY`) is, per judge output and per claim check, the judge's send to the
commit that made the input's own row visible: its `judge_outputs` row (or
`claim_checks` row), written from the worker's validated record. The
projector stores its offsets in the same transaction as the rows, so polling
`projection_offsets` every 20 ms says when each record's rows became visible.
The decision latency (`DECISION_LATENCY`) is reported beside it.

Two passes: `run_pipeline` (full load: everything at once on fresh topics, the
throughput figure) and `run_half_load` (latency at a paced rate: on its own
topics and schema, warmed by an unmeasured phase at the same rate before the
measured one, so the figure is the steady state, not a new topic's first
seconds).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
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

WARMED_ROLES = (
    "runs",
    "judge_outputs",
    "checks",
    "judge_outputs_valid",
    "checks_valid",
    "reconciled",
    "done",
    "second_judge",
    "human_review",
)
"""The topics the half-load pass's measured records travel through: every one of
their partitions carries (and has projected) warm-up records before the measured
sends start."""
WARMUP_SEED_OFFSET = 1000
"""The warm-up workload's seed is the measured one's plus this: other run and claim ids."""
SLICE_SECONDS = 10.0
"""The half-load p99 is also reported per slice of this many seconds of input."""


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


def workload_mix(
    rate: float, seconds: float, runs: int, claims: int, *, judges: int = len(workload.JUDGE_MODELS), min_runs: int = 1
) -> tuple[int, int]:
    """Runs and claims in the proportion of `runs` : `claims` whose events (each run
    is its own event and `judges` judge outputs; one rubric besides), sent at `rate`
    per second, last `seconds`. At least `min_runs` runs when the mix has runs."""
    events = max(1, math.ceil(rate * seconds))
    if runs <= 0:
        return 0, max(1, events)
    per_run = 1 + judges
    n_runs = max(min_runs, 1, round(events / (per_run + claims / runs)))
    n_claims = round(n_runs * claims / runs) if claims > 0 else 0
    if claims > 0 and n_runs * per_run + n_claims < events:
        n_claims = events - n_runs * per_run  # the rounding's remainder, so the events fill the time
    return n_runs, n_claims


def summary(latencies: Sequence[float]) -> dict[str, float]:
    """p50, p95, p99 (nearest rank) and max of a non-empty sequence, as `p50` ... `max`."""
    return {
        "p50": harness.percentile(latencies, 50),
        "p95": harness.percentile(latencies, 95),
        "p99": harness.percentile(latencies, 99),
        "max": max(latencies),
    }


def p99_by_slice(samples: Sequence[tuple[float, float]], start: float, end: float, width: float) -> list[float]:
    """The p99 of the latencies (second of each `(sent_at, latency)`) of the inputs
    sent in each `width`-second slice of [start, end]; a remainder shorter than half
    a slice joins the last slice; a slice without samples is left out."""
    count = max(1, round((end - start) / width))
    buckets: list[list[float]] = [[] for _ in range(count)]
    for at, latency in samples:
        buckets[min(count - 1, max(0, int((at - start) // width)))].append(latency)
    return [harness.percentile(b, 99) for b in buckets if b]


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
    max_ms: float = 0.0
    """The largest `LATENCY`, and below the largest `DECISION_LATENCY`, in ms."""
    decision_max_ms: float = 0.0
    decision_samples: int = 0
    input_seconds: float = 0.0
    """First to last send of the measured inputs."""
    warmup_seconds: float = 0.0
    """First to last send of the unmeasured warm-up inputs before them (0: none)."""
    warmup_events: int = 0
    p99_by_slice_ms: list[float] = field(default_factory=list)
    """`LATENCY` p99 of the inputs sent in each `SLICE_SECONDS` of the measured input."""


class VisibilityPoller:
    """Polls the projector's committed offsets; answers when a record became visible."""

    def __init__(self, database_url: str, schema: str):
        self.database_url = database_url
        self.schema = schema
        self.history: list[tuple[float, dict[tuple[str, int], int]]] = []
        self.counts: tuple[int, int] = (0, 0)

    async def poll_until(
        self,
        runs: int,
        claims: int,
        topics: list[str],
        bootstrap: str,
        *,
        timeout: float,
        alive: Any,
        counting: asyncio.Event | None = None,
    ) -> float:
        """Poll until `runs` final runs and `claims` claim decisions are in the schema
        and every record on `topics` is projected; return time.time() then. With
        `counting`, the row counts are only queried once it is set (on a long pass,
        counting growing tables every 20 ms would cost Postgres time the pass measures)."""
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
                if ends is None and (counting is None or counting.is_set()):
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


@dataclass
class _Pass:
    """A pass's topics, schema and running worker and projector."""

    bootstrap: str
    database_url: str
    prefix: str
    names: TopicNames
    schema: str
    worker: harness.Process
    projector: harness.Process

    def alive(self) -> bool:
        return self.worker.alive() and self.projector.alive()

    @property
    def projected(self) -> list[str]:
        return [getattr(self.names, r) for r in PROJECTED_ROLES]


@asynccontextmanager
async def _started(bootstrap: str, database_url: str, workdir: Path, prefix: str, seed: int) -> AsyncIterator[_Pass]:
    """Fresh topics and schema under `prefix`, one worker and one projector, and one
    claim through both (start-up and group joins are not measured); stops both after."""
    names = TopicNames.with_prefix(prefix)
    schema = prefix.rstrip(".").replace("-", "_")
    await harness.create(bootstrap, names)
    await asyncio.to_thread(migrate, database_url, schema)
    env = harness.worker_env(bootstrap, prefix, workdir) | {"DATABASE_URL": database_url}
    worker = harness.Process(["worker", "--loglevel", "warn"], env, workdir / f"{prefix}worker.log").start()
    projector = harness.Process(["projector", "--schema", schema], env, workdir / f"{prefix}projector.log").start()
    p = _Pass(bootstrap, database_url, prefix, names, schema, worker, projector)
    try:
        rng = random.Random(seed + 1)
        await harness.send_all(
            bootstrap, [(names.checks, b"warm", json.dumps(workload.claim_check(rng, "warm")).encode())]
        )
        warm = VisibilityPoller(database_url, schema)
        await warm.poll_until(0, 1, [names.checks], bootstrap, timeout=180.0, alive=p.alive)
        yield p
    finally:
        worker.stop()
        projector.stop()


async def _send_and_wait(
    p: _Pass,
    wl: Workload,
    *,
    rate: float | None,
    before: tuple[int, int],
    timeout: float,
    count_after_send: bool = False,
) -> tuple[list[float], float, VisibilityPoller]:
    """Send `wl` (paced at `rate`/s, or at once) while polling what became visible,
    until its runs and claims are decided (`before`: the final runs and claim
    decisions already in the schema) and every projected record is in Postgres.
    Returns each record's send time, the moment all was visible, and the poller."""
    poller = VisibilityPoller(p.database_url, p.schema)
    sent_all = asyncio.Event() if count_after_send else None
    polling = asyncio.create_task(
        poller.poll_until(
            before[0] + wl.runs,
            before[1] + wl.claims,
            p.projected,
            p.bootstrap,
            timeout=timeout,
            alive=p.alive,
            counting=sent_all,
        )
    )
    try:
        sent = await harness.send_all(p.bootstrap, wl.records, rate=rate)
    except BaseException:
        polling.cancel()
        raise
    if sent_all is not None:
        sent_all.set()
    return sent, await polling, poller


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
    async with _started(bootstrap, database_url, workdir, prefix, seed) as p:
        wl = build_workload(p.names, runs, claims, seed)
        cpu0 = [p.worker.cpu_seconds(), p.projector.cpu_seconds()]
        sent, done_at, poller = await _send_and_wait(p, wl, rate=rate, before=(0, 1), timeout=timeout)
        rss = p.worker.rss_mb()
        cpu = [p.worker.cpu_seconds() - cpu0[0], p.projector.cpu_seconds() - cpu0[1]]
    rows = [ms for _, ms in await _row_latencies(bootstrap, p.names, wl, sent, poller)]
    decisions = [ms for _, ms in await _latencies(bootstrap, p.names, wl, sent, poller)]
    seconds = done_at - sent[0]
    row, decision = summary(rows), summary(decisions)
    return PipelineResult(
        events=len(wl.records),
        seconds=seconds,
        events_per_s=len(wl.records) / seconds,
        p50_ms=row["p50"],
        p95_ms=row["p95"],
        p99_ms=row["p99"],
        rate=rate,
        worker_rss_mb=rss,
        samples=len(rows),
        worker_cpu_s=cpu[0],
        projector_cpu_s=cpu[1],
        prefix=prefix,
        decision_p50_ms=decision["p50"],
        decision_p95_ms=decision["p95"],
        decision_p99_ms=decision["p99"],
        max_ms=row["max"],
        decision_max_ms=decision["max"],
        decision_samples=len(decisions),
        input_seconds=sent[-1] - sent[0],
    )


async def run_half_load(
    bootstrap: str,
    database_url: str,
    workdir: Path,
    *,
    rate: float,
    seconds: float,
    warmup_seconds: float,
    runs: int,
    claims: int,
    seed: int = 12,
    timeout: float = 900.0,
) -> PipelineResult:
    """Latency at a paced `rate` on warm topics: fresh topics and schema, one worker
    and one projector; first an unmeasured warm-up (`warmup_seconds` of input at
    `rate`, all of it projected, every partition of `WARMED_ROLES` having carried
    records), then `seconds` of measured input at the same rate. Both workloads mix
    runs and claims as `runs` : `claims` do."""
    prefix = harness.new_prefix("half")
    names = TopicNames.with_prefix(prefix)
    warm_runs, warm_claims = workload_mix(rate, warmup_seconds, runs, claims, min_runs=10 * harness.PARTITIONS)
    warm = build_workload(names, warm_runs, warm_claims, seed + WARMUP_SEED_OFFSET)
    measured_runs, measured_claims = workload_mix(rate, seconds, runs, claims)
    wl = build_workload(names, measured_runs, measured_claims, seed)
    async with _started(bootstrap, database_url, workdir, prefix, seed) as p:
        warm_sent, _, _ = await _send_and_wait(
            p, warm, rate=rate, before=(0, 1), timeout=timeout, count_after_send=True
        )
        cold = await _unwarmed(bootstrap, names)
        if cold:
            raise RuntimeError(f"half load: partitions without a warm-up record: {cold}")
        before = (warm.runs, 1 + warm.claims)
        sent, done_at, poller = await _send_and_wait(
            p, wl, rate=rate, before=before, timeout=timeout, count_after_send=True
        )
    rows = await _row_latencies(bootstrap, names, wl, sent, poller)
    decisions = [ms for _, ms in await _latencies(bootstrap, names, wl, sent, poller)]
    row, decision = summary([ms for _, ms in rows]), summary(decisions)
    return PipelineResult(
        events=len(wl.records),
        seconds=done_at - sent[0],
        events_per_s=len(wl.records) / (done_at - sent[0]),
        p50_ms=row["p50"],
        p95_ms=row["p95"],
        p99_ms=row["p99"],
        rate=rate,
        worker_rss_mb=0.0,
        samples=len(rows),
        prefix=prefix,
        decision_p50_ms=decision["p50"],
        decision_p95_ms=decision["p95"],
        decision_p99_ms=decision["p99"],
        max_ms=row["max"],
        decision_max_ms=decision["max"],
        decision_samples=len(decisions),
        input_seconds=sent[-1] - sent[0],
        warmup_seconds=warm_sent[-1] - warm_sent[0],
        warmup_events=len(warm.records),
        p99_by_slice_ms=p99_by_slice(rows, sent[0], sent[-1], SLICE_SECONDS),
    )


async def _unwarmed(bootstrap: str, names: TopicNames) -> list[tuple[str, int]]:
    """The partitions of `WARMED_ROLES` that have not carried a record."""
    ends = await harness.end_offsets(bootstrap, [getattr(names, r) for r in WARMED_ROLES])
    return sorted(tp for tp, end in ends.items() if end == 0)


async def _row_latencies(
    bootstrap: str, names: TopicNames, wl: Workload, sent: list[float], poller: VisibilityPoller
) -> list[tuple[float, float]]:
    """`LATENCY` per judge output and claim check of `wl`, with its send time: its
    send -> the commit of its own row, which the projector writes from the worker's
    validated record."""
    validated = await harness.read_all(bootstrap, [names.judge_outputs_valid, names.checks_valid])
    latencies: list[tuple[float, float]] = []
    for record in validated:
        doc = orjson.loads(record.value)
        if record.topic == names.judge_outputs_valid:
            index = wl.output_of.get(doc.get("judge_run_id"))
        else:
            index = wl.claim_of.get(doc.get("claim_id"))
        if index is None:
            continue  # the warm-up claim, or a warm-up workload's input
        at = poller.visible_at(record.topic, record.partition, record.offset)
        if at is None:
            continue
        latencies.append((sent[index], (at - sent[index]) * 1000))
    if not latencies:
        raise RuntimeError("no judge output or claim check row became visible")
    return latencies


async def _latencies(
    bootstrap: str, names: TopicNames, wl: Workload, sent: list[float], poller: VisibilityPoller
) -> list[tuple[float, float]]:
    """`DECISION_LATENCY` per input of `wl`, with its send time: send time -> its
    decision's rows visible (claims: the routing decision; judge outputs: the first
    revision that includes them)."""
    decided = await harness.read_all(bootstrap, [names.done, names.second_judge, names.human_review, names.reconciled])
    latencies: list[tuple[float, float]] = []
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
            latencies.append((sent[index], (at - sent[index]) * 1000))
    if not latencies:
        raise RuntimeError("no decision became visible")
    return latencies
