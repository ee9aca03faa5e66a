"""The demo's reviewers: three scripted people working the review desk over HTTP, as people would.

The desk runs in the demo's process on a free loopback port and trusts the `X-Forwarded-User` header from
loopback, so that three reviewers can share it. Each takes the next item, chooses blind (a draw: a script
cannot read the passage), takes the pipeline's verdict instead three times in ten once the judges are shown,
and submits, with a note when the final verdict overturns the pipeline's. They review about half of what the
queue wants, so that a kept demo leaves items for a person to try the desk on. Their review times are a
script's, not a person's.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from judgeflow.desk.api import ReviewPublisher, make_desk_app
from judgeflow.desk.leases import VERDICTS, LeaseStore
from judgeflow.desk.reviewer import USER_HEADER, ReviewerIdentity
from judgeflow.desk.serve import desk_pool
from judgeflow.services.ports import free_port

REVIEWERS = ("reviewer-1", "reviewer-2", "reviewer-3")


@dataclass
class DeskRun:
    reviews: int = 0
    overturns: int = 0
    changed_after_reveal: int = 0
    left: int = 0
    """Reviews the queue still wants when the reviewers stop."""
    run_reviews: int = 0
    """Of `reviews`, the evaluation runs scored (the rest are claims)."""


async def review_at_desk(
    database_url: str, schema: str, bootstrap: str, topic_prefix: str, seed: int, share: float = 0.5
) -> DeskRun:
    """Review about `share` of the reviews the queue wants, through the desk's JSON API."""
    pool = desk_pool(database_url, schema)
    await pool.open(wait=True)
    publish = ReviewPublisher(bootstrap, topic_prefix, {})
    store = LeaseStore(pool)
    runner = web.AppRunner(make_desk_app(store, publish, ReviewerIdentity(trusted_proxies=frozenset({"127.0.0.1"}))))
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    run = DeskRun()
    try:
        wanted = (await store.stats(REVIEWERS[0]))["reviews_wanted"]
        budget = [round(wanted * share)]
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as http:
            await asyncio.gather(*(_reviewer(http, name, random.Random(seed + i), budget, run)
                                   for i, name in enumerate(REVIEWERS)))  # fmt: skip
        run.left = (await store.stats(REVIEWERS[0]))["reviews_wanted"]
    finally:
        await runner.cleanup()
        await publish.close()
        await pool.close()
    return run


async def _reviewer(
    http: aiohttp.ClientSession, name: str, rng: random.Random, budget: list[int], run: DeskRun
) -> None:
    headers = {USER_HEADER: name}

    async def post(path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        async with http.post(path, json=body, headers=headers) as r:
            return r.status, (await r.json() if r.status != 204 else None)

    while budget[0] > 0:
        budget[0] -= 1
        status, got = await post("/api/review/next")
        if status == 204:
            return
        lease = got["lease_id"]
        if got["item"]["kind"] == "run":
            await _score_run(post, name, rng, lease, got["item"], run)
            continue
        blind = rng.choices(VERDICTS, weights=(55, 35, 10))[0]  # a script cannot read the passage: it draws
        status, shown = await post(f"/api/review/{lease}/blind", {"verdict": blind})
        decided = shown["decision"]["verdict"] or "unclear"
        final = decided if blind != decided and rng.random() < 0.3 else blind  # the reveal changed its mind
        note = f"{name}: the passage does not support the verdict {decided}" if final != decided else None
        status, sent = await post(f"/api/review/{lease}/submit", {"final_verdict": final, "note": note})
        if status != 200:
            raise RuntimeError(f"the review desk refused a review: {sent}")
        run.reviews += 1
        run.overturns += final != decided
        run.changed_after_reveal += final != blind


async def _score_run(post: Any, name: str, rng: random.Random, lease: str, item: dict[str, Any], run: DeskRun) -> None:
    """A run: blind scores drawn per lane, then the reconciled scores accepted seven times in ten."""
    blind = {"lane_scores": {lane: rng.randint(30, 90) for lane in item["lanes"]}, "overall": rng.randint(30, 90)}
    status, shown = await post(f"/api/review/{lease}/blind", blind)
    if status != 200:
        raise RuntimeError(f"the review desk refused a run's blind scores: {shown}")
    reconciled = shown["reconciled"]
    accept = rng.random() < 0.7 and reconciled["overall"] is not None
    final = {"lane_scores": reconciled["lane_scores"], "overall": reconciled["overall"]} if accept else blind
    note = None if accept else f"{name}: the judges' scores do not match the transcript"
    status, sent = await post(f"/api/review/{lease}/submit", {**final, "note": note})
    if status != 200:
        raise RuntimeError(f"the review desk refused a run's review: {sent}")
    run.reviews += 1
    run.run_reviews += 1
