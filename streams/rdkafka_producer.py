"""The worker's outgoing records through librdkafka (confluent-kafka), beside Faust's own producer.

aiokafka builds every record batch and every produce request in Python on the event loop the stages run
on; librdkafka does it in its own threads, in C. Faust keeps consuming, keeping tables and writing their
changelogs with aiokafka; everything a stage publishes (decisions, revisions, alerts, re-keyed and
validated records, dead letters) goes through one `OutgoingProducer`: idempotent, acks=all, partitioned by
murmur2 as aiokafka and Java clients do, so a key lands on the partition it always did.

The durable commit's promise holds as it did with aiokafka: `DurableApp` awaits `flush()` before Faust
commits offsets, and `flush()` returns once every record produced before it began is acknowledged by the
broker. Records produced while it waits (the agents keep running) belong to the next commit and do not hold
this one up. A record the broker refused (or a fatal producer error) makes `flush()` raise
`DeliveryFailed` naming its topic: that commit does not happen, so the inputs are read again after the
restart that follows, and their records are produced again with the same ids.

Delivery reports are served by one daemon thread that calls `poll`; it wakes the event loop only when a
flush or a full queue waits on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger("judgeflow.streams")

RECHECK_SECONDS = 1.0
"""A waiting flush rechecks at least this often (the poll thread also wakes it)."""

DEFAULTS: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "partitioner": "murmur2_random",
    "batch.size": 1 << 20,
    "queue.buffering.max.messages": 200_000,
    # Retried for up to 5 minutes (librdkafka's default, the worker's default outage exit too). A record still
    # not taken then fails the next commit's flush: that commit does not happen, and a shutdown during an
    # outage ends instead of waiting for the broker forever. Nothing is lost: the input is read again.
    "message.timeout.ms": 300_000,
}


class DeliveryFailed(RuntimeError):
    """The broker did not take a record: the commit that waited for it must not happen."""


class _Epoch:
    """The records produced between two flushes. `produced` is written by the event loop only, `delivered`
    by the poll thread only (the delivery reports), so neither needs a lock."""

    __slots__ = ("produced", "delivered", "failures")

    def __init__(self) -> None:
        self.produced = 0
        self.delivered = 0
        self.failures: list[str] = []

    def report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failures.append(f"{msg.topic()}[{msg.partition()}]: {err}")
        self.delivered += 1

    def done(self) -> bool:
        return self.delivered >= self.produced


class OutgoingProducer:
    """One librdkafka producer for every record the worker's stages publish."""

    def __init__(self, config: dict[str, Any], *, linger_ms: float, producer: Any = None) -> None:
        """`producer`: a stand-in for confluent-kafka's `Producer` (tests); made from `config` otherwise."""
        if producer is None:
            from confluent_kafka import Producer

            producer = Producer({**DEFAULTS, "linger.ms": linger_ms, "error_cb": self._on_error, **config})
        self.failed: str | None = None
        """Set by the first refused record or fatal error, and kept: every later flush raises too, so the
        commit Faust makes while it stops cannot pass the record that was refused."""
        self._producer = producer
        self._epochs = [_Epoch()]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._progress: asyncio.Event | None = None
        self._waiters = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve_reports, name="librdkafka-reports", daemon=True)

    def _started(self) -> asyncio.Event:
        if self._progress is None:
            self._loop = asyncio.get_running_loop()
            self._progress = asyncio.Event()
            self._thread.start()
        return self._progress

    def _serve_reports(self) -> None:
        try:
            while not self._stop.is_set():
                if self._producer.poll(0.1) and self._waiters and self._loop is not None:
                    self._loop.call_soon_threadsafe(self._wake)
        except Exception as exc:  # the thread must not die unnoticed: every flush would wait for ever
            self._fail(f"delivery reports stopped: {exc!r}")
            if self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        if self._progress is not None:
            self._progress.set()

    def _fail(self, reason: str) -> None:
        if self.failed is None:
            self.failed = reason
            log.error("the librdkafka producer failed: %s; no offset is committed from now on", reason)

    def _on_error(self, err: Any) -> None:
        if err.fatal():
            self._fail(str(err))
        else:
            log.debug("librdkafka: %s", err)

    def offer(
        self, topic: str, value: bytes | None, key: bytes | None, headers: Sequence[tuple[str, bytes]] | None
    ) -> bool:
        """Hand one record to librdkafka, unless its queue is full (False: `send` it instead). A record
        librdkafka refuses itself (larger than its `message.max.bytes`, or after a fatal error) raises
        `KafkaException` here, as aiokafka's `send` raised, and crashes the agent."""
        if self._progress is None:
            self._started()
        epoch = self._epochs[-1]
        try:
            self._producer.produce(topic, value, key, headers=headers or None, on_delivery=epoch.report)
        except BufferError:
            return False
        epoch.produced += 1
        return True

    async def send(
        self, topic: str, value: bytes | None, key: bytes | None, headers: Sequence[tuple[str, bytes]] | None
    ) -> None:
        """Hand one record to librdkafka; waits (without blocking the loop) only while its queue is full."""
        await self._until(lambda: self.offer(topic, value, key, headers))

    async def _until(self, ready: Callable[[], bool]) -> None:
        """Wait until `ready()`, rechecked after every batch of delivery reports (and at least every second).
        The waiter is counted before the check, so a report that lands between the check and the wait still
        wakes it."""
        progress = self._started()
        while True:
            self._waiters += 1
            try:
                progress.clear()
                if ready():
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(progress.wait(), RECHECK_SECONDS)
            finally:
                self._waiters -= 1

    async def flush(self) -> None:
        """Return once every record produced before this call is acknowledged; raise `DeliveryFailed` if
        one was refused, now or before (module docstring)."""
        if self._progress is None:
            return  # nothing was ever produced
        waiting_for = list(self._epochs)
        self._epochs.append(_Epoch())
        await self._until(lambda: self.failed is not None or all(e.done() for e in waiting_for))
        for epoch in waiting_for:
            if epoch.failures:
                self._fail(f"{len(epoch.failures)} records not delivered, first {epoch.failures[0]}")
        self._epochs = [e for e in self._epochs if e not in waiting_for or not e.done()]
        if self.failed is not None:
            raise DeliveryFailed(self.failed)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the report thread, then deliver what can be delivered within `timeout` (on this thread)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._producer.flush(timeout)
