"""The desk's public JSON API and its page (DESIGN decision 14), on aiohttp.

`POST /api/review/next`, `/api/review/{lease}/blind`, `/submit`, `/renew`, `/skip`; `GET /api/review/stats`;
`GET /` (the page); `GET /metrics` (queue depth and the oldest item's age, for the alert rules). A submit is
a `HumanReview` 1.1 published to `reviews` with acks=all, and the answer comes only after the broker's ack;
the desk never writes a read model.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge, generate_latest

from judgeflow.desk.leases import DeskError, LeaseStore
from judgeflow.desk.page import PAGE
from judgeflow.desk.reviewer import USER_HEADER, ReviewerIdentity
from judgeflow.web_auth import SignIn

log = logging.getLogger("judgeflow.desk")
Publish = Callable[[dict[str, Any]], Awaitable[None]]
"""Publish one review and return once the broker acknowledged it; raise DeskError BROKER_UNAVAILABLE if not."""


class ReviewPublisher:
    """The desk's producer (acks=all, idempotent), started at the first submit, so that a desk started while the
    broker is down still serves the queue, and says BROKER_UNAVAILABLE only when a review cannot be sent."""

    def __init__(self, bootstrap: str, topic_prefix: str, client: dict[str, Any], timeout_s: float = 15.0) -> None:
        self.bootstrap = bootstrap
        self.topic_prefix = topic_prefix
        self.client = client
        self.timeout_s = timeout_s
        self._producer: Any = None
        self._lock = asyncio.Lock()

    async def __call__(self, review: dict[str, Any]) -> None:
        from judgeflow.producer import JudgeflowProducer

        try:
            async with self._lock:
                if self._producer is None:
                    producer = JudgeflowProducer(
                        self.bootstrap,
                        topic_prefix=self.topic_prefix,
                        request_timeout_ms=int(self.timeout_s * 1000),
                        **self.client,
                    )
                    await asyncio.wait_for(producer.__aenter__(), self.timeout_s)
                    self._producer = producer
            await asyncio.wait_for(self._producer.send_review(review), self.timeout_s)
        except Exception as exc:  # any failure to get the broker's ack: the page keeps the choice, a retry is one
            log.warning("review %s not acknowledged by the broker: %s", review["review_id"], exc)
            raise DeskError(
                "BROKER_UNAVAILABLE", "the review was not acknowledged by the broker; your choice is kept: retry"
            ) from None

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.__aexit__(None, None, None)


class DeskMetrics:
    """Queue depth and the oldest open item's age, read from Postgres at each scrape."""

    def __init__(self, store: LeaseStore) -> None:
        self.store = store
        self.registry = CollectorRegistry()
        self.depth = Gauge("judgeflow_review_queue_depth", "Open review items", registry=self.registry)
        self.oldest = Gauge(
            "judgeflow_review_oldest_item_age_seconds", "Age of the oldest open review item", registry=self.registry
        )
        self.held = Gauge("judgeflow_review_leases_held", "Review items held by a reviewer", registry=self.registry)

    async def render(self) -> bytes:
        stats = await self.store.stats("")
        self.depth.set(stats["depth"])
        self.oldest.set(stats["oldest_age_seconds"] or 0.0)
        self.held.set(stats["held"])
        return generate_latest(self.registry)


def make_desk_app(
    store: LeaseStore, publish: Publish, who: ReviewerIdentity, sign_in: SignIn | None = None
) -> web.Application:
    """The desk: the page, the JSON API and /metrics over one `LeaseStore` (behind `sign_in`, when given)."""
    metrics = DeskMetrics(store)

    def reviewer(request: web.Request) -> str:
        return who.of(request.remote, request.headers.get(USER_HEADER), request.get("user"))

    async def body(request: web.Request) -> dict[str, Any]:
        if not request.can_read_body:
            return {}
        try:
            doc = await request.json(loads=json.loads)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise DeskError("INVALID_REQUEST", "the body must be a JSON object") from None
        if not isinstance(doc, dict):
            raise DeskError("INVALID_REQUEST", "the body must be a JSON object")
        return doc

    async def next_item(request: web.Request) -> web.Response:
        leased = await store.next(reviewer(request))
        return web.Response(status=204) if leased is None else web.json_response(leased)

    async def blind(request: web.Request) -> web.Response:
        me, doc = reviewer(request), await body(request)
        return web.json_response(await store.blind(request.match_info["lease"], me, doc))

    async def submit(request: web.Request) -> web.Response:
        me, doc = reviewer(request), await body(request)
        lease = request.match_info["lease"]
        prepared = await store.prepare_submit(lease, me, doc)
        review_id = prepared.review["review_id"]
        if not prepared.already_published:
            await publish(prepared.review)
            await store.submitted(lease, review_id)
        return web.json_response({"review_id": review_id})

    async def renew(request: web.Request) -> web.Response:
        return web.json_response({"expires_at": await store.renew(request.match_info["lease"], reviewer(request))})

    async def skip(request: web.Request) -> web.Response:
        await store.skip(request.match_info["lease"], reviewer(request))
        return web.json_response({})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(await store.stats(reviewer(request)))

    async def page(request: web.Request) -> web.Response:
        reviewer(request)
        return web.Response(text=PAGE, content_type="text/html")

    async def session(request: web.Request) -> web.Response:
        """Who the desk takes the requests of this browser for (with sign-in, `web_auth` answers instead)."""
        return web.json_response({"user": reviewer(request), "csrf": None})

    async def scrape(_: web.Request) -> web.Response:
        return web.Response(body=await metrics.render(), content_type="text/plain")

    @web.middleware
    async def refusals(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
            return response
        except DeskError as err:
            return web.json_response({"code": err.code, "message": err.message}, status=err.status)

    app = web.Application(middlewares=[sign_in.middleware(), refusals] if sign_in else [refusals])
    app.router.add_get("/api/session", session)
    app.router.add_get("/", page)
    app.router.add_post("/api/review/next", next_item)
    app.router.add_post("/api/review/{lease}/blind", blind)
    app.router.add_post("/api/review/{lease}/submit", submit)
    app.router.add_post("/api/review/{lease}/renew", renew)
    app.router.add_post("/api/review/{lease}/skip", skip)
    app.router.add_get("/api/review/stats", stats)
    app.router.add_get("/metrics", scrape)
    return app
