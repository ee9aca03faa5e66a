"""`DurableApp`'s producer flush, which Faust awaits before it commits offsets, waits for the stages' librdkafka
producer first, and a refused record stops it (so the commit does not happen)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streams.durable_commit import DurableApp
from streams.rdkafka_producer import DeliveryFailed


class Outgoing:
    """Stands in for `OutgoingProducer` (its own behaviour is tested against the broker in
    tests/integration/test_outgoing_producer.py): records when it was flushed, or refuses."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.flushed = 0

    async def flush(self) -> None:
        await asyncio.sleep(0)
        if self.refuse:
            raise DeliveryFailed("1 records not delivered, first routing.done[0]: Broker: Message size too large")
        self.flushed += 1


def _producer(outgoing: Any) -> Any:
    app = DurableApp("commit-flush-test", broker="kafka://127.0.0.1:1", web_enabled=False)
    app.outgoing = outgoing
    return app._new_producer()


def test_the_flush_before_a_commit_waits_for_the_outgoing_producer() -> None:
    outgoing = Outgoing()
    asyncio.run(_producer(outgoing).flush())
    assert outgoing.flushed == 1


def test_a_refused_record_stops_the_flush_and_is_logged_with_its_topic(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(DeliveryFailed):
        asyncio.run(_producer(Outgoing(refuse=True)).flush())
    assert "offsets not committed" in caplog.text and "routing.done[0]" in caplog.text


def test_without_an_outgoing_producer_the_flush_is_fausts_alone() -> None:
    asyncio.run(_producer(None).flush())
