"""What every measurement shares: topics, bulk sends, waiting on end offsets,
subprocesses and their memory.

Nothing here sleeps to synchronise: waits poll a condition (end offsets,
row counts) against a deadline.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from streams.topics import TopicNames, ensure_topics

Record = tuple[str, bytes | None, bytes]
REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 4


def new_prefix(label: str) -> str:
    return f"bench{label}{uuid.uuid4().hex[:6]}."


async def create(bootstrap: str, names: TopicNames, partitions: int = PARTITIONS) -> None:
    await ensure_topics(bootstrap, names, partitions=partitions, replication=1)


def producer(bootstrap: str, **kwargs: Any) -> AIOKafkaProducer:
    """The bulk producer every measurement sends with: acks=all, idempotent,
    batches up to 1 MiB after 5 ms."""
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        linger_ms=5,
        max_batch_size=1 << 20,
        max_request_size=8_000_000,
        **kwargs,
    )


async def send_all(bootstrap: str, records: Iterable[Record], *, rate: float | None = None) -> list[float]:
    """Send `records` (as fast as the client allows, or paced at `rate`/s);
    return each record's send time (time.time(), the clock of its Kafka timestamp)."""
    prod = producer(bootstrap)
    await prod.start()
    sent: list[float] = []
    try:
        start = time.monotonic()
        for i, (topic, key, value) in enumerate(records):
            if rate:
                due = start + i / rate
                ahead = due - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)  # pacing, not synchronisation
            now = time.time()
            await prod.send(topic, key=key, value=value, timestamp_ms=int(now * 1000))
            sent.append(now)
        await prod.flush()
    finally:
        await prod.stop()
    return sent


async def end_offsets(bootstrap: str, topics: Sequence[str], **client: Any) -> dict[tuple[str, int], int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, **client)
    await consumer.start()
    try:
        tps = [TopicPartition(t, p) for t in topics for p in (consumer.partitions_for_topic(t) or range(PARTITIONS))]
        ends = await consumer.end_offsets(tps)
        return {(tp.topic, tp.partition): off for tp, off in ends.items()}
    finally:
        await consumer.stop()


async def wait_for_count(
    bootstrap: str,
    topics: Sequence[str],
    at_least: int,
    *,
    timeout: float,
    alive: Callable[[], bool] = lambda: True,
    poll: float = 0.02,
) -> float:
    """Wait until `topics` together hold `at_least` records; return time.time() then."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        deadline = time.monotonic() + timeout
        while True:
            ends = await consumer.end_offsets(tps)
            if sum(ends.values()) >= at_least:
                return time.time()
            if not alive():
                raise RuntimeError("a process under measurement died")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{sum(ends.values())} of {at_least} records on {list(topics)} after {timeout}s")
            await asyncio.sleep(poll)
    finally:
        await consumer.stop()


def group_members(admin: Any, group: str, topic: str) -> list[int] | None:
    """How many partitions of `topic` each member of `group` holds, while the group is stable; None while it is
    not, or while its coordinator does not answer yet (`admin`: a confluent-kafka `AdminClient`)."""
    from confluent_kafka import ConsumerGroupState, KafkaException

    try:
        described = admin.describe_consumer_groups([group], request_timeout=10)[group].result(11)
    except (KafkaException, TimeoutError):
        return None
    if described.state != ConsumerGroupState.STABLE:
        return None
    return [sum(tp.topic == topic for tp in m.assignment.topic_partitions) for m in described.members]


async def wait_for_group(
    bootstrap: str,
    group: str,
    topic: str,
    members: int,
    *,
    timeout: float,
    alive: Callable[[], bool] = lambda: True,
    poll: float = 0.1,
) -> None:
    """Wait until `group` is stable with `members` members, each holding partitions of `topic`: a pass measured
    while a rebalance is still to come would read again what was not yet committed."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    seen: list[int] | None = None
    while True:
        seen = await asyncio.to_thread(group_members, admin, group, topic)
        if seen is not None and len(seen) == members and all(seen):
            return
        if not alive():
            raise RuntimeError("a process under measurement died")
        if time.monotonic() > deadline:
            raise TimeoutError(f"group {group} not stable with {members} members after {timeout}s: {seen}")
        await asyncio.sleep(poll)


async def read_all(bootstrap: str, topics: Sequence[str], **client: Any) -> list[Any]:
    """Every record now on `topics` (from the beginning up to the current end); `client`: aiokafka's
    security settings, on a secured broker."""
    ends = await end_offsets(bootstrap, topics, **client)
    consumer = AIOKafkaConsumer(
        *topics,
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **client,
    )
    await consumer.start()
    got: list[Any] = []
    try:
        remaining = {tp for tp, end in ends.items() if end > 0}
        while remaining:
            batch = await consumer.getmany(timeout_ms=1000, max_records=5000)
            for tp, records in batch.items():
                got.extend(records)
                if records and records[-1].offset + 1 >= ends[(tp.topic, tp.partition)]:
                    remaining.discard((tp.topic, tp.partition))
    finally:
        await consumer.stop()
    return got


class Process:
    """A judgeflow command (or a bench module) as a real subprocess."""

    def __init__(self, args: Sequence[str], env: dict[str, str], log: Path, *, module: str = "judgeflow.cli"):
        self.args = [sys.executable, "-m", module, *args]
        self.env = {**os.environ, **env}
        self.log_path = log
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                self.args, env=self.env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, signum: int) -> None:
        """Send `signum` (SIGSTOP pauses the process, SIGCONT resumes it) while it runs."""
        if self.alive():
            assert self.popen is not None
            self.popen.send_signal(signum)

    def rss_mb(self) -> float:
        """Resident set size from /proc (Linux), in MiB."""
        assert self.popen is not None
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def cpu_seconds(self) -> float:
        """User + system CPU time the process has used so far (Linux /proc)."""
        assert self.popen is not None
        fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, timeout: float = 30.0) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        self.popen.terminate()
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def app_id(prefix: str) -> str:
    """The Faust application id (and consumer group) of the workers `worker_env` makes for `prefix`."""
    return f"judgeflow-{prefix.rstrip('.')}"


def worker_env(bootstrap: str, prefix: str, workdir: Path, **extra: str) -> dict[str, str]:
    workdir.mkdir(parents=True, exist_ok=True)
    return {
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "JUDGEFLOW_TOPIC_PREFIX": prefix,
        "JUDGEFLOW_APP_ID": app_id(prefix),
        "JUDGEFLOW_DATA_DIR": str(workdir / f"worker-{uuid.uuid4().hex[:6]}"),
        "JUDGEFLOW_PARTITIONS": str(PARTITIONS),
        # The bench keeps no state past a decision (issue: flat memory under load).
        "JUDGEFLOW_STATE_RETENTION": "0",
        **extra,
    }


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]
