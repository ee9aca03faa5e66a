"""The worker's liveness: its committed progress against the broker's end offsets, every few seconds.

`EndOffsets` asks the broker with a client of its own; `WatchdogLoop` feeds a `ProgressWatchdog` and acts on
its verdict (rejoin the group on a stall, exit for the supervisor when that does not help), and defers to the
outage policy (`streams.outage`) while the broker is out of reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from streams import metrics
from streams.outage import BROKER, Reachability
from streams.watchdog import Action, ProgressWatchdog, format_partitions
from streams.wiring import Topology, Wired

log = logging.getLogger("judgeflow.streams")


@dataclass(frozen=True)
class LivenessOptions:
    """What the liveness loop needs of the worker's options (`streams.app.WorkerOptions` builds it)."""

    bootstrap_servers: str
    client_kwargs: dict[str, Any]
    stall_seconds: float
    stall_recovery_seconds: float
    outage: Reachability
    on_stall_exit: Any = None
    """Called with the `WatchdogState` when a stall outlived its recovery (None: only log)."""
    on_outage_exit: Any = None
    """Called with the reason when an outage outlived its window (None: only log)."""


END_OFFSETS_TIMEOUT = 10.0


class EndOffsets:
    """The broker's end offsets, asked with a group-less client of the watchdog's own (a consumer that stopped
    fetching cannot hide its lag). When the broker does not answer, every partition counts as lagging (at
    least one record past its position): a worker that has not reached its broker for the stall and recovery
    deadlines is restarted too, which rebuilds every connection."""

    def __init__(self, options: LivenessOptions) -> None:
        self.options = options
        self.timeout = max(1.0, min(END_OFFSETS_TIMEOUT, options.stall_seconds / 2))
        self.consumer: Any = None
        self.last: dict[tuple[str, int], int] = {}
        self._pending: asyncio.Future[dict[tuple[str, int], int]] | None = None

    async def _client(self) -> Any:
        from aiokafka import AIOKafkaConsumer

        if self.consumer is None:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.options.bootstrap_servers,
                group_id=None,
                enable_auto_commit=False,
                **self.options.client_kwargs,
            )
            try:
                await consumer.start()
            except BaseException:
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(consumer.stop(), self.timeout)
                raise
            self.consumer = consumer
        return self.consumer

    async def of(self, positions: dict[tuple[str, int], int], tps: list[Any]) -> dict[tuple[str, int], int]:
        """End offsets of `tps`, or a lagging stand-in when the broker does not answer within the timeout.

        The request runs as a task of its own that is waited for but never awaited past the timeout: after
        a broker stall aiokafka requests can hang through a cancellation, and the watchdog must not hang
        with them. While one request is still pending no second one is sent."""
        if self._pending is None or self._pending.done():
            self._pending = asyncio.ensure_future(self._fetch(tps))
        done, _ = await asyncio.wait({self._pending}, timeout=self.timeout)
        exc = self._pending.exception() if done else TimeoutError(f"no answer within {self.timeout:g}s")
        if exc is None:
            self.options.outage.succeeded(BROKER)
            self.last.update(self._pending.result())
            return {key: self.last[key] for key in positions if key in self.last}
        # Every partition counts as lagging; the outage (logged quietly there) explains it to the watchdog.
        self.options.outage.failed(BROKER, f"broker {self.options.bootstrap_servers}", exc)
        return {key: max(self.last.get(key, 0), pos + 1) for key, pos in positions.items()}

    async def _fetch(self, tps: list[Any]) -> dict[tuple[str, int], int]:
        client = await self._client()
        ends = await client.end_offsets(tps) if tps else {}
        return {(tp.topic, tp.partition): end for tp, end in ends.items()}

    def partitions(self, topics: frozenset[str]) -> int:
        if self.consumer is None:
            return 0
        return sum(len(self.consumer.partitions_for_topic(t) or ()) for t in topics)


class WatchdogLoop:
    """Committed progress per assigned stream partition against the broker's end offsets, every few seconds, in
    a loop of its own (not a Faust timer: a tick that hangs would stop those). A check that itself has not
    finished after the stall and recovery deadlines ends the process the same way."""

    name = "progress_watchdog"

    def __init__(self, app: Any, watchdog: ProgressWatchdog, options: LivenessOptions) -> None:
        self.app = app
        self.watchdog = watchdog
        self.options = options
        self.ends = EndOffsets(options)

    def attach(self, app: Any, topology: Topology) -> None:
        async def progress_watchdog() -> None:  # Faust names a task after its function
            await self.run()

        app.task(progress_watchdog)
        topology.add(
            Wired(
                "Task",
                self.name,
                (),
                (),
                does="committed progress vs end offsets: ERROR and rejoin on a stall, then exit non-zero",
            )
        )

    async def run(self) -> None:
        options = self.options
        interval = min(5.0, options.stall_seconds / 4)
        check: asyncio.Future[None] | None = None
        started = 0.0
        while True:
            await asyncio.sleep(interval)
            if check is None or check.done():
                if check is not None and check.exception() is not None:
                    log.error("progress watchdog check failed: %r; retrying", check.exception())
                check, started = asyncio.ensure_future(self.check()), time.monotonic()
            await asyncio.wait({check}, timeout=interval)
            hung = time.monotonic() - started
            if not check.done() and hung > options.stall_seconds + options.stall_recovery_seconds:
                log.error("progress watchdog check hung for %.0fs; exiting for the supervisor to restart it", hung)
                if options.on_stall_exit is not None:
                    options.on_stall_exit(self.watchdog.state)

    async def check(self) -> None:
        """One observation, and what it calls for: nothing, a rejoin, an exit; or, during an outage, the
        outage policy's verdict instead."""
        app, watchdog, options = self.app, self.watchdog, self.options
        assigned = [tp for tp in app.assignor.assigned_actives() if tp.topic in app.stream_topics]
        committed = app.consumer._committed_offset
        positions = {(tp.topic, tp.partition): committed.get(tp) or 0 for tp in assigned}
        end_by_tp = await self.ends.of(positions, assigned)
        state = watchdog.observe(positions, end_by_tp, self.ends.partitions(app.stream_topics))
        if options.outage.down():
            self._outage()
            return
        for (topic, partition), end in end_by_tp.items():
            metrics.CONSUMER_LAG.labels(topic, str(partition)).set(max(0, end - positions[(topic, partition)]))
        metrics.STALLED_PARTITIONS.set(state.stalled_count)
        metrics.LAST_PROGRESS_SECONDS.set(state.last_progress_seconds)
        if state.action is Action.RECOVER:
            metrics.WATCHDOG_RECOVERIES.inc()
            log.error("worker stalled: %s (%s); rejoining the group", state.reason, format_partitions(state.stalled))
            thread = app.consumer._thread
            await thread.call_thread(_rejoin, thread._ensure_consumer())
        elif state.action is Action.EXIT:
            log.error(
                "worker still stalled %.0fs after rejoining: %s; exiting for the supervisor to restart it",
                options.stall_recovery_seconds,
                state.reason,
            )
            if options.on_stall_exit is not None:
                options.on_stall_exit(state)

    def _outage(self) -> None:
        self.watchdog.excuse()  # the outage explains the stall; its own policy decides when to give up
        reason = self.options.outage.exit_reason()
        if reason is not None:
            log.error("worker gives up: %s; exiting for the supervisor to restart it", reason)
            if self.options.on_outage_exit is not None:
                self.options.on_outage_exit(reason)


async def _rejoin(consumer: Any) -> None:
    """Ask the group coordinator for a rebalance: the group reassigns partitions and Faust re-seeks them."""
    consumer._coordinator.request_rejoin()
