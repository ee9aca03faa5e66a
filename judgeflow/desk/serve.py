"""The desk as a process: its Postgres pool and its producer, opened with the app and closed with it."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web
from psycopg_pool import AsyncConnectionPool

from judgeflow.config import Settings
from judgeflow.desk.api import ReviewPublisher, make_desk_app
from judgeflow.desk.leases import LeaseStore
from judgeflow.desk.reviewer import ReviewerIdentity
from judgeflow.web_auth import SignIn

POOL_SIZE = 8


def desk_pool(database_url: str, schema: str, size: int = POOL_SIZE) -> AsyncConnectionPool:
    """Connections with the read-model schema on their search path; opened by the app's startup."""
    return AsyncConnectionPool(
        database_url,
        min_size=1,
        max_size=size,
        kwargs={"options": f"-c search_path={schema}", "autocommit": True, "connect_timeout": 5},
        open=False,
    )


def desk_app(
    settings: Settings, database_url: str, schema: str, who: ReviewerIdentity, sign_in: SignIn | None = None
) -> web.Application:
    pool = desk_pool(database_url, schema)
    publish = ReviewPublisher(
        settings.kafka_bootstrap_servers, settings.topic_prefix, settings.kafka_security.aiokafka_kwargs()
    )
    app = make_desk_app(LeaseStore(pool, settings.review_lease_seconds), publish, who, sign_in)

    async def lifetime(_: web.Application) -> AsyncIterator[None]:
        await pool.open(wait=False)
        yield
        await publish.close()
        await pool.close()

    app.cleanup_ctx.append(lifetime)
    return app
