"""The librdkafka producer the worker's stages publish through (`streams.rdkafka_producer`), on the real broker:
what its flush promises the durable commit, how a refused record stops it, and that keys land on the
partitions aiokafka (and every Java client) puts them on."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from streams.rdkafka_producer import DeliveryFailed, OutgoingProducer

pytestmark = pytest.mark.integration


def _topic(bootstrap: str, partitions: int = 4, **config: str) -> str:
    name = f"outgoing-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config)]).values():
        future.result(timeout=30)
    return name


async def _records(bootstrap: str, topic: str, partitions: int = 4) -> list[tuple[int, bytes | None, bytes | None]]:
    """(partition, key, value) of every record now on `topic`."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got: list[tuple[int, bytes | None, bytes | None]] = []
        remaining = {tp for tp in tps if ends[tp] > 0}
        while remaining:
            for tp, batch in (await consumer.getmany(timeout_ms=1000)).items():
                got += [(tp.partition, r.key, r.value) for r in batch]
                if batch and batch[-1].offset + 1 >= ends[tp]:
                    remaining.discard(tp)
        return got
    finally:
        await consumer.stop()


def test_flush_returns_once_every_record_before_it_is_on_the_broker(kafka_bootstrap: str) -> None:
    topic = _topic(kafka_bootstrap)

    async def scenario() -> tuple[int, int, set[bytes]]:
        producer = OutgoingProducer({"bootstrap.servers": kafka_bootstrap}, linger_ms=20)
        await producer.flush()  # nothing produced yet: returns at once
        for i in range(5000):
            await producer.send(topic, f"v{i}".encode(), f"k{i}".encode(), [("h", b"1")])
        more = asyncio.Event()

        async def keep_producing() -> int:  # the agents go on while a commit waits
            n = 0
            while not more.is_set():
                await producer.send(topic, b"later", f"later{n}".encode(), None)
                n += 1
                if n % 100 == 0:
                    await asyncio.sleep(0)
            return n

        later = asyncio.create_task(keep_producing())
        await producer.flush()
        on_broker = {key for _, key, _ in await _records(kafka_bootstrap, topic) if key is not None}
        more.set()
        produced_later = await later
        await producer.flush()
        total = len(await _records(kafka_bootstrap, topic))
        producer.close()
        return produced_later, total, on_broker

    produced_later, total, on_broker = asyncio.run(scenario())
    assert {f"k{i}".encode() for i in range(5000)} <= on_broker
    assert total == 5000 + produced_later


def test_a_refused_record_fails_the_flush_and_names_its_topic(kafka_bootstrap: str) -> None:
    topic = _topic(kafka_bootstrap, partitions=1, **{"max.message.bytes": "2000"})

    async def scenario() -> str:
        producer = OutgoingProducer({"bootstrap.servers": kafka_bootstrap}, linger_ms=0)
        await producer.send(topic, b"x" * 10_000, b"too-large", None)
        try:
            await producer.flush()
        except DeliveryFailed as exc:
            return str(exc)
        finally:
            producer.close()
        return "no error"

    message = asyncio.run(scenario())
    assert topic in message and "too large" in message.lower()


def test_keys_land_on_the_partitions_aiokafka_puts_them_on(kafka_bootstrap: str) -> None:
    """Faust's tables and the re-keyed topics are co-partitioned by aiokafka's murmur2 partitioner: the
    librdkafka producer must put every key where aiokafka would."""
    ours, theirs = _topic(kafka_bootstrap, partitions=12), _topic(kafka_bootstrap, partitions=12)
    keys = [f"claim-{i}".encode() for i in range(300)] + [uuid.uuid4().hex.encode() for _ in range(300)]

    async def scenario() -> tuple[dict[bytes | None, int], dict[bytes | None, int]]:
        producer = OutgoingProducer({"bootstrap.servers": kafka_bootstrap}, linger_ms=5)
        reference = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await reference.start()
        try:
            for key in keys:
                await producer.send(ours, b"v", key, None)
                await reference.send(theirs, b"v", key=key)
            await producer.flush()
            await reference.flush()
        finally:
            await reference.stop()
            producer.close()
        a = {key: p for p, key, _ in await _records(kafka_bootstrap, ours, 12)}
        b = {key: p for p, key, _ in await _records(kafka_bootstrap, theirs, 12)}
        return a, b

    a, b = asyncio.run(scenario())
    assert len(a) == len(keys) and a == b
