"""The review desk over HTTP, on real Kafka and Postgres: claims routed to people by the worker become queue items
through the projector; twenty reviewers at once review every item exactly as often as it wants; every refusal
of DESIGN decision 14 is a 4xx/503 with its code and publishes nothing; an expired lease returns its item; a
submit the broker did not acknowledge is kept and, retried, recorded once."""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import psycopg
import pytest
from aiohttp import web

from judgeflow import workload
from judgeflow.desk.api import ReviewPublisher, make_desk_app
from judgeflow.desk.leases import LeaseStore
from judgeflow.desk.reviewer import USER_HEADER, ReviewerIdentity
from judgeflow.desk.serve import desk_pool
from judgeflow.services.ports import free_port
from projections.review_figures import anchoring, overturns
from projections.review_items import review_pick
from tests.scaffold import Pipeline, fresh_schema

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

TRUSTED = ReviewerIdentity(trusted_proxies=frozenset({"127.0.0.1"}))


def to_people(p: Pipeline, n: int, seed: int, done: int = 0) -> list[str]:
    """`n` claim checks the default policy routes to human review (a failure with low confidence), and `done`
    more it routes to done (a confident pass); returns the routed claims' ids."""
    rng = random.Random(seed)
    routed = [f"{p.prefix}h{i}" for i in range(n)]
    passed = [f"{p.prefix}d{i}" for i in range(done)]
    docs = [workload.claim_check(rng, c, verdict="fail", score=0.1, confidence=0.3) for c in routed]
    docs += [workload.claim_check(rng, c, verdict="pass", score=0.95, confidence=0.9) for c in passed]
    p.send((p.names.checks, d["claim_id"].encode(), json.dumps(d).encode()) for d in docs)
    return routed


def open_items(p: Pipeline) -> int:
    return p.count("SELECT count(*) FROM review_items WHERE open")


@asynccontextmanager
async def desk(
    p: Pipeline, lease_seconds: float = 300.0, publisher: ReviewPublisher | None = None
) -> AsyncIterator[tuple[str, ReviewPublisher]]:
    """The desk's app on a free loopback port, trusting 127.0.0.1's X-Forwarded-User; yields its address."""
    pool = desk_pool(p.database_url, p.schema, size=10)
    await pool.open(wait=True)
    publish = publisher or ReviewPublisher(p.bootstrap, p.prefix, {})
    runner = web.AppRunner(make_desk_app(LeaseStore(pool, lease_seconds), publish, TRUSTED))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}", publish
    finally:
        await runner.cleanup()
        await publish.close()
        await pool.close()


async def call(
    http: aiohttp.ClientSession, base: str, who: str | None, path: str, body: Any = None, method: str = "POST"
) -> tuple[int, Any]:
    headers = {USER_HEADER: who} if who is not None else {}
    async with http.request(method, base + path, json=body, headers=headers) as r:
        return r.status, (await r.json() if r.status != 204 else None)


async def review_all(base: str, reviewers: list[str]) -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
    """Every reviewer takes items until the queue has none for them: blind, then the judge's verdict confirmed
    (or, for one in five, overturned with a note). Returns each review and the time of each call."""
    done: list[dict[str, Any]] = []
    times: dict[str, list[float]] = defaultdict(list)

    async def reviewer(name: str, http: aiohttp.ClientSession) -> None:
        rng = random.Random(name)
        while True:
            t0 = time.perf_counter()
            status, got = await call(http, base, name, "/api/review/next")
            times["next"].append(time.perf_counter() - t0)
            if status == 204:
                return
            assert status == 200, got
            lease, claim = got["lease_id"], got["item"]["claim_id"]
            status, shown = await call(http, base, name, f"/api/review/{lease}/blind", {"verdict": "fail"})
            assert status == 200, shown
            overturn = rng.random() < 0.2
            final = "pass" if overturn else shown["decision"]["verdict"]
            t0 = time.perf_counter()
            answer = {"final_verdict": final, "note": "the passage says so" if overturn else None}
            status, sent = await call(http, base, name, f"/api/review/{lease}/submit", answer)
            times["submit"].append(time.perf_counter() - t0)
            assert status == 200, sent
            done.append({"claim": claim, "reviewer": name, "lease": lease, "review_id": sent["review_id"],
                         "source": got["item"]["source"], "overturn": overturn})  # fmt: skip

    async with aiohttp.ClientSession() as http:
        await asyncio.gather(*(reviewer(name, http) for name in reviewers))
    return done, times


def test_twenty_reviewers_review_every_item_exactly_as_often_as_it_wants(pipeline: Pipeline) -> None:
    p = pipeline
    with p.worker(), p.projector():
        routed = to_people(p, 500, seed=11)
        p.wait_projected(None, 180, "500 review items", also=lambda: open_items(p) == 500)
        wanted = {c: 2 if review_pick("overlap", c) < 0.1 else 1 for c in routed}

        async def run() -> tuple[list[dict[str, Any]], dict[str, list[float]]]:
            async with desk(p) as (base, _):
                return await review_all(base, [f"reviewer-{i:02d}" for i in range(20)])

        done, times = asyncio.run(run())
        by_claim: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in done:
            by_claim[r["claim"]].append(r)
        assert sorted(by_claim) == sorted(routed)
        for claim, reviews in by_claim.items():
            assert len(reviews) == wanted[claim] == len({r["reviewer"] for r in reviews}), (claim, reviews)
        assert sum(wanted.values()) == len(done) == len({r["review_id"] for r in done})
        projected = lambda: p.count("SELECT count(*) FROM reviews") == len(done) and open_items(p) == 0  # noqa: E731
        p.wait_projected(None, 120, "every review projected, the queue empty", also=projected)
        with p.connect() as conn:
            sources: Counter[str] = Counter(
                dict(conn.execute("SELECT source, count(*) FROM reviews GROUP BY source").fetchall())
            )
            leased_twice = conn.execute(
                "SELECT count(*) FROM review_leases a JOIN review_leases b ON a.claim_id = b.claim_id "
                "AND a.lease_id < b.lease_id AND a.slot = b.slot "
                "AND tstzrange(a.leased_at, a.closed_at) && tstzrange(b.leased_at, b.closed_at)"
            ).fetchone()
            figures = overturns(conn)
            seen = anchoring(conn)
        assert sources == {"routed": 500, "overlap": sum(w == 2 for w in wanted.values())}
        assert leased_twice == (0,)
        [routed_figures] = figures  # what the report shows: first reviews only, against the pipeline's "fail"
        assert routed_figures.reviewed == 500
        assert routed_figures.overturned == sum(r["overturn"] for r in done if r["source"] == "routed")
        assert routed_figures.kappa.value == pytest.approx(0.0)  # the judge said fail every time
        assert seen == (len(done), sum(r["overturn"] for r in done))
    p99 = {k: statistics.quantiles(v, n=100)[98] * 1000 for k, v in times.items()}
    print(
        f"[measured] desk: 20 reviewers, {len(done)} reviews of 500 items; client-side p99 next "
        f"{p99['next']:.1f} ms, submit (to the broker's ack) {p99['submit']:.1f} ms"
    )


def test_every_refusal_has_its_code_and_publishes_nothing(pipeline: Pipeline) -> None:
    p = pipeline
    with p.worker(), p.projector(JUDGEFLOW_REVIEW_OVERLAP="0"):  # one reviewer per item
        [first, second] = to_people(p, 2, seed=12)
        p.wait_projected(None, 120, "2 review items", also=lambda: open_items(p) == 2)

        async def run() -> None:
            async with desk(p) as (base, _), aiohttp.ClientSession() as http:
                assert (await call(http, base, None, "/api/review/next"))[1]["code"] == "NO_REVIEWER"
                status, got = await call(http, base, "ana", "/api/review/next")
                lease = got["lease_id"]
                assert status == 200 and got["item"]["claim_id"] == first
                assert "verdict" not in json.dumps(got["item"]) and "score" not in json.dumps(got["item"])
                refusals = [
                    (("ben", f"/api/review/{lease}/blind", {"verdict": "pass"}), 403, "NOT_YOUR_LEASE"),
                    (("ana", "/api/review/00000000-0000-0000-0000-000000000000/renew", None), 404, "UNKNOWN_LEASE"),
                    (("ana", "/api/review/not-a-lease/skip", None), 404, "UNKNOWN_LEASE"),
                    (("ana", f"/api/review/{lease}/submit", {"final_verdict": "fail"}), 409, "BLIND_FIRST"),
                    (("ana", f"/api/review/{lease}/blind", {"verdict": "maybe"}), 422, "INVALID_VERDICT"),
                    (("ana", f"/api/review/{lease}/blind", ["pass"]), 400, "INVALID_REQUEST"),
                ]
                for (who, path, body), status, code in refusals:
                    answer = await call(http, base, who, path, body)
                    assert (answer[0], answer[1]["code"]) == (status, code), (path, answer)
                status, shown = await call(http, base, "ana", f"/api/review/{lease}/blind", {"verdict": "pass"})
                assert status == 200 and [j["verdict"] for j in shown["judges"]] == ["fail"]
                status, got = await call(http, base, "ana", f"/api/review/{lease}/submit", {"final_verdict": "pass"})
                assert (status, got["code"]) == (422, "NOTE_REQUIRED")
                # the second reviewer's lease expires: its item goes back to the queue
                async with desk(p, lease_seconds=1.0) as (short, _):
                    status, held = await call(http, short, "ben", "/api/review/next")
                    assert status == 200 and held["item"]["claim_id"] == second
                    deadline = time.monotonic() + 30
                    while (again := await call(http, short, "cy", "/api/review/next"))[0] == 204:
                        assert time.monotonic() < deadline, "the lease never expired"
                        await asyncio.sleep(0.2)  # polling the queue until the lease runs out, not a synchronisation
                    assert again[0] == 200 and again[1]["item"]["claim_id"] == second
                    expired = await call(http, short, "ben", f"/api/review/{held['lease_id']}/renew")
                    assert (expired[0], expired[1]["code"]) == (409, "LEASE_EXPIRED")

        asyncio.run(run())
        p.wait_projected(None, 60, "nothing more to project")
        assert p.count("SELECT count(*) FROM reviews") == 0


def test_a_submit_the_broker_did_not_acknowledge_is_kept_and_a_retry_records_it_once(pipeline: Pipeline) -> None:
    p = pipeline
    with p.worker(), p.projector(JUDGEFLOW_REVIEW_OVERLAP="0"):  # one reviewer per item
        [claim] = to_people(p, 1, seed=13)
        p.wait_projected(None, 120, "1 review item", also=lambda: open_items(p) == 1)
        down = ReviewPublisher(f"127.0.0.1:{free_port()}", p.prefix, {}, timeout_s=2.0)

        async def run() -> tuple[str, str]:
            async with desk(p, publisher=down) as (base, publish), aiohttp.ClientSession() as http:
                _, got = await call(http, base, "ana", "/api/review/next")
                lease = got["lease_id"]
                await call(http, base, "ana", f"/api/review/{lease}/blind", {"verdict": "fail"})
                status, refused = await call(
                    http, base, "ana", f"/api/review/{lease}/submit", {"final_verdict": "fail"}
                )
                assert (status, refused["code"]) == (503, "BROKER_UNAVAILABLE")
                publish.bootstrap = p.bootstrap  # the broker is back (the producer never started: it starts now)
                status, first = await call(http, base, "ana", f"/api/review/{lease}/submit", {"final_verdict": "fail"})
                assert status == 200
                status, twice = await call(http, base, "ana", f"/api/review/{lease}/submit", {"final_verdict": "fail"})
                assert status == 200 and twice == first
                return lease, first["review_id"]

        lease, review_id = asyncio.run(run())
        p.wait_projected(None, 60, "the review projected", also=lambda: p.count("SELECT count(*) FROM reviews") == 1)
        with p.connect() as conn:
            row = conn.execute("SELECT review_id::text, claim_id, reviewer, blind_verdict, source, lease_id::text, "
                               "schema_version, review_seconds >= 0 FROM reviews").fetchone()  # fmt: skip
        assert row == (review_id, claim, "ana", "fail", "routed", lease, "1.1", True)
        assert open_items(p) == 0


def test_the_audit_pick_in_sql_is_the_one_in_python(database_url: str) -> None:
    ids = [f"claim-{i}" for i in range(2000)] + ["claim-ünïcode-✓", "", "a" * 300, "x:y"]
    with (
        fresh_schema(database_url, "pick") as schema,
        psycopg.connect(database_url, options=f"-c search_path={schema}") as conn,
    ):
        for purpose in ("audit", "overlap"):
            rows = conn.execute("SELECT id, review_pick(%s, id) FROM unnest(%s::text[]) AS id", (purpose, ids))
            assert {i: v for i, v in rows.fetchall()} == {i: review_pick(purpose, i) for i in ids}
