"""Latency: at a steady, modest rate, every record's rows are visible in Postgres
within one flush interval (`JUDGEFLOW_PROJECTOR_LINGER_MS`) of its arrival, plus a
stated tolerance for the batch's own write and a shared machine's scheduling. A
record's arrival is when a plain consumer in the test process received it: the
broker's delivery alone reached 228 ms on a loaded 2-core machine, and a row
277 ms after its send was then 49 ms of projector. The report gives both, from
the send.

The bound is the shipped default linger plus `TOLERANCE_MS`; the projector runs
with whatever the environment sets, as a deployment would. So the test fails
when the projector lingers longer than it promises: with
`JUDGEFLOW_PROJECTOR_LINGER_MS=1000` in the environment, 465 of 600 records were
late (up to 1,087 ms after they reached the plain consumer).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import psycopg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from judgeflow import workload
from projections.projector import DEFAULT_LINGER_MS
from streams.edge import SourceRef, screen_judge_output
from streams.topics import TopicNames
from tests.conftest import MEASURED
from tests.scaffold import Pipeline

pytestmark = pytest.mark.integration

TOLERANCE_MS = 250.0
"""Beyond the linger: the batch's own write and commit, the 5 ms poll below, and
the scheduling of 2 cores shared with the broker, Postgres and whatever else runs
(a plain consumer's delivery alone reached 400 ms at p99 on this machine under a
load average of 6)."""
RATE = 20.0
"""Judge outputs per second, each sent with its validated record and a claim check:
60 records/s, about 1% of what one projector writes."""
SECONDS = 10.0
POLL_S = 0.005
PARTITIONS = 4

Send = tuple[str, bytes, bytes, list[tuple[str, bytes]]]


def _sends(names: TopicNames, n: int) -> list[list[Send]]:
    """Per tick: a judge output as the judge sends it, its validated record as
    the worker writes it (so its judge_outputs row and child rows are measured
    too), and a claim check."""
    rng = random.Random(4)
    rubric = workload.stable_id("latency-rubric")
    ticks = []
    for i in range(n):
        run_id = workload.stable_id("latency-run", i)
        raw = json.dumps(workload.judge_output(rng, run_id, workload.JUDGE_MODELS[i % 3], rubric_id=rubric,
                                               submission_id=workload.stable_id("sub", i))).encode()  # fmt: skip
        [valid] = screen_judge_output(raw, SourceRef(names.judge_outputs, -1, -1, run_id.encode()))
        claim = json.dumps(workload.claim_check(rng, f"lat-{i}")).encode()
        ticks.append([
            (names.judge_outputs, run_id.encode(), raw, []),
            (getattr(names, valid.role), valid.key or b"", valid.value, list(valid.headers)),
            (names.checks, f"lat-{i}".encode(), claim, []),
        ])  # fmt: skip
    return ticks


class Visibility:
    """Polls `projection_offsets` (committed in the same transaction as the rows):
    when each offset became visible, to within one poll."""

    def __init__(self, database_url: str, schema: str) -> None:
        self.database_url, self.schema = database_url, schema
        self.changes: dict[tuple[str, int], list[tuple[float, int]]] = {}

    async def poll(self, done: asyncio.Event) -> None:
        async with await psycopg.AsyncConnection.connect(
            self.database_url, autocommit=True, options=f"-c search_path={self.schema}"
        ) as conn:
            while not done.is_set():
                # The statement's snapshot is taken after `before`: whatever it sees was committed by then.
                before = time.time()
                cur = await conn.execute("SELECT topic, partition, next_offset FROM projection_offsets")
                for topic, partition, nxt in await cur.fetchall():
                    seen = self.changes.setdefault((topic, partition), [])
                    if not seen or seen[-1][1] != nxt:
                        seen.append((before, nxt))
                await asyncio.sleep(POLL_S)  # the poll interval, not synchronisation

    def visible_at(self, topic: str, partition: int, offset: int) -> float | None:
        return next((at for at, nxt in self.changes.get((topic, partition), []) if nxt > offset), None)


async def _measure(bootstrap: str, database_url: str, schema: str,
                   ticks: list[list[Send]]) -> list[tuple[float, float | None]]:  # fmt: skip
    """Send the ticks at `RATE`; per record, in ms from its send: its rows visible,
    and its arrival at a plain consumer (the broker's share, for the report)."""
    visibility = Visibility(database_url, schema)
    done = asyncio.Event()
    polling = asyncio.create_task(visibility.poll(done))
    plain = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await plain.start()
    topics = sorted({topic for tick in ticks for topic, *_ in tick})
    plain.assign([TopicPartition(t, p) for t in topics for p in range(PARTITIONS)])
    await plain.seek_to_end()
    arrived: dict[tuple[str, int, int], float] = {}

    async def deliver() -> None:
        while not done.is_set():
            got = await plain.getmany(timeout_ms=100)
            now = time.time()
            arrived.update(((r.topic, r.partition, r.offset), now) for part in got.values() for r in part)

    delivering = asyncio.create_task(deliver())
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    await producer.start()
    sent: list[tuple[float, asyncio.Future[Any]]] = []
    try:
        start = time.monotonic()
        for i, tick in enumerate(ticks):
            ahead = start + i / RATE - time.monotonic()
            if ahead > 0:
                await asyncio.sleep(ahead)  # pacing the load, not synchronisation
            for topic, key, value, headers in tick:
                sent.append((time.time(), await producer.send(topic, value, key=key, headers=headers)))
        await producer.flush()
        metas = [(at, await ack) for at, ack in sent]
    finally:
        await producer.stop()
    out: list[tuple[float, float | None]] = []
    deadline = time.monotonic() + 60
    try:
        for at, meta in metas:
            while (seen := visibility.visible_at(meta.topic, meta.partition, meta.offset)) is None:
                if polling.done() or time.monotonic() > deadline:
                    polling.result()
                    raise TimeoutError(f"{meta} never became visible")
                await asyncio.sleep(POLL_S)  # waiting on the poller's next answer, with the deadline above
            came = arrived.get((meta.topic, meta.partition, meta.offset))
            out.append(((seen - at) * 1000, None if came is None else (came - at) * 1000))
    finally:
        done.set()
        await polling
        await delivering
        await plain.stop()
    return out


def _percentiles(xs: list[float]) -> str:
    s = sorted(xs)
    return f"p50 {s[len(s) // 2]:.0f} / p99 {s[int(len(s) * 0.99)]:.0f} / max {s[-1]:.0f} ms"


@pytest.mark.pipeline(partitions=PARTITIONS)
def test_every_row_is_visible_within_one_flush_interval_at_a_steady_rate(pipeline: Pipeline) -> None:
    names = pipeline.names
    ticks = _sends(names, int(RATE * SECONDS))
    with pipeline.projector() as projector:
        # Warm-up: the projector has joined, been assigned every partition and written once.
        warm = json.dumps(workload.claim_check(random.Random(1), "warm")).encode()
        pipeline.send([(names.checks, b"warm", warm)])
        pipeline.wait_projected(projector, 120, "warm-up record visible")
        latencies = asyncio.run(_measure(pipeline.bootstrap, pipeline.database_url, pipeline.schema, ticks))
        assert projector.alive(), projector.log()[-4000:]
    with pipeline.connect() as conn:
        counts = conn.execute("SELECT (SELECT count(*) FROM raw_events), (SELECT count(*) FROM judge_outputs),"
                              " (SELECT count(*) FROM judge_evidence_refs) > 0").fetchone()  # fmt: skip
    assert counts == (2 * len(ticks) + 1, len(ticks), True)
    visible = [v for v, _ in latencies]
    delivered = [d for _, d in latencies if d is not None]
    bound = DEFAULT_LINGER_MS + TOLERANCE_MS
    MEASURED["projector latency"] = (
        f"{len(visible)} records at {3 * RATE:.0f}/s, send to rows visible {_percentiles(visible)}; "
        f"send to a plain consumer {_percentiles(delivered)}; bound: linger {DEFAULT_LINGER_MS:.0f} + "
        f"{TOLERANCE_MS:.0f} ms"
    )  # fmt: skip
    # Per record, what the projector adds: its rows visible after the record reached a plain consumer in this
    # process (so a moment in which the broker, or this process, did not run counts for neither).
    late = [(round(v), round(d or 0.0)) for v, d in latencies if v - (d or 0.0) > bound]
    assert not late, (
        f"{len(late)} of {len(visible)} records visible more than {bound:.0f} ms after they reached a plain "
        f"consumer (visible, reached, ms): {late[:20]}; " + (MEASURED["projector latency"])
    )
