"""The worker consumer's departures from Faust's defaults: a short fetch wait (`streams.fetch_wait`), a short wait
while a full queue holds a partition back (`streams.batched_delivery`), and
channels whose events carry the raw bytes (`streams.raw_records`). Their speed is measured by the bench;
these hold what they do."""

from __future__ import annotations

import asyncio
from typing import Any

import faust
from faust.types.tuples import Message

from streams.durable_commit import DurableApp
from streams.fetch_wait import FETCH_MAX_WAIT_MS
from streams.raw_records import RawRecords


def _app() -> Any:
    return DurableApp("consumer-tuning-test", broker="kafka://127.0.0.1:1", web_enabled=False)


def test_the_worker_consumer_lets_an_empty_fetch_wait_100_ms_not_fausts_1500() -> None:
    async def made() -> int:
        consumer = _app().consumer
        aiokafka_consumer = consumer._thread._create_worker_consumer(consumer.transport)
        return int(aiokafka_consumer._fetch_max_wait_ms)

    assert FETCH_MAX_WAIT_MS == 100
    assert asyncio.run(made()) == 100


def test_raw_records_make_the_event_fausts_raw_schema_makes() -> None:
    async def both(key: bytes | None, value: bytes | None) -> tuple[Any, Any]:
        app = _app()
        ours = RawRecords().compile(app)
        faust_raw = faust.Schema(key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
        reference = faust_raw.compile(app)
        message = Message("judge.checks", 2, 41, 1.7e9, 0, [("judgeflow-source", b"checks:2:41")], key, value, None)
        return await ours(message), await reference(message)

    for key, value in ((b"claim-1", b'{"a":1}'), (None, b"v"), (b"k", None), (b"", b"\xff\x00")):
        event, expected = asyncio.run(both(key, value))
        assert (event.key, event.value, event.headers) == (expected.key, expected.value, expected.headers)
        assert event.message is expected.message or event.message == expected.message


def test_a_fetch_waits_20_ms_not_a_second_while_a_full_stream_queue_holds_a_partition_back() -> None:
    from faust.types import TP

    from streams.batched_delivery import FETCH_TIMEOUT_SECONDS, fetch_timeout

    consumer = _app().consumer
    checks = TP("judge.checks", 3)
    consumer._set_active_tps({checks, TP("judge.runs", 0)})
    assert fetch_timeout(consumer) == FETCH_TIMEOUT_SECONDS == 1.0

    consumer.on_buffer_full(checks)  # what Faust's conductor calls when the topic's queue is under pressure
    assert checks not in consumer._get_active_partitions()
    assert fetch_timeout(consumer) == 0.02

    consumer.on_buffer_drop(checks)
    assert checks in consumer._get_active_partitions()
    assert fetch_timeout(consumer) == 1.0


def test_the_drain_loop_asks_for_the_short_wait_while_a_partition_is_held_back() -> None:
    """The loop that replaces Faust's drain passes `fetch_timeout` to every fetch (a stand-in consumer records
    what each fetch was asked for)."""
    import types

    from streams.batched_delivery import deliver_in_batches

    held_back = {("judge.checks", 3)}
    asked: list[float] = []
    stopped = asyncio.Event()

    class Consumer:
        _buffered_partitions = held_back
        _commit_every = None
        should_stop = False
        consumer_stopped_errors = ()
        _stopped = stopped
        diag = types.SimpleNamespace(set_flag=lambda flag: None, unset_flag=lambda flag: None)
        transport = types.SimpleNamespace(app=types.SimpleNamespace(should_stop=False))

        async def getmany(self, timeout: float) -> Any:
            asked.append(timeout)
            if len(asked) == 1:
                held_back.clear()  # the agents drained the queue: Faust lets the partition in again
            else:
                stopped.set()
            return
            yield

    fetcher = types.SimpleNamespace(_stopped=asyncio.Event())
    asyncio.run(deliver_in_batches(Consumer())(fetcher))
    assert asked == [0.02, 1.0]
