"""The review desk under load: 20 reviewers at once on a queue of 10,000 items; server time of "next" and of
"submit" (to the broker's ack).

The queue is seeded straight into the read models (`checks`, `claim_checks`, then the projector's own refresh of
`review_items`): what is measured is the desk, not the pipeline. Reviews are published to a real broker with
acks=all. Server time is taken by a middleware around the desk's handlers; the reviewers run in a process of
their own, so their work is not in it. `python -m bench.desk` runs it alone on services of its own.

Two passes: reviewers who never pause (the desk's throughput; latency is then mostly queueing, by Little's
law), and reviewers who take `think_s` between steps (people take minutes; the pause keeps the load a stress
test while leaving the desk's own time visible).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
from aiohttp import web

from bench import harness
from judgeflow.desk.api import ReviewPublisher, make_desk_app
from judgeflow.desk.leases import LeaseStore
from judgeflow.desk.reviewer import USER_HEADER, ReviewerIdentity
from judgeflow.desk.serve import desk_pool
from judgeflow.services.ports import free_port
from projections.migrate import migrate
from projections.review_items import ReviewSample, refresh_review_items
from streams.topics import TopicNames

THINK_S = 0.5
"""Mean pause of a reviewer before each step in the paced pass (people take minutes per item)."""
TARGET_MS = 50.0
"""The issue's target: p99 server time of next and of submit."""

SEED_CHECKS = """
INSERT INTO checks (claim_id, judge_id, source_id, verdict, score, confidence, reason, passage_quote, passage,
  claim_text, route, route_reason, final_verdict, final_route, final_reason, created_at)
SELECT 'bench-' || i, 'judge-a', 'src-' || (i %% 40), 'fail', 0.1, 0.3,
  'The passage gives another figure.', 'revenue grew 12%%', 'In its filing the company said revenue grew 12%%.',
  'Revenue grew 15%%.', 'human_review', 'fail_low_confidence', 'fail', 'human_review', 'fail_low_confidence',
  timestamptz '2026-12-01 00:00Z' + i * interval '1 second'
FROM generate_series(1, %(n)s) AS i"""
SEED_CLAIM_CHECKS = """
INSERT INTO claim_checks (claim_id, judge_id, source_id, verdict, score, confidence, reason, passage_quote,
  passage, claim_text, schema_version, source_partition, source_offset, created_at)
SELECT claim_id, judge_id, source_id, verdict, score, confidence, reason, passage_quote, passage, claim_text,
  '1.0', 0, row_number() OVER (ORDER BY claim_id), created_at FROM checks"""


@dataclass(frozen=True)
class DeskResult:
    items: int
    reviewers: int
    think_s: float
    reviews: int
    seconds: float
    next_p50_ms: float
    next_p99_ms: float
    submit_p50_ms: float
    submit_p99_ms: float
    blind_p99_ms: float


def seed(database_url: str, schema: str, items: int) -> None:
    """`items` claims routed to people, as the projector would have left them."""
    with psycopg.connect(database_url, autocommit=True, options=f"-c search_path={schema}") as conn:
        conn.execute(SEED_CHECKS, {"n": items})
        conn.execute(SEED_CLAIM_CHECKS)
        ids = [c for (c,) in conn.execute("SELECT claim_id FROM checks")]
        with conn.cursor() as cur:
            refresh_review_items(cur, ids, ReviewSample(audit_share=0.0, overlap_share=0.1))


async def measure(bootstrap: str, database_url: str, *, items: int = 10_000, reviewers: int = 20,
                  reviews: int = 2000, think_s: float = 0.0) -> DeskResult:  # fmt: skip
    """`reviewers` concurrent reviewers do `reviews` reviews (next, blind, submit) of a `items`-item queue,
    pausing `think_s` before each step."""
    prefix = harness.new_prefix("desk")
    schema = prefix.rstrip(".").replace("-", "_")
    names = TopicNames.with_prefix(prefix)
    await harness.create(bootstrap, names)
    migrate(database_url, schema)
    seed(database_url, schema, items)
    server: dict[str, list[float]] = defaultdict(list)

    @web.middleware
    async def timed(request: web.Request, handler: Any) -> web.StreamResponse:
        t0 = time.perf_counter()
        try:
            response: web.StreamResponse = await handler(request)
            return response
        finally:
            server[request.path.rsplit("/", 1)[-1]].append(time.perf_counter() - t0)

    pool = desk_pool(database_url, schema, size=20)
    await pool.open(wait=True)
    publish = ReviewPublisher(bootstrap, prefix, {})
    app = make_desk_app(LeaseStore(pool), publish, ReviewerIdentity(trusted_proxies=frozenset({"127.0.0.1"})))
    app.middlewares.insert(0, timed)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    started = time.monotonic()
    clients = multiprocessing.get_context("spawn").Process(
        target=_clients, args=(f"http://127.0.0.1:{port}", reviewers, reviews, think_s)
    )  # in a process of their own: their work is not in the server's time
    try:
        clients.start()
        await asyncio.to_thread(clients.join)
        if clients.exitcode != 0:
            raise RuntimeError(f"the bench's reviewers failed (exit {clients.exitcode})")
    finally:
        await runner.cleanup()
        await publish.close()
        await pool.close()
    seconds = time.monotonic() - started

    def ms(name: str, q: int) -> float:
        return round(statistics.quantiles(server[name], n=100)[q - 1] * 1000, 2)

    latency = (ms("next", 50), ms("next", 99), ms("submit", 50), ms("submit", 99), ms("blind", 99))
    return DeskResult(items, reviewers, think_s, len(server["submit"]), round(seconds, 2), *latency)


def _clients(base: str, reviewers: int, reviews: int, think_s: float) -> None:
    async def run() -> None:
        left = [reviews]
        async with aiohttp.ClientSession(base) as http:
            await asyncio.gather(*(_reviewer(http, f"bench-reviewer-{i:02d}", left, think_s) for i in range(reviewers)))

    asyncio.run(run())


async def _reviewer(http: aiohttp.ClientSession, name: str, left: list[int], think_s: float) -> None:
    headers = {USER_HEADER: name}
    rng = random.Random(name)
    while left[0] > 0:
        left[0] -= 1
        await asyncio.sleep(rng.uniform(0, 2 * think_s))  # a reviewer reading (think time), not a synchronisation
        async with http.post("/api/review/next", headers=headers) as r:
            if r.status == 204:
                return
            lease = (await r.json())["lease_id"]
        await asyncio.sleep(rng.uniform(0, 2 * think_s))
        async with http.post(f"/api/review/{lease}/blind", json={"verdict": "fail"}, headers=headers) as r:
            await r.read()
        await asyncio.sleep(rng.uniform(0, 2 * think_s))
        async with http.post(f"/api/review/{lease}/submit", json={"final_verdict": "fail"}, headers=headers) as r:
            if r.status != 200:
                raise RuntimeError(f"submit refused: {await r.text()}")


def main() -> None:
    """Run it alone on a broker and a Postgres of its own; print and write bench/results/desk-<date>.json."""
    from judgeflow.services.local import local_services

    with tempfile.TemporaryDirectory(prefix="judgeflow-desk-bench-") as tmp, local_services(Path(tmp)) as services:
        bootstrap, url = services.kafka_bootstrap_servers, services.database_url
        passes = [asyncio.run(measure(bootstrap, url, think_s=think)) for think in (0.0, THINK_S)]
    out = Path(__file__).resolve().parent / "results" / f"desk-{datetime.now(UTC).date().isoformat()}.json"
    doc = {"passes": [asdict(p) for p in passes], "target_ms": TARGET_MS,
           "date": datetime.now(UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count()}  # fmt: skip
    out.write_text(json.dumps(doc, indent=2) + "\n")
    for p in passes:
        print(json.dumps(asdict(p)), file=sys.stdout)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
