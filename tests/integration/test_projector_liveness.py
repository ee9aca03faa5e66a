"""The projector run unattended: it starts before its topics exist, follows
topics created later, says when it is caught up (/readyz), and a stall it
cannot heal ends it with a non-zero exit and an error naming the partitions."""

from __future__ import annotations

import asyncio
import time

import pytest

from judgeflow.services.ports import free_port
from projections.projector import PROJECTED_ROLES
from tests.conftest import MEASURED
from tests.scaffold import Pipeline, claims
from tests.support import http_get, wait_for

pytestmark = pytest.mark.integration


@pytest.mark.pipeline(partitions=None, migrate=False)  # nothing exists under its prefix: no topic, no schema
def test_projector_started_before_the_topics_and_the_worker_projects_everything(pipeline: Pipeline) -> None:
    prefix, names = pipeline.prefix, pipeline.names
    port = free_port()
    n = 200
    with pipeline.projector(JUDGEFLOW_METRICS_PORT=str(port)) as projector:
        wait_for(lambda: http_get(port, "/healthz")[0] == 200, 60, "projector health endpoint", projector)
        started = time.monotonic()
        deadline = started + 10
        time.sleep(max(0.0, deadline - time.monotonic()))  # the deliberate head start, not a synchronisation
        with pipeline.worker() as worker:
            t0 = time.monotonic()
            pipeline.send(claims(prefix, names, n, seed=5))
            wait_for(lambda: pipeline.count("SELECT count(*) FROM checks WHERE final_route IS NOT NULL") == n, 120,
                     f"{n} routed claims projected", projector)  # fmt: skip
            assert worker.alive(), worker.log()[-3000:]
            took = time.monotonic() - t0
            MEASURED["projector before topics"] = (f"{n} claims routed and projected {took:.1f}s after publishing "
                                                   "(projector started 10 s before the worker)")  # fmt: skip
        assert pipeline.count("SELECT count(*) FROM raw_events") == n
        assert projector.alive() and "ERROR judgeflow" not in projector.log()  # no stall, no failed consumer


@pytest.mark.pipeline(partitions=None, migrate=False)
def test_the_projector_creates_missing_topics_as_the_worker_would(pipeline: Pipeline) -> None:
    """Left to the broker, a consumer's metadata request auto-creates missing topics
    with broker defaults (rubrics not compacted, inputs with a 7-day retention)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    names = pipeline.names
    with pipeline.projector(JUDGEFLOW_PARTITIONS="3") as p:
        wait_for(lambda: f"created {len(names.all())} missing topic(s)" in p.log(), 60, "topics created", p)

    async def describe() -> tuple[dict[str, int], dict[str, dict[str, str]]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=pipeline.bootstrap)
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


@pytest.mark.pipeline(partitions=1)
def test_partitions_added_after_the_start_are_followed_within_seconds(pipeline: Pipeline) -> None:
    """aiokafka's default metadata refresh is 5 minutes; the projector's is seconds."""
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions

    prefix, names = pipeline.prefix, pipeline.names
    n = 30

    async def run() -> float:
        projector = pipeline.in_process_projector()
        task = asyncio.create_task(projector.run())
        admin = AIOKafkaAdminClient(bootstrap_servers=pipeline.bootstrap)
        await admin.start()
        try:
            deadline = time.monotonic() + 60
            while projector.health().assigned != len(projector.topics):  # one partition per topic
                assert time.monotonic() < deadline and not task.done(), "projector never assigned"
                await asyncio.sleep(0.2)
            await admin.create_partitions({names.checks: NewPartitions(total_count=2)})
            t0 = time.monotonic()
            await asyncio.to_thread(produce_to_partition, pipeline.bootstrap, names.checks, 1,
                                    claims(prefix, names, n, 9))  # fmt: skip
            query = "SELECT count(*) FROM raw_events"
            while await asyncio.to_thread(pipeline.count, query) != n:
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


@pytest.mark.pipeline(migrate=False)
def test_readyz_turns_200_once_caught_up_and_metrics_show_the_watchdog(pipeline: Pipeline) -> None:
    pipeline.send(claims(pipeline.prefix, pipeline.names, 600, seed=7))
    ends = pipeline.ends()
    port = free_port()
    with pipeline.projector(JUDGEFLOW_METRICS_PORT=str(port), JUDGEFLOW_READY_LAG="0",
                            JUDGEFLOW_PROJECTOR_BATCH="20") as projector:  # fmt: skip
        t0 = time.monotonic()
        seen: list[tuple[int, object]] = []
        wait_for(lambda: seen.append(http_get(port, "/readyz")) or seen[-1][0] == 200, 90, "/readyz 200", projector)
        # Ready means caught up: every record published before the start is in Postgres by now.
        assert pipeline.reached(ends), seen[-5:]
        ready = seen[-1][1]
        assert isinstance(ready, dict) and ready["lag"] == 0
        assert ready["assigned_partitions"] == 4 * len(PROJECTED_ROLES)
        assert http_get(port, "/healthz")[0] == 200
        code, text = http_get(port, "/metrics")
        assert code == 200 and "judgeflow_stalled_partitions 0.0" in str(text)
        assert "judgeflow_projected_rows_total" in str(text) and "judgeflow_last_progress_seconds" in str(text)
        assert http_get(port, "/nope")[0] == 404
        MEASURED["projector ready"] = f"/readyz 200 {time.monotonic() - t0:.1f}s after the start (600 records)"


@pytest.mark.pipeline(partitions=1)
def test_a_wedged_consumer_is_rebuilt_and_the_projector_carries_on(
    pipeline: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    """A consumer that stops fetching (paused here through aiokafka's own API, as a
    lost fetcher would be) is replaced; the new one rejoins and projects."""
    prefix, names = pipeline.prefix, pipeline.names
    n = 30

    async def run() -> float:
        projector = pipeline.in_process_projector(stall_seconds=3, recovery_seconds=30, check_seconds=0.5)
        task = asyncio.create_task(projector.run())
        try:
            deadline = time.monotonic() + 60
            while projector.health().assigned != len(projector.topics) or projector._consumer is None:
                assert time.monotonic() < deadline and not task.done(), "projector never assigned"
                await asyncio.sleep(0.2)
            wedged = projector._consumer
            wedged.pause(*wedged.assignment())
            await asyncio.to_thread(pipeline.send, claims(prefix, names, n, seed=10))
            t0 = time.monotonic()
            query = "SELECT count(*) FROM raw_events"
            while await asyncio.to_thread(pipeline.count, query) != n:
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


@pytest.mark.pipeline(partitions=1)
def test_a_stall_it_cannot_heal_ends_the_projector_with_an_error_and_a_restart_catches_up(pipeline: Pipeline) -> None:
    names = pipeline.names
    records = claims(pipeline.prefix, names, 40, seed=8)
    port = free_port()
    env = {"JUDGEFLOW_STALL_SECONDS": "4", "JUDGEFLOW_STALL_RECOVERY_SECONDS": "4", "JUDGEFLOW_METRICS_PORT": str(port)}
    blocker = pipeline.connect(autocommit=False)
    try:
        # Every batch's transaction waits on this lock: the projector reads, but never commits.
        blocker.execute("LOCK TABLE projection_offsets IN ACCESS EXCLUSIVE MODE")
        stuck = pipeline.projector("a", **env).start()
        pipeline.send(records)
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
    with pipeline.projector("b", **env) as again:
        t1 = time.monotonic()
        pipeline.wait_projected(again, 60, "restarted projector caught up")
        restarted = time.monotonic() - t1
    assert pipeline.count("SELECT count(*) FROM raw_events") == len(records)
    MEASURED["projector stall"] = (f"stall setting 4 s + recovery 4 s: /healthz 503 after {detected:.1f}s, "
                                   f"exit 3 after {exited:.1f}s, restart caught up in {restarted:.1f}s")  # fmt: skip
