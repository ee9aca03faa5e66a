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

Delivery reports (and librdkafka's errors) are served on the event loop, by `poll(0)`: every `POLL_EVERY`
records produced, once a second on an idle worker, and while a flush or a full queue waits. No thread of
ours takes the GIL to count them (a report thread did, and each batch of reports took the interpreter from
the stages). On a graceful stop Faust flushes its producer, and with it this one (`DurableApp`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger("judgeflow.streams")

POLL_EVERY = 200
"""Records produced between two servings of delivery reports while nobody waits on them."""

SERVE_EVERY_SECONDS = 1.0
"""Reports are served at least this often once something was produced, so an idle worker's errors surface."""

WAIT_STEPS = (0.002, 0.005, 0.01, 0.02)
"""The pauses of a waiting flush between two servings. A record is acknowledged after the producer's linger
(20 ms by default) and a round trip, so a flush notices it within 20 ms of its report; during an outage the
flush looks fifty times a second, which costs next to nothing."""

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
    """The records produced between two flushes, and their delivery reports so far."""

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
        self._used = False
        self._since_poll = 0
        self._timer: asyncio.TimerHandle | None = None

    def _serve_reports(self) -> None:
        """Run the callbacks of the delivery reports (and errors) librdkafka has queued, without waiting."""
        try:
            self._producer.poll(0)
        except Exception as exc:  # reports that can no longer be served would leave every flush waiting
            self._fail(f"delivery reports stopped: {exc!r}")

    def _tick(self) -> None:
        """Serve the reports now and again in `SERVE_EVERY_SECONDS` (started by the first record)."""
        self._serve_reports()
        self._timer = asyncio.get_running_loop().call_later(SERVE_EVERY_SECONDS, self._tick)

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
        if not self._used:
            self._used = True
            self._tick()
        epoch = self._epochs[-1]
        try:
            self._producer.produce(topic, value, key, headers=headers or None, on_delivery=epoch.report)
        except BufferError:
            return False
        epoch.produced += 1
        self._since_poll += 1
        if self._since_poll >= POLL_EVERY:
            self._since_poll = 0
            self._serve_reports()
        return True

    async def send(
        self, topic: str, value: bytes | None, key: bytes | None, headers: Sequence[tuple[str, bytes]] | None
    ) -> None:
        """Hand one record to librdkafka; waits (without blocking the loop) only while its queue is full."""
        await self._until(lambda: self.offer(topic, value, key, headers))

    async def _until(self, ready: Callable[[], bool]) -> None:
        """Wait until `ready()`, serving the delivery reports before each check (`WAIT_STEPS` apart)."""
        steps = 0
        while True:
            self._serve_reports()
            if ready():
                return
            await asyncio.sleep(WAIT_STEPS[min(steps, len(WAIT_STEPS) - 1)])
            steps += 1

    async def flush(self) -> None:
        """Return once every record produced before this call is acknowledged; raise `DeliveryFailed` if
        one was refused, now or before (module docstring)."""
        if not self._used:
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
        """Deliver what can be delivered within `timeout`, serving the reports on this thread."""
        if self._timer is not None:
            self._timer.cancel()
        self._producer.flush(timeout)
