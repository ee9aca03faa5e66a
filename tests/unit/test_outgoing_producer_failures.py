"""`OutgoingProducer`'s failure paths, with a stand-in for librdkafka's producer (its normal path runs against
the real broker in tests/integration/test_outgoing_producer.py): a refused record fails that flush and every
later one, and delivery reports that stop fail the flush instead of leaving it waiting."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from streams.rdkafka_producer import DeliveryFailed, OutgoingProducer


class _Msg:
    def __init__(self, topic: str) -> None:
        self._topic = topic

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return 0


class FakeProducer:
    """Acknowledges each record at the next `poll`, refusing those for the topic "refused"; `poll` raises when
    `broken` is set."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: list[tuple[str, Any]] = []
        self.added = threading.Event()
        self.broken = False

    def produce(self, topic: str, value: Any, key: Any, headers: Any = None, on_delivery: Any = None) -> None:
        with self.lock:
            self.pending.append((topic, on_delivery))
        self.added.set()

    def poll(self, timeout: float) -> int:
        if self.broken:
            raise RuntimeError("poll broke")
        self.added.wait(timeout)  # as librdkafka's poll: block until there is something, or the timeout
        with self.lock:
            batch, self.pending = self.pending, []
            self.added.clear()
        for topic, report in batch:
            report("Broker: Message size too large" if topic == "refused" else None, _Msg(topic))
        return len(batch)

    def flush(self, timeout: float) -> int:
        return 0


def test_a_refused_record_fails_its_flush_and_every_later_one() -> None:
    async def scenario() -> list[str]:
        producer = OutgoingProducer({}, linger_ms=0, producer=FakeProducer())
        outcomes = []
        for topic in ("routing.done", "refused", "routing.done", "routing.done"):
            await producer.send(topic, b"v", b"k", None)
            try:
                await asyncio.wait_for(producer.flush(), 10)
                outcomes.append("ok")
            except DeliveryFailed as exc:
                outcomes.append(str(exc))
        producer.close()
        return outcomes

    outcomes = asyncio.run(scenario())
    assert outcomes[0] == "ok"
    assert outcomes[1] == "1 records not delivered, first refused[0]: Broker: Message size too large"
    assert outcomes[2:] == [outcomes[1], outcomes[1]]  # kept: the commit on the way out must not pass it


def test_delivery_reports_that_stop_fail_the_flush_instead_of_waiting_for_ever() -> None:
    async def scenario() -> None:
        fake = FakeProducer()
        producer = OutgoingProducer({}, linger_ms=0, producer=fake)
        fake.broken = True
        await producer.send("routing.done", b"v", b"k", None)
        try:
            await asyncio.wait_for(producer.flush(), 10)
        finally:
            producer.close()

    with pytest.raises(DeliveryFailed, match="delivery reports stopped"):
        asyncio.run(scenario())
