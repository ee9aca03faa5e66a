"""`UnhandledGuard`: Faust's own consumer bookkeeping (no broker) with records the stream skipped during a
rebalance. Without the guard Faust commits past them; with it, no commit passes the first one until it is
handled."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import faust
import pytest
from faust.types import TP
from faust.types.tuples import ConsumerMessage

from streams.durable_commit import DurableApp

TOPIC = "judge.outputs"
TP0 = TP(TOPIC, 0)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.close()


def _consumer(app: faust.App, committed: int) -> Any:
    topics: Any = app.topics
    topics._acking_topics.add(TOPIC)  # as an agent reading the topic would
    consumer: Any = app.consumer
    consumer._committed_offset[TP0] = committed
    return consumer


def _deliver(consumer: Any, offset: int, *, handled: bool, partition: int = 0) -> bool:
    """A record as the stream leaves it: `tracked` once an agent got it (Faust sets it past its skip test)."""
    message = ConsumerMessage(TOPIC, partition, offset, 0.0, 0, [], b"run", b"{}", None)
    message.tracked = handled
    return bool(message.ack(consumer))


def _commit(consumer: Any) -> int | None:
    """What a commit would store (and, as Faust's commit does, remember as committed)."""
    offset = consumer._new_offset(TP0)
    if offset is not None:
        consumer._committed_offset[TP0] = offset
    return offset


def _durable(committed: int) -> Any:
    app = DurableApp("guard-test", broker="kafka://127.0.0.1:1")
    app.stream_topics = frozenset({TOPIC})
    return _consumer(app, committed)


def test_plain_faust_commits_past_a_record_it_skipped(loop: asyncio.AbstractEventLoop) -> None:
    """The defect the guard exists for (if an upgrade fixes it, this test says so)."""
    consumer = _consumer(faust.App("plain", broker="kafka://127.0.0.1:1"), committed=10)
    for offset in range(10, 20):
        _deliver(consumer, offset, handled=offset not in (13, 14))
    assert _commit(consumer) == 20  # 13 and 14 were never handled


def test_no_commit_passes_a_skipped_record_until_it_is_handled(loop: asyncio.AbstractEventLoop) -> None:
    consumer = _durable(committed=10)
    acked = [_deliver(consumer, offset, handled=offset not in (13, 14)) for offset in range(10, 20)]
    assert acked == [True, True, True, False, False, True, True, True, True, True]
    assert _commit(consumer) == 13  # what was handled before it
    assert _commit(consumer) is None  # 15..19 handled, 13 not: nothing to commit
    # The seek after the rejoin reads 13 and 14 again; handled now, the commit moves on.
    assert _deliver(consumer, 13, handled=True) and _deliver(consumer, 14, handled=True)
    assert _commit(consumer) == 20


def test_the_lowest_skipped_offset_holds_whatever_the_order(loop: asyncio.AbstractEventLoop) -> None:
    consumer = _durable(committed=0)
    _deliver(consumer, 7, handled=False)
    _deliver(consumer, 4, handled=False)
    for offset in (0, 1, 2, 3, 5, 6, 8):
        _deliver(consumer, offset, handled=True)
    assert _commit(consumer) == 4
    assert _commit(consumer) is None
    _deliver(consumer, 4, handled=True)
    assert _commit(consumer) == 7  # 5, 6 were handled; 7 never was: the commit stops there


def test_a_skipped_record_another_worker_committed_no_longer_holds(loop: asyncio.AbstractEventLoop) -> None:
    """The partition moved to a worker that handled it and committed: the guard lets go."""
    consumer = _durable(committed=10)
    _deliver(consumer, 12, handled=False)
    consumer._committed_offset[TP0] = 30
    for offset in range(30, 33):
        _deliver(consumer, offset, handled=True)
    assert _commit(consumer) == 33


def test_other_topics_and_partitions_are_not_held(loop: asyncio.AbstractEventLoop) -> None:
    consumer = _durable(committed=0)
    _deliver(consumer, 0, handled=False, partition=1)
    for offset in range(3):
        _deliver(consumer, offset, handled=True)
    assert _commit(consumer) == 3
