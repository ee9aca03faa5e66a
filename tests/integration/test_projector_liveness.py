"""The projector run unattended: it starts before its topics exist, follows
topics created later, says when it is caught up (/readyz), and a stall it
cannot heal ends it with a non-zero exit and an error naming the partitions."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from judgeflow import workload
from projections.migrate import migrate
from projections.projector import PROJECTED_ROLES, Projector
from streams.topics import TopicNames
from tests.conftest import MEASURED
from tests.support import (
    ProjectorProcess,
    Worker,
    create_topics,
    produce,
    projected_topic_ends,
    projection_reached,
    unique_prefix,
    wait_for,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def schema(database_url: str) -> Iterator[str]:
    name = f"live_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(port: int, path: str) -> tuple[int, dict[str, object] | str]:
    """Status and body, or (0, error) while nothing listens yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            code, body = resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        code, body = exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)
    return code, (json.loads(body) if path != "/metrics" else body)


def claims(prefix: str, names: TopicNames, n: int, seed: int) -> list[tuple[str, bytes, bytes]]:
    rng = random.Random(seed)
    return [(names.checks, f"{prefix}c{i}".encode(), json.dumps(workload.claim_check(rng, f"{prefix}c{i}")).encode())
            for i in range(n)]  # fmt: skip


def count(database_url: str, schema: str, query: str) -> int:
    try:
        with psycopg.connect(database_url, autocommit=True, options=f"-c search_path={schema}",
                             connect_timeout=3) as conn:  # fmt: skip
            row = conn.execute(query).fetchone()
            return int(row[0]) if row else 0
    except (psycopg.OperationalError, psycopg.errors.UndefinedTable):
        return -1


def test_projector_started_before_the_topics_and_the_worker_projects_everything(
    kafka_bootstrap: str, database_url: str, schema: str, tmp_path: Path
) -> None:
    prefix = unique_prefix()  # nothing exists under it: no topic, no schema
    names = TopicNames.with_prefix(prefix)
    port = free_port()
    n = 200
    with ProjectorProcess(kafka_bootstrap, prefix, tmp_path / "p", database_url, schema,
                          JUDGEFLOW_METRICS_PORT=str(port)) as projector:  # fmt: skip
        wait_for(lambda: http_get(port, "/healthz")[0] == 200, 60, "projector health endpoint", projector)
        started = time.monotonic()
        deadline = started + 10
        time.sleep(max(0.0, deadline - time.monotonic()))  # the deliberate head start, not a synchronisation
        with Worker(kafka_bootstrap, prefix, tmp_path / "w") as worker:
            t0 = time.monotonic()
            produce(kafka_bootstrap, claims(prefix, names, n, seed=5))
            wait_for(lambda: count(database_url, schema, "SELECT count(*) FROM checks WHERE final_route IS NOT NULL")
                     == n, 120, f"{n} routed claims projected", projector)  # fmt: skip
            assert worker.alive(), worker.log()[-3000:]
            took = time.monotonic() - t0
            MEASURED["projector before topics"] = (f"{n} claims routed and projected {took:.1f}s after publishing "
                                                   "(projector started 10 s before the worker)")  # fmt: skip
        assert count(database_url, schema, "SELECT count(*) FROM raw_events") == n
        assert projector.alive() and "ERROR judgeflow" not in projector.log()  # no stall, no failed consumer


def test_the_projector_creates_missing_topics_as_the_worker_would(
    kafka_bootstrap: str, database_url: str, schema: str, tmp_path: Path
) -> None:
    """Left to the broker, a consumer's metadata request auto-creates missing topics
    with broker defaults (rubrics not compacted, inputs with a 7-day retention)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    with ProjectorProcess(kafka_bootstrap, prefix, tmp_path, database_url, schema, JUDGEFLOW_PARTITIONS="3") as p:
        wait_for(lambda: f"created {len(names.all())} missing topic(s)" in p.log(), 60, "topics created", p)

    async def describe() -> tuple[dict[str, int], dict[str, dict[str, str]]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            topics = await admin.describe_topics([names.rubrics, names.checks, names.done])
            resources = [ConfigResource(ConfigResourceType.TOPIC, t) for t in (names.rubrics, names.checks)]
            configs = await admin.describe_configs(resources)
        finally:
            await admin.close()
        partitions = {t["topic"]: len(t["partitions"]) for t in topics}
        settings = {r[3]: {c[0]: c[1] for c in r[4]} for resp in configs for r in resp.resources}
        return partitions, settings

    partitions, settings = asyncio.run(describe())
    assert partitions == {names.rubrics: 3, names.checks: 3, names.done: 3}
    assert settings[names.rubrics]["cleanup.policy"] == "compact"
    assert settings[names.checks]["retention.ms"] == "-1"


def test_partitions_added_after_the_start_are_followed_within_seconds(
    kafka_bootstrap: str, database_url: str, schema: str
) -> None:
    """aiokafka's default metadata refresh is 5 minutes; the projector's is seconds."""
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions

    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names, partitions=1)
    migrate(database_url, schema)
    n = 30

    async def run() -> float:
        projector = Projector(kafka_bootstrap, database_url, names, schema=schema, group_id=f"g-{prefix}")
        task = asyncio.create_task(projector.run())
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            deadline = time.monotonic() + 60
            while projector.health().assigned != len(projector.topics):  # one partition per topic
                assert time.monotonic() < deadline and not task.done(), "projector never assigned"
                await asyncio.sleep(0.2)
            await admin.create_partitions({names.checks: NewPartitions(total_count=2)})
            t0 = time.monotonic()
            await asyncio.to_thread(produce_to_partition, kafka_bootstrap, names.checks, 1, claims(prefix, names, n, 9))
            query = "SELECT count(*) FROM raw_events"
            while await asyncio.to_thread(count, database_url, schema, query) != n:
                assert time.monotonic() < t0 + 60, "a partition added after the start was not projected in 60 s"
                assert not task.done(), task.exception()
                await asyncio.sleep(0.2)
            return time.monotonic() - t0
        finally:
            await admin.close()
            projector.stop()
            await asyncio.wait_for(task, 30)

    seconds = asyncio.run(run())
    MEASURED["partition added later"] = f"{n} records on a new partition projected {seconds:.1f}s after it was added"


def produce_to_partition(bootstrap: str, topic: str, partition: int, records: list[tuple[str, bytes, bytes]]) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for _, key, value in records:
                await (await producer.send(topic, key=key, value=value, partition=partition))
        finally:
            await producer.stop()

    asyncio.run(run())


def test_readyz_turns_200_once_caught_up_and_metrics_show_the_watchdog(
    kafka_bootstrap: str, database_url: str, schema: str, tmp_path: Path
) -> None:
    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names)
    produce(kafka_bootstrap, claims(prefix, names, 600, seed=7))
    ends = projected_topic_ends(kafka_bootstrap, names)
    port = free_port()
    with ProjectorProcess(kafka_bootstrap, prefix, tmp_path, database_url, schema, JUDGEFLOW_METRICS_PORT=str(port),
                          JUDGEFLOW_READY_LAG="0", JUDGEFLOW_PROJECTOR_BATCH="20") as projector:  # fmt: skip
        t0 = time.monotonic()
        seen: list[tuple[int, object]] = []
        wait_for(lambda: seen.append(http_get(port, "/readyz")) or seen[-1][0] == 200, 90, "/readyz 200", projector)
        # Ready means caught up: every record published before the start is in Postgres by now.
        assert projection_reached(database_url, schema, ends), seen[-5:]
        ready = seen[-1][1]
        assert isinstance(ready, dict) and ready["lag"] == 0
        assert ready["assigned_partitions"] == 4 * len(PROJECTED_ROLES)
        assert http_get(port, "/healthz")[0] == 200
        code, text = http_get(port, "/metrics")
        assert code == 200 and "judgeflow_stalled_partitions 0.0" in str(text)
        assert "judgeflow_projected_rows_total" in str(text) and "judgeflow_last_progress_seconds" in str(text)
        assert http_get(port, "/nope")[0] == 404
        MEASURED["projector ready"] = f"/readyz 200 {time.monotonic() - t0:.1f}s after the start (600 records)"


def test_a_wedged_consumer_is_rebuilt_and_the_projector_carries_on(
    kafka_bootstrap: str, database_url: str, schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A consumer that stops fetching (paused here through aiokafka's own API, as a
    lost fetcher would be) is replaced; the new one rejoins and projects."""
    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names, partitions=1)
    migrate(database_url, schema)
    n = 30

    async def run() -> float:
        projector = Projector(kafka_bootstrap, database_url, names, schema=schema, group_id=f"g-{prefix}",
                              stall_seconds=3, recovery_seconds=30, check_seconds=0.5)  # fmt: skip
        task = asyncio.create_task(projector.run())
        try:
            deadline = time.monotonic() + 60
            while projector.health().assigned != len(projector.topics) or projector._consumer is None:
                assert time.monotonic() < deadline and not task.done(), "projector never assigned"
                await asyncio.sleep(0.2)
            wedged = projector._consumer
            wedged.pause(*wedged.assignment())
            await asyncio.to_thread(produce, kafka_bootstrap, claims(prefix, names, n, seed=10))
            t0 = time.monotonic()
            query = "SELECT count(*) FROM raw_events"
            while await asyncio.to_thread(count, database_url, schema, query) != n:
                assert time.monotonic() < t0 + 60, "the wedged consumer was not replaced within 60 s"
                assert not task.done(), task.exception()
                await asyncio.sleep(0.2)
            assert projector.stats.rebuilds == 1 and projector._consumer is not wedged
            return time.monotonic() - t0
        finally:
            projector.stop()
            await asyncio.wait_for(task, 30)

    with caplog.at_level("ERROR", logger="judgeflow.projector"):
        seconds = asyncio.run(run())
    assert f"no progress for 3s on {names.checks}[0]; rebuilding its consumer" in caplog.text
    MEASURED["projector wedged consumer"] = f"stall setting 3 s: records projected {seconds:.1f}s after they arrived"


def test_a_stall_it_cannot_heal_ends_the_projector_with_an_error_and_a_restart_catches_up(
    kafka_bootstrap: str, database_url: str, schema: str, tmp_path: Path
) -> None:
    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names, partitions=1)
    migrate(database_url, schema)
    records = claims(prefix, names, 40, seed=8)
    port = free_port()
    env = {"JUDGEFLOW_STALL_SECONDS": "4", "JUDGEFLOW_STALL_RECOVERY_SECONDS": "4", "JUDGEFLOW_METRICS_PORT": str(port)}
    blocker = psycopg.connect(database_url, options=f"-c search_path={schema}")
    try:
        # Every batch's transaction waits on this lock: the projector reads, but never commits.
        blocker.execute("LOCK TABLE projection_offsets IN ACCESS EXCLUSIVE MODE")
        stuck = ProjectorProcess(kafka_bootstrap, prefix, tmp_path / "a", database_url, schema, **env).start()
        produce(kafka_bootstrap, records)
        t0 = time.monotonic()
        wait_for(lambda: http_get(port, "/healthz")[0] == 503, 60, "/healthz 503 while stalled", stuck)
        detected = time.monotonic() - t0
        code, body = http_get(port, "/healthz")
        assert code == 503 and isinstance(body, dict) and body["stalled_partitions"] == [f"{names.checks}[0]"]
        wait_for(lambda: not stuck.alive(), 60, "the stalled projector to exit")
        exited = time.monotonic() - t0
        assert stuck.process is not None and stuck.process.returncode == 3, stuck.log()[-3000:]
        log = stuck.log()
        assert f"ERROR judgeflow.projector: projector stalled: no progress for 4s on {names.checks}[0]" in log, log
    finally:
        blocker.close()  # the lock goes with the connection
    # The supervisor's part: start it again; it resumes from the stored offsets.
    with ProjectorProcess(kafka_bootstrap, prefix, tmp_path / "b", database_url, schema, **env) as again:
        t1 = time.monotonic()
        ends = projected_topic_ends(kafka_bootstrap, names)
        wait_for(lambda: projection_reached(database_url, schema, ends), 60, "restarted projector caught up", again)
        restarted = time.monotonic() - t1
    assert count(database_url, schema, "SELECT count(*) FROM raw_events") == len(records)
    MEASURED["projector stall"] = (f"stall setting 4 s + recovery 4 s: /healthz 503 after {detected:.1f}s, "
                                   f"exit 3 after {exited:.1f}s, restart caught up in {restarted:.1f}s")  # fmt: skip
