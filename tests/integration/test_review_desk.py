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
from judgeflow.producer import JudgeflowProducer
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


async def until(condition: Any, what: str, timeout: float = 60.0) -> None:
    """Poll Postgres until the condition holds (the projector's pace), or fail saying what never happened."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        await asyncio.sleep(0.2)  # polling interval, not a synchronisation


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
                # ana's review of the claim arrives from another tool while she holds the lease: refused
                elsewhere = {"schema_version": "1.0", "review_id": workload.stable_id("elsewhere", first),
                             "claim_id": first, "reviewer": "ana", "final_verdict": "fail",
                             "created_at": "2026-12-06T09:00:00Z"}  # fmt: skip
                async with JudgeflowProducer(p.bootstrap, topic_prefix=p.prefix) as producer:
                    await producer.send_review(elsewhere)
                await until(lambda: open_items(p) == 1, "the other tool's review projected")
                answer = await call(http, base, "ana", f"/api/review/{lease}/submit", {"final_verdict": "fail"})
                assert (answer[0], answer[1]["code"]) == (409, "ALREADY_REVIEWED")
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
        assert p.count("SELECT count(*) FROM reviews") == 1  # the other tool's; the desk published nothing


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


def runs_to_people(p: Pipeline, n: int, seed: int) -> list[str]:
    """`n` evaluation runs whose three judges contradict each other on every lane (scores 15, 55 and 95):
    the worker routes each final evaluation to human review. Returns the runs' ids."""
    rng = random.Random(seed)
    rubric = workload.rubric(workload.stable_id("rubric", p.prefix))
    rubric_id = rubric["rubric_version_id"]
    records = [(p.names.rubrics, rubric_id.encode(), json.dumps(rubric).encode())]
    run_ids = [workload.stable_id("run", p.prefix, i) for i in range(n)]
    for run_id in run_ids:
        run = workload.evaluation_run(run_id, rubric_id=rubric_id)
        records.append((p.names.runs, run_id.encode(), json.dumps(run).encode()))
        for model, base in zip(workload.JUDGE_MODELS, (15, 55, 95), strict=True):
            out = workload.judge_output(rng, run_id, model, rubric_id=rubric_id, base_score=base)
            records.append((p.names.judge_outputs, run_id.encode(), json.dumps(out).encode()))
    p.send(records)
    return run_ids


def open_runs(p: Pipeline) -> int:
    return p.count("SELECT count(*) FROM run_review_items WHERE open")


def test_a_run_is_scored_blind_then_reviewed_once_with_its_refusals(pipeline: Pipeline) -> None:
    """Two runs routed to people: one reviewed at the desk (blind scores, the reveal, a note for a changed
    score, a double submit); the other reviewed meanwhile by another tool, so the desk's submit is refused."""
    p = pipeline
    with p.worker(), p.projector():
        run_ids = runs_to_people(p, 2, seed=21)
        p.wait_projected(None, 180, "2 run review items", also=lambda: open_runs(p) == 2)

        async def run() -> tuple[dict[str, Any], str, int]:
            async with desk(p) as (base, _), aiohttp.ClientSession() as http:
                _, mine = await call(http, base, "ana", "/api/review/next")
                _, theirs = await call(http, base, "ben", "/api/review/next")
                item, lease = mine["item"], mine["lease_id"]
                assert item["kind"] == theirs["item"]["kind"] == "run"
                assert {item["evaluation_run_id"], theirs["item"]["evaluation_run_id"]} == set(run_ids)
                assert item["contradicted_lanes"] == item["lanes"] and len(item["judges"]) == 3
                assert "score" not in json.dumps(item)  # blind: no judge's score reaches the page first
                lanes = {key: 60 for key in item["lanes"]}
                refusals = [
                    (f"/api/review/{lease}/submit", {"lane_scores": lanes, "overall": 60}, 409, "BLIND_FIRST"),
                    (f"/api/review/{lease}/blind", {"lane_scores": {"x": 1}, "overall": 60}, 422, "INVALID_VERDICT"),
                    (f"/api/review/{lease}/blind", {"lane_scores": lanes, "overall": 101}, 422, "INVALID_VERDICT"),
                ]
                for path, body, status, code in refusals:
                    answer = await call(http, base, "ana", path, body)
                    assert (answer[0], answer[1]["code"]) == (status, code), (path, answer)
                status, shown = await call(
                    http, base, "ana", f"/api/review/{lease}/blind", {"lane_scores": lanes, "overall": 60}
                )
                assert status == 200 and len(shown["judges"]) == 3
                reconciled = shown["reconciled"]["overall"]
                changed = {"lane_scores": lanes, "overall": reconciled + 7 if reconciled <= 93 else reconciled - 7}
                answer = await call(http, base, "ana", f"/api/review/{lease}/submit", changed)
                assert (answer[0], answer[1]["code"]) == (422, "NOTE_REQUIRED")
                noted = {**changed, "note": "the tests the judges cite do not run"}
                status, sent = await call(http, base, "ana", f"/api/review/{lease}/submit", noted)
                assert status == 200
                assert await call(http, base, "ana", f"/api/review/{lease}/submit", noted) == (200, sent)
                # Another tool records a review of ben's run while he holds it: his submit is refused.
                other = theirs["item"]["evaluation_run_id"]
                review = {"schema_version": "1.0", "review_id": workload.stable_id("ops", other),
                          "evaluation_run_id": other, "reviewer": "ops", "final_overall_score": 50,
                          "lane_scores": {key: 50 for key in theirs["item"]["lanes"]},
                          "created_at": "2026-12-06T09:00:00Z"}  # fmt: skip
                async with JudgeflowProducer(p.bootstrap, topic_prefix=p.prefix) as producer:
                    await producer.send_review(review)
                await until(lambda: open_runs(p) == 0, "the other tool's run review projected")
                blind = {"lane_scores": {key: 50 for key in theirs["item"]["lanes"]}, "overall": 50}
                await call(http, base, "ben", f"/api/review/{theirs['lease_id']}/blind", blind)
                answer = await call(http, base, "ben", f"/api/review/{theirs['lease_id']}/submit", blind)
                assert (answer[0], answer[1]["code"]) == (409, "ALREADY_REVIEWED")
                return noted, item["evaluation_run_id"], reconciled

        noted, reviewed, reconciled = asyncio.run(run())
        done = lambda: p.count("SELECT count(*) FROM run_reviews") == 2  # noqa: E731
        p.wait_projected(None, 60, "both run reviews projected", also=done)
        with p.connect() as conn:
            row = conn.execute(
                "SELECT reviewer, reviewed_overall, delta, reviewed_lane_scores, notes FROM evaluation_reviewed_scores "
                "WHERE evaluation_run_id = %s",
                (reviewed,),
            ).fetchone()
            blind = conn.execute(
                "SELECT blind_overall_score, source FROM run_reviews WHERE reviewer = 'ana'"
            ).fetchone()
        assert row == ("ana", noted["overall"], noted["overall"] - reconciled, noted["lane_scores"], noted["note"])
        assert blind == (60, "routed")
