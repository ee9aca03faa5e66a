"""Rebuild every read model from the topics into a fresh schema, verify it,
and swap it in atomically. The old read models stay readable until the swap;
raw rows are never edited (the old schema is renamed, then dropped whole)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from projections.migrate import DEFAULT_SCHEMA, check_schema_name, migrate
from projections.projector import PROJECTED_ROLES, Projector
from streams.topics import COMPACTED_ROLES, INPUT_ROLES, TopicNames


@dataclass
class RebuildReport:
    schema: str
    built_as: str
    retired_as: str | None
    records: int
    rows: int
    seconds: float
    raw_events: int
    expected_raw_events: int


async def _offsets(bootstrap: str, topics: list[str], client: dict[str, Any]) -> tuple[dict, dict]:
    """Beginning and end offsets of every partition of `topics`, as of now."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **client)
    await admin.start()
    try:
        described = await admin.describe_topics(topics)
    finally:
        await admin.close()
    tps = [TopicPartition(t["topic"], p["partition"]) for t in described for p in t["partitions"]]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, **client)
    await consumer.start()
    try:
        begin = await consumer.beginning_offsets(tps)
        end = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    return (
        {(tp.topic, tp.partition): o for tp, o in begin.items()},
        {(tp.topic, tp.partition): o for tp, o in end.items()},
    )


def rebuild(
    bootstrap: str,
    database_url: str,
    names: TopicNames,
    *,
    schema: str = DEFAULT_SCHEMA,
    keep_old: bool = False,
    client: dict[str, Any] | None = None,
) -> RebuildReport:
    check_schema_name(schema)
    t0 = time.monotonic()
    stamp = time.strftime("%Y%m%d%H%M%S")
    fresh = f"{schema}_rebuild_{stamp}"
    migrate(database_url, fresh)
    topics = [getattr(names, r) for r in PROJECTED_ROLES]
    begin, end = asyncio.run(_offsets(bootstrap, topics, client or {}))
    projector = Projector(bootstrap, database_url, names, schema=fresh, client=client)
    stats = asyncio.run(projector.run(until_end=end))
    inputs = {getattr(names, r) for r in INPUT_ROLES if r not in COMPACTED_ROLES}
    expected = sum(end[tp] - begin[tp] for tp in end if tp[0] in inputs)
    with psycopg.connect(database_url, autocommit=True) as conn:
        counted = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.raw_events WHERE topic = ANY(%s)").format(sql.Identifier(fresh)),
            [sorted(inputs)],
        ).fetchone()
        raw = int(counted[0]) if counted else 0
        if raw != expected:
            raise RuntimeError(f"rebuild verification failed: {raw} raw events, topics hold {expected}")
        retired = f"{schema}_retired_{stamp}"
        with conn.transaction():
            exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone()
            if exists:
                conn.execute(
                    sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(sql.Identifier(schema), sql.Identifier(retired))
                )
            conn.execute(sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(sql.Identifier(fresh), sql.Identifier(schema)))
        if exists and not keep_old:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(retired)))
    return RebuildReport(
        schema, fresh, retired if exists else None, stats.records, stats.rows, time.monotonic() - t0, raw, expected
    )
