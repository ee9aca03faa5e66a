"""The ceilings: the least any Python consumer of the claim checks must do, with two Kafka clients.

Each consumes `<prefix>judge.checks` (or `<prefix>` + `BENCH_SOURCE`: the bench's pipeline ceiling reads
`judge.outputs`) from the start, decodes every record as JSON, re-encodes it and produces it keyed to
`<prefix>routing.done`, without awaiting each send: none of judgeflow's validation, state or routing.
`BENCH_PASSTHROUGH` picks the client:

- `rdkafka_passthrough`: confluent-kafka (librdkafka), 1,000 records per `consume`. The ceiling the bench's
  ratios are taken against: the fastest a Python process here moves these records.
- `aiokafka_passthrough`: aiokafka's `getmany` and `send`, the client Faust is built on.

Run as `python -m bench.passthrough`, configured by environment like the peers; it runs until stopped.
"""

from __future__ import annotations

import asyncio
import json
import os

BATCH = 1000


def rdkafka(bootstrap: str, source: str, target: str) -> None:
    from confluent_kafka import Consumer, Producer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"passthrough-{source}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    consumer.subscribe([source])
    while True:
        for record in consumer.consume(BATCH, timeout=0.5):
            if record.error():
                raise RuntimeError(str(record.error()))
            value = json.dumps(json.loads(record.value())).encode()
            while True:
                try:
                    producer.produce(target, value=value, key=record.key())
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)


async def aiokafka(bootstrap: str, source: str, target: str) -> None:
    from aiokafka import AIOKafkaConsumer

    from bench.harness import producer as bulk_producer

    consumer = AIOKafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=f"passthrough-{source}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 << 20,
        fetch_max_bytes=64 << 20,
    )
    producer = bulk_producer(bootstrap)
    await consumer.start()
    await producer.start()
    pending = []
    while True:
        batch = await consumer.getmany(timeout_ms=500, max_records=BATCH)
        for records in batch.values():
            for record in records:
                value = json.dumps(json.loads(record.value)).encode()
                pending.append(await producer.send(target, key=record.key, value=value))
        if len(pending) > 20_000 or not batch:
            for fut in pending:
                await fut
            pending.clear()


def main() -> None:
    bootstrap, prefix = os.environ["KAFKA_BOOTSTRAP_SERVERS"], os.environ["BENCH_TOPIC_PREFIX"]
    source, target = prefix + os.environ.get("BENCH_SOURCE", "judge.checks"), prefix + "routing.done"
    which = os.environ["BENCH_PASSTHROUGH"]
    if which == "rdkafka_passthrough":
        rdkafka(bootstrap, source, target)
    elif which == "aiokafka_passthrough":
        asyncio.run(aiokafka(bootstrap, source, target))
    else:
        raise SystemExit(f"BENCH_PASSTHROUGH: rdkafka_passthrough or aiokafka_passthrough, not {which!r}")


if __name__ == "__main__":
    main()
