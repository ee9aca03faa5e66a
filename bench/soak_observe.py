"""What the soak watches while it runs: latencies (send -> decision, send -> row), lag, and the resources of
every process, gathered into one sample per interval.

- `DecisionTracker` reads the routing topics: a claim's first decision, a run's evaluation decision;
- `VisibilityTracker` reads the validated topics to learn where each claim check and judge output landed and
  polls the projector's committed offsets (stored with the rows) to learn when its row became visible;
- `Resources` reads /proc for a process tree's RSS and CPU;
- `Window` turns the latencies completed in one interval into p50 / p99 / max.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import time
import urllib.request
from array import array
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psycopg
from aiokafka import AIOKafkaConsumer

from bench.harness import percentile
from bench.soak_load import SECOND_JUDGE
from streams.topics import TopicNames

TP = tuple[str, int]


STEADY_WINDOW_S = 300
"""The targets' window: p99 per five minutes."""


@dataclass
class Window:
    """Latencies (ms) completed within one sampling interval, and all of them by five-minute window since
    `origin` (time.monotonic() of the measured phase's start; compact arrays, an hour is a few million)."""

    values: list[float] = field(default_factory=list)
    origin: float = 0.0
    buckets: dict[int, array[float]] = field(default_factory=dict)

    def add(self, ms: float) -> None:
        self.values.append(ms)
        if self.origin:
            bucket = int((time.monotonic() - self.origin) // STEADY_WINDOW_S)
            self.buckets.setdefault(bucket, array("f")).append(ms)

    def summary(self) -> dict[str, float | int | None]:
        return summarize(self.values)


def summarize(values: list[float]) -> dict[str, float | int | None]:
    """Count, p50, p99 and max (ms, rounded to 0.1) of some latencies."""
    if not values:
        return {"n": 0, "p50": None, "p99": None, "max": None}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 1),
        "p99": round(percentile(values, 99), 1),
        "max": round(max(values), 1),
    }


async def consume(bootstrap: str, topics: list[str], stop: asyncio.Event) -> AsyncIterator[tuple[list[Any], float]]:
    """Every record of `topics` from the beginning, a fetch at a time with the time it was read, until `stop`."""
    consumer = AIOKafkaConsumer(
        *topics, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200, max_records=5000)
            yield [r for records in batch.values() for r in records], time.time()
    finally:
        await consumer.stop()


class DecisionTracker:
    """Send -> decision: a claim's first routing decision after its first check was sent, a run's evaluation
    decision after its last judge output was sent (both read from the routing topics)."""

    def __init__(self, bootstrap: str, names: TopicNames, claim_sent: dict[str, float], run_sent: dict[str, float]):
        self.bootstrap = bootstrap
        self.topics = [names.done, names.second_judge, names.human_review]
        self.claim_sent = claim_sent
        self.run_sent = run_sent
        self.window = Window()

    async def run(self, stop: asyncio.Event) -> None:
        async for records, now in consume(self.bootstrap, self.topics, stop):
            for r in records:
                self._decided(orjson.loads(r.value), now)

    def _decided(self, d: dict[str, Any], now: float) -> None:
        if d.get("subject") == "claim" and len(d.get("judge_ids") or ()) == 1:
            sent = self.claim_sent.pop(d.get("claim_id") or "", None)
        elif d.get("subject") == "evaluation":
            sent = self.run_sent.pop(d.get("evaluation_run_id") or "", None)
        else:
            return
        if sent is not None:
            self.window.add((now - sent) * 1000)


class VisibilityTracker:
    """Send -> row: where each first-judge claim check and judge output landed on its validated topic, and when
    the projector's committed offset for that partition passed it (polled every `poll_s`)."""

    def __init__(
        self,
        bootstrap: str,
        names: TopicNames,
        database_url: str,
        schema: str,
        check_sent: dict[str, float],
        output_sent: dict[str, float],
        poll_s: float = 0.1,
    ) -> None:
        self.bootstrap = bootstrap
        self.names = names
        self.database_url = database_url
        self.schema = schema
        self.check_sent = check_sent
        self.output_sent = output_sent
        self.poll_s = poll_s
        self.pending: dict[TP, deque[tuple[int, float]]] = defaultdict(deque)
        self.history: dict[TP, tuple[list[float], list[int]]] = defaultdict(lambda: ([], []))
        self.window = Window()

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(self._read_validated(stop), self._poll_offsets(stop))

    async def _read_validated(self, stop: asyncio.Event) -> None:
        topics = [self.names.checks_valid, self.names.judge_outputs_valid]
        async for records, _ in consume(self.bootstrap, topics, stop):
            for r in records:
                self._landed(r.topic, r.partition, r.offset, orjson.loads(r.value))
            self._resolve()

    def _landed(self, topic: str, partition: int, offset: int, d: dict[str, Any]) -> None:
        if topic == self.names.checks_valid:
            sent = None if d.get("judge_id") == SECOND_JUDGE else self.check_sent.pop(d.get("claim_id") or "", None)
        else:
            sent = self.output_sent.pop(d.get("judge_run_id") or "", None)
        if sent is not None:  # the first copy only: a redelivered one was sent no later
            self.pending[(topic, partition)].append((offset, sent))

    async def _poll_offsets(self, stop: asyncio.Event) -> None:
        conn: psycopg.AsyncConnection[Any] | None = None
        while not stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = await psycopg.AsyncConnection.connect(
                        self.database_url, autocommit=True, options=f"-c search_path={self.schema}", connect_timeout=2
                    )
                cur = await conn.execute("SELECT topic, partition, next_offset FROM projection_offsets")
                now = time.time()
                for t, p, nxt in await cur.fetchall():
                    times, offsets = self.history[(t, p)]
                    if not offsets or nxt != offsets[-1]:
                        times.append(now)
                        offsets.append(nxt)
                self._resolve()
            except psycopg.Error:  # Postgres restarting (a fault): the rows become visible after it, and say so
                if conn is not None:
                    await conn.close()
                conn = None
            await asyncio.sleep(self.poll_s)  # the poll interval: the latency's resolution
        if conn is not None:
            await conn.close()

    def _resolve(self) -> None:
        for tp, queue in self.pending.items():
            times, offsets = self.history.get(tp, ([], []))
            while queue and offsets and offsets[-1] > queue[0][0]:
                offset, sent = queue.popleft()
                visible = times[bisect.bisect_right(offsets, offset)]  # the first poll whose next offset passed it
                self.window.add(max(0.0, visible - sent) * 1000)


class Resources:
    """RSS (MiB) and CPU seconds of a process and all its descendants (Postgres's backends, which each start a
    session of their own, so a process group would miss them)."""

    def __init__(self) -> None:
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.table: dict[int, tuple[int, int, int]] = {}

    def snapshot(self) -> None:
        """Read /proc once: every process's parent, CPU ticks and resident pages."""
        table = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            table[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[21]))
        self.table = table

    def of_tree(self, pid: int | None) -> tuple[float, float] | None:
        if pid is None or pid not in self.table:
            return None
        children: dict[int, list[int]] = {}
        for child, (parent, _, _) in self.table.items():
            children.setdefault(parent, []).append(child)
        rss, cpu, todo = 0, 0, [pid]
        while todo:
            p = todo.pop()
            _, ticks, pages = self.table[p]
            rss, cpu = rss + pages, cpu + ticks
            todo += children.get(p, [])
        return rss * self.page / (1 << 20), cpu / self.ticks


def scrape_sum(port: int, metric: str) -> float | None:
    """The sum of one metric's samples on a process's /metrics, or None when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    total = 0.0
    for line in text.splitlines():
        if line.startswith(metric + "{") or line.startswith(metric + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False
