"""`OutgoingProducer`'s failure paths, with a stand-in for librdkafka's producer (its normal path runs against
the real broker in tests/integration/test_outgoing_producer.py): a refused record fails that flush and every
later one; a flush waits for the records before it and not for those after; reports are served every 200
records and every second; delivery reports that stop, or a fatal error, fail the flush instead of leaving it
waiting."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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
    """Acknowledges records at a `poll` once they are released (all of them, unless `hold` is set), refusing
    those for the topic "refused"; `poll` raises when `broken` is set."""

    def __init__(self, *, hold: bool = False) -> None:
        self.pending: list[tuple[str, Any]] = []
        self.released = 0 if hold else None
        self.polls = 0
        self.broken = False

    def produce(self, topic: str, value: Any, key: Any, headers: Any = None, on_delivery: Any = None) -> None:
        self.pending.append((topic, on_delivery))

    def release(self, count: int) -> None:
        assert self.released is not None
        self.released += count

    def poll(self, timeout: float) -> int:
        assert timeout == 0  # served on the event loop: never blocks it
        self.polls += 1
        if self.broken:
            raise RuntimeError("poll broke")
        ready = len(self.pending) if self.released is None else min(self.released, len(self.pending))
        batch, self.pending = self.pending[:ready], self.pending[ready:]
        if self.released is not None:
            self.released -= ready
        for topic, report in batch:
            report("Broker: Message size too large" if topic == "refused" else None, _Msg(topic))
        return len(batch)

    def flush(self, timeout: float) -> int:
        return 0


async def _until(condition: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.001)


def _flush_after_one_record(fake: FakeProducer, between: Callable[[OutgoingProducer, FakeProducer], None]) -> None:
    """Send one record, call `between`, then flush (what a commit does)."""

    async def scenario() -> None:
        producer = OutgoingProducer({}, linger_ms=0, producer=fake)
        await producer.send("routing.done", b"v", b"k", None)
        between(producer, fake)
        try:
            await asyncio.wait_for(producer.flush(), 10)
        finally:
            producer.close()

    asyncio.run(scenario())


def test_a_flush_waits_for_the_records_before_it_and_not_for_those_after() -> None:
    async def scenario() -> None:
        fake = FakeProducer(hold=True)
        producer = OutgoingProducer({}, linger_ms=0, producer=fake)
        for _ in range(3):
            await producer.send("routing.done", b"v", b"k", None)
        flushing = asyncio.ensure_future(producer.flush())
        polls = fake.polls
        await _until(lambda: fake.polls >= polls + 3)  # the flush has looked three times: nothing acknowledged
        assert not flushing.done()
        for _ in range(2):  # produced while it waits: the next commit's
            await producer.send("routing.done", b"v", b"k", None)
        fake.release(2)
        await _until(lambda: len(fake.pending) == 3)
        assert not flushing.done()
        fake.release(1)  # the third record before the flush; the two after it stay unacknowledged
        await asyncio.wait_for(flushing, 10)
        assert len(fake.pending) == 2
        producer.close()

    asyncio.run(scenario())


def test_reports_are_served_every_200_records_and_every_second_without_a_flush() -> None:
    async def scenario() -> None:
        fake = FakeProducer()
        producer = OutgoingProducer({}, linger_ms=0, producer=fake)
        assert producer.offer("routing.done", b"v", b"k", None)  # the first record serves and starts the timer
        assert fake.polls == 1
        for _ in range(198):
            producer.offer("routing.done", b"v", b"k", None)
        assert fake.polls == 1 and len(fake.pending) == 199
        producer.offer("routing.done", b"v", b"k", None)  # the 200th since the count began
        assert fake.polls == 2 and not fake.pending
        producer.offer("routing.done", b"v", b"k", None)
        await _until(lambda: not fake.pending, timeout=5.0)  # an idle worker's reports: the one-second timer
        assert fake.polls == 3
        producer.close()

    asyncio.run(scenario())


def test_a_fatal_producer_error_fails_the_flush() -> None:
    class FatalError:
        def fatal(self) -> bool:
            return True

        def __str__(self) -> str:
            return "Broker: Producer fenced"

    with pytest.raises(DeliveryFailed, match="Producer fenced"):
        # what librdkafka's error callback is handed
        _flush_after_one_record(FakeProducer(), lambda producer, fake: producer._on_error(FatalError()))


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
    def break_it(producer: OutgoingProducer, fake: FakeProducer) -> None:
        fake.broken = True

    with pytest.raises(DeliveryFailed, match="delivery reports stopped"):
        _flush_after_one_record(FakeProducer(), break_it)
