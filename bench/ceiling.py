"""The ceiling: a plain aiokafka loop, the Python limit the pipeline is measured against.

It consumes the same judge-output events the pipeline gets, decodes each as
JSON, re-encodes it and produces it (keyed, to a topic with the same
partitions) without awaiting each send: what any Python consumer must do at
least, with none of judgeflow's validation, state or projection.
"""

from __future__ import annotations

import json
import time

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from bench import harness


async def passthrough(bootstrap: str, source: str, target: str, count: int, *, timeout: float = 300.0) -> float:
    """Move `count` records already on `source` to `target`; return events/s
    from the first fetch to the last acknowledged send."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=8 << 20,
        fetch_max_bytes=64 << 20,
    )
    producer = harness.producer(bootstrap)
    await consumer.start()
    await producer.start()
    try:
        consumer.assign([TopicPartition(source, p) for p in range(harness.PARTITIONS)])
        moved = 0
        started = time.monotonic()
        deadline = started + timeout
        pending = []
        while moved < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"ceiling moved {moved} of {count}")
            batch = await consumer.getmany(timeout_ms=500, max_records=2000)
            for records in batch.values():
                for record in records:
                    doc = json.loads(record.value)
                    pending.append(await producer.send(target, key=record.key, value=json.dumps(doc).encode()))
                    moved += 1
            if len(pending) > 20_000:
                for fut in pending:
                    await fut
                pending.clear()
        for fut in pending:
            await fut
        return count / (time.monotonic() - started)
    finally:
        await producer.stop()
        await consumer.stop()
