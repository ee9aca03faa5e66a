"""The Faust wiring: each stage becomes one agent, by name; nothing else happens here.

An agent decodes a Kafka record into an `Inbound`, reads the key's state, calls its stage's `handle`,
stores the state the stage returns and publishes its records without awaiting each one (`send_soon`;
`DurableApp` drains the buffer before offsets are committed). Timers call the stages' `sweep` on the keys
that can need it. `describe(app)` prints the topology from the wired app itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

import faust

from schemas import ContractError
from schemas.errors import ErrorDetail
from streams import metrics
from streams.claims import ClaimStage
from streams.drift import DriftAccumulator, DriftOptions, DriftStage
from streams.drift import watch as watch_drift
from streams.durable_commit import DurableApp
from streams.edge import dead_letter
from streams.envelope import H_ERROR_CODES, Outgoing, SourceRef, utc_now
from streams.outage import BROKER, Reachability
from streams.rubric_cache import RubricCache, RubricStage
from streams.runs import RunStage
from streams.stage import Clock, HoldBudget, Inbound, State, Step
from streams.state_codec import STATE_CODEC
from streams.topics import TopicNames
from streams.watchdog import Action, ProgressWatchdog, WatchdogState, format_partitions

log = logging.getLogger("judgeflow.streams")
ROCKSDB_OPTIONS = {"write_buffer_size": 8 << 20, "max_write_buffer_number": 2}
"""Per database; what all of them hold together is bounded by `WorkerOptions.rocksdb_memory_bytes`."""
CONTROL_QUIET_SECONDS = 10.0
"""A control record or stub sent by a sweep is not sent again for this long (the agent needs a moment)."""
TAKE_EVENTS = 256
"""Events an agent handles per hand-over from its stream (`JUDGEFLOW_TAKE_EVENTS`): the one Faust's stream
hands over and up to this many minus one of those already in its queue. With fetches delivered in one step
(`streams.batched_delivery`) the queue holds a whole fetch, and skipping Faust's per-event stream iteration
for the rest cut the claim step's CPU per event by more than half (bench/PROFILE.md)."""
POLL_RECORDS = 2000
"""Records the consumer thread turns into Python objects per poll (`JUDGEFLOW_POLL_RECORDS`; Faust's default is
no limit). Without a limit a poll materialised everything fetched, up to 1 MiB per partition, at once, and the
consumer thread's allocator arena kept that high-water mark: the worker's RSS grew 1.12x between 5,000 and
20,000 claims. At 2,000 it grew 1.05x, and the claim step ran within 2% (bench/PROFILE.md)."""
SLICE_MS = 5.0
"""How long an agent handles events before it hands the event loop back (`JUDGEFLOW_AGENT_SLICE_MS`): the
producer's sender, the other agents and the fetch hand-over run between slices. Without it a take of 256
events held the loop for tens of ms per agent, a produce round trip waited out several such turns, and the
worker's records reached the broker in bursts every 0.3-0.5 s under a backlog (bench/PROFILE.md)."""
SCAN_CHUNK = 2000
"""Keys a sweep reads per tick while it rebuilds its index after the worker's partitions changed."""


@dataclass(frozen=True)
class WorkerOptions:
    """What the worker needs to know; the application builds it from its settings."""

    bootstrap_servers: str
    app_id: str = "judgeflow"
    names: TopicNames = field(default_factory=TopicNames)
    partitions: int = 4
    replication_factor: int = 1
    store: str = "memory://"
    data_dir: str = ".judgeflow/worker-data"
    broker_credentials: Any = None
    client_kwargs: dict[str, Any] = field(default_factory=dict)
    web_enabled: bool = False
    web_host: str = "127.0.0.1"
    web_port: int = 6066
    session_timeout_seconds: float = 60.0
    timer_interval_seconds: float = 1.0
    max_payload_bytes: int = 1_000_000
    state_retention: timedelta = timedelta(days=7)
    stale_after: timedelta = timedelta(minutes=5)
    """Grace past a run's deadline, and for held events, before a stale-work alert."""
    max_held_events: int = 100_000
    producer_linger_ms: float = 20.0
    take_events: int = TAKE_EVENTS
    poll_records: int = POLL_RECORDS
    """0: no limit."""
    agent_slice_ms: float = SLICE_MS
    rocksdb_memory_bytes: int = 32 << 20
    """Block cache and memtables of all the worker's RocksDB databases together (`streams.rocksdb_memory`)."""
    stall_seconds: float = 60.0
    stall_recovery_seconds: float = 60.0
    ready_lag: int = 1000
    on_stall_exit: Callable[[WatchdogState], None] | None = None
    """Called when a stall outlived its recovery; the application ends the process there (a supervisor
    restarts it; safe under at-least-once with deterministic ids). None: only log."""
    outage: Reachability = field(default_factory=Reachability)
    """What the worker cannot reach, and its outage policy (`streams.outage`): health and the outage exit."""
    on_outage_exit: Callable[[str], None] | None = None
    """Called with the reason when an outage outlived `outage.exit_seconds`; the application ends the process
    there. None: only log."""
    clock: Clock = utc_now
    drift: DriftOptions = field(default_factory=DriftOptions)

    @property
    def broker_url(self) -> str:
        return ",".join(f"kafka://{hp}" for hp in self.bootstrap_servers.split(","))


def _stores(options: WorkerOptions) -> tuple[str, Callable[[], dict[str, Any]]]:
    """The app's store URL and each table's store options: Faust's memory store as configured, or RocksDB
    databases that all draw on one memory budget (Faust's own defaults allow 3 x 64 MiB memtables and a
    2 GiB cache per database, and a worker opens one database per table and partition). The app's URL, not
    the table's: Faust tests a table's URL for truth, and `rocksdb-bounded://` has no host or path."""
    if not options.store.startswith("rocksdb"):
        return options.store, dict
    from streams.rocksdb_memory import STORE_SCHEME, MemoryBudget

    budget = MemoryBudget(options.rocksdb_memory_bytes)
    metrics.ROCKSDB_MEMORY.labels("memtables").set_function(budget.memtable_usage)
    metrics.ROCKSDB_MEMORY.labels("cache").set_function(budget.cache_usage)
    return f"{STORE_SCHEME}://", lambda: {"options": {**ROCKSDB_OPTIONS, "budget": budget}}


class Stage(Protocol):
    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    does: str

    def handle(self, record: Inbound, stored: State | None) -> Step: ...


@dataclass
class Wired:
    """One node of the topology as wired: an agent, a timer or a task."""

    kind: str
    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    keeps: str = ""
    does: str = ""


def _count(record: Outgoing) -> None:
    if record.role == "invalid":
        codes = dict(record.headers).get(H_ERROR_CODES, b"").decode().split(",")
        for code in filter(None, codes):
            metrics.INVALID.labels(code).inc()
    elif record.role in ("done", "second_judge", "human_review"):
        subject = "evaluation" if b'"subject":"evaluation"' in record.value else "claim"
        metrics.ROUTES.labels(record.role, subject).inc()
    elif record.role.endswith("_rekeyed"):
        metrics.REKEYED.labels(record.role).inc()
    elif record.role == "judge_alerts":
        alert = json.loads(record.value)
        metrics.JUDGE_ALERTS.labels(alert.get("judge", ""), alert.get("statistic", "")).inc()
        log.warning("judge drift: %s", record.value.decode(errors="replace")[:500])
    elif record.role == "alerts":
        kind = "run_overdue" if b'"kind":"run_overdue"' in record.value else "held_too_long"
        metrics.STALE_ALERTS.labels(kind).inc()
        log.warning("stale work (%s): %s", kind, record.value.decode(errors="replace")[:500])


class SweepIndex:
    """The keys of one table a sweep must look at, kept up to date by its agent.

    After the worker's partitions change it refills itself by reading the table lazily, a chunk per tick,
    instead of decoding every key at once. `watch(doc)` says whether a stored state needs the sweep. It also
    keeps the worker's `HoldBudget` counting the events each stored state holds (its `held` list)."""

    def __init__(self, table: Any, watch: Callable[[State], bool], hold: HoldBudget | None = None,
                 name: str = "") -> None:  # fmt: skip
        self.table = table
        self.watch = watch
        self.hold = hold
        self.name = name
        self.keys: set[str] = set()
        self.sent: dict[str, float] = {}
        self._scan: Iterator[tuple[str, Any]] | None = None
        self._owned: frozenset[int] = frozenset()

    def note(self, key: str, doc: State | None) -> None:
        self._count_held(key, doc)
        if doc is not None and self.watch(doc):
            self.keys.add(key)
        else:
            self.keys.discard(key)
            self.sent.pop(key, None)

    def refill(self, owned: frozenset[int]) -> None:
        if owned != self._owned:
            self._owned, self._scan = owned, iter(self.table.items())
        if self._scan is None:
            return
        try:
            for _ in range(SCAN_CHUNK):
                key, doc = next(self._scan)
                self._count_held(key, doc)
                if doc and self.watch(doc):
                    self.keys.add(key)
        except StopIteration:
            self._scan = None
        except RuntimeError:  # the table changed under the iterator: start again
            self._scan = iter(self.table.items())

    def _count_held(self, key: str, doc: State | None) -> None:
        if self.hold is not None:
            self.hold.note(f"{self.name}/{key}", len(doc.get("held") or ()) if doc else 0)

    def due(self, owned: frozenset[int]) -> list[tuple[str, State]]:
        """The watched keys of owned partitions, each with its state, minus those just sent a record."""
        now = time.monotonic()
        self.sent = {k: t for k, t in self.sent.items() if now - t < CONTROL_QUIET_SECONDS}
        out = []
        for key in list(self.keys):
            doc = self.table.get(key)
            if not doc or not self.watch(doc):
                self.keys.discard(key)
                continue
            if doc.get("partition") in owned and key not in self.sent:
                out.append((key, doc))
        return out

    def mark_sent(self, keys: list[str]) -> None:
        now = time.monotonic()
        for key in keys:
            self.sent[key] = now


def _watch_run(doc: State) -> bool:
    """Every run: open ones need their deadline checked, final ones wait for their retention."""
    return bool(doc)


def _watch_claim(doc: State) -> bool:
    return doc.get("waiting_for") == "rubric" or bool(doc.get("decided_at"))


def build_app(options: WorkerOptions) -> faust.App:
    names = options.names
    store_url, store = _stores(options)
    app = DurableApp(
        options.app_id,
        broker=options.broker_url,
        broker_credentials=options.broker_credentials,
        store=store_url,
        datadir=options.data_dir,
        processing_guarantee="at_least_once",
        topic_partitions=options.partitions,
        topic_replication_factor=options.replication_factor,
        web_enabled=options.web_enabled,
        web_host=options.web_host,
        web_port=options.web_port,
        consumer_auto_offset_reset="earliest",
        # How long the group waits for a silent (crashed) worker before its partitions move to the others.
        broker_session_timeout=options.session_timeout_seconds,
        producer_linger_ms=options.producer_linger_ms,
        # Batches of up to 1 MiB per partition, and room in each stream's buffer for a whole take of events.
        producer_max_batch_size=1 << 20,
        stream_buffer_maxsize=max(4096, 4 * options.take_events),
        broker_max_poll_records=options.poll_records or None,
        topic_disable_leader=True,
        cython_optimizations=True,
    )
    role_of = {name: role for role, name in names.all().items()}
    cache = RubricCache(options.bootstrap_servers, names.rubrics, **options.client_kwargs)
    retention, clock, limit = options.state_retention, options.clock, options.max_payload_bytes
    hold = HoldBudget(options.max_held_events)
    # Drift deltas: observed inline by the run and claim steps, flushed by a timer (no consume per event).
    deltas = DriftAccumulator(options.drift)
    runs = RunStage(cache.get, clock=clock, retention=retention, max_payload_bytes=limit,
                    stale_after=options.stale_after, hold=hold, drift=deltas)  # fmt: skip
    claims = ClaimStage(cache.get, clock=clock, retention=retention, max_payload_bytes=limit,
                        stale_after=options.stale_after, hold=hold, drift=deltas)  # fmt: skip
    rubrics = RubricStage()
    drift = DriftStage(options.drift, clock=clock)
    app.topology = []  # type: ignore[attr-defined]
    app.stream_topics = frozenset(names.all()[r] for stage in (runs, claims, rubrics, drift) for r in stage.reads)

    topic_of = names.all()

    async def publish(node: str, writes: tuple[str, ...], records: list[Outgoing]) -> None:
        """Hand each record straight to aiokafka's accumulator (no Faust buffer in between: it sends one
        message at a time, and a full buffer holds up every consumed message); Faust's commit flushes the
        aiokafka producer first, so offsets never pass a record that was not delivered."""
        producer = app.producer._ensure_producer()  # type: ignore[attr-defined]
        for record in records:
            if record.role not in writes:
                raise RuntimeError(f"{node} may not write {record.role}")
            await producer.send(topic_of[record.role], value=record.value, key=record.key, headers=record.headers)
            _count(record)

    def agent(stage: Stage, table: Any = None, index: SweepIndex | None = None, *, contract: str | None) -> None:
        channel = app.topic(*(names.all()[r] for r in stage.reads), key_type=bytes, value_type=bytes,
                            key_serializer="raw", value_serializer="raw")  # fmt: skip
        processed = metrics.EVENTS.labels(stage.name)
        late = metrics.LATE.labels(stage.name)

        async def process(stream: Any) -> None:
            await cache.ready.wait()
            if options.take_events <= 1:
                async for event in stream.events():
                    await handle(event)
                return
            # Each event Faust's stream hands over brings with it what its queue already buffers: those are
            # handled here without Faust's per-event stream iteration (a loop turn, sensors, processors per
            # event), each tracked, made the current event (table writes find their changelog partition
            # through it) and acked right after its step, as the stream itself would. An event of an older
            # consumer generation (revoked) is acked unhandled, as Faust skips it: it is read again after the
            # seek. A queue that is empty ends the batch, so nothing waits for a timer.
            queue = stream.channel.queue
            consumer = app.consumer
            acking = app.topics.acking_topics
            flow = app.flow_control
            budget = options.agent_slice_ms / 1000
            async for first in stream.events():
                await handle(first)
                since = time.perf_counter()
                for _ in range(options.take_events - 1):
                    if budget and time.perf_counter() - since > budget:
                        await asyncio.sleep(0)  # a slice is up: let the sender and the other agents run
                        since = time.perf_counter()
                    # Only now, with no await before `get_nowait`: a rebalance clears the queue while the
                    # agent yields, and a queue tested before the yield crashed the agent (QueueEmpty).
                    if queue.empty() or queue._errors:
                        break
                    event = queue.get_nowait()
                    msg = event.message
                    if flow.is_active() and msg.generation_id == app.consumer_generation_id:
                        if msg.topic in acking and not msg.tracked:
                            msg.tracked = True
                            consumer.track_message(msg)
                        stream._set_current_event(event)
                        await handle(event)
                    await stream.ack(event)
                stream._set_current_event(first)  # Faust acks the event it handed over through this

        async def handle(event: Any) -> None:
            msg = event.message
            record = Inbound(role_of[msg.topic], msg.key, msg.value,
                                 SourceRef(msg.topic, msg.partition, msg.offset, msg.key),
                                 dict(msg.headers or ()), msg.timestamp)  # fmt: skip
            key = (msg.key or b"").decode(errors="replace")
            try:
                step = stage.handle(record, table.get(key) if table is not None else None)
            except Exception as exc:  # a bug must not stall the partition
                log.exception("%s failed on %s", stage.name, record.src.coordinates())
                err = ContractError([ErrorDetail("INTERNAL_ERROR", (), repr(exc)[:500])])
                # An internal record (no contract) is skipped after the log: there is no input to dead-letter.
                step = Step.emit([dead_letter(msg.value or b"", record.src, contract, err)] if contract else [])
            if step.changed and table is not None:
                if step.state is None:
                    if key in table:
                        del table[key]
                else:
                    table[key] = step.state
                if index is not None:
                    index.note(key, step.state)
            await publish(stage.name, stage.writes, step.records)
            processed.inc()
            if step.late:
                late.inc()

        process.__name__ = stage.name
        app.agent(channel, name=stage.name)(process)
        app.topology.append(Wired("Agent", stage.name, stage.reads, stage.writes,  # type: ignore[attr-defined]
                                  getattr(stage, "keeps", ""), stage.does))  # fmt: skip

    def table(name: str) -> Any:
        made: Any = app.Table(name, default=None, partitions=options.partitions, key_type=str, **store())
        # Faust takes a table's codecs from its types only. Its store is made later, with these, and its
        # changelog records are sent with the table's codecs (`Table.send_changelog`).
        made.key_serializer = made.value_serializer = STATE_CODEC
        return made

    run_table, claim_table = table(runs.keeps), table(claims.keeps)
    open_runs = SweepIndex(run_table, _watch_run, hold, runs.keeps)
    watched_claims = SweepIndex(claim_table, _watch_claim, hold, claims.keeps)
    agent(runs, run_table, open_runs, contract="judge_output")
    agent(claims, claim_table, watched_claims, contract="claim_check")
    agent(rubrics, contract="rubric")
    drift_table = table(drift.keeps)
    drifting = SweepIndex(drift_table, watch_drift)
    agent(drift, drift_table, drifting, contract=None)

    def owned(role: str) -> frozenset[int]:
        topic = names.all()[role]
        return frozenset(tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topic)

    def sweep(name: str, stage: RunStage | ClaimStage | DriftStage, index: SweepIndex, writes: tuple[str, ...]) -> None:
        async def tick() -> None:
            if not cache.ready.is_set():
                return
            try:
                mine = owned(stage.reads[0])
                index.refill(mine)
                due = index.due(mine)
                out = stage.sweep(due)
                index.mark_sent([(r.key or b"").decode() for r in out])
                await publish(name, writes, out)
                metrics.STATE_KEYS.labels(stage.keeps).set(len(index.keys))
                metrics.HELD_EVENTS.set(hold.total)
            except Exception:
                log.exception("timer %s failed; retrying next tick", name)

        tick.__name__ = name
        app.timer(options.timer_interval_seconds, name=name)(tick)
        app.topology.append(Wired("Timer", name, (), writes, stage.keeps,  # type: ignore[attr-defined]
                                  "sweep: " + " ".join((stage.sweep.__doc__ or "").split(".")[0].split())))  # fmt: skip

    sweep("judge_timeouts", runs, open_runs, ("judge_outputs", "reconcile_control"))
    sweep("claim_resumes", claims, watched_claims, ("claims_control",))
    sweep("drift_windows", drift, drifting, ("drift_partials",))

    async def drift_flush() -> None:
        try:
            await publish("drift_flush", ("drift_partials",), deltas.drain())
        except Exception:
            log.exception("drift flush failed; those deltas are lost")

    app.timer(options.drift.flush_seconds, name="drift_flush")(drift_flush)
    app.topology.append(Wired("Timer", "drift_flush", (), ("drift_partials",),  # type: ignore[attr-defined]
                              does="every few seconds: the claim and run steps' windowed drift deltas, one "
                              "record per judge"))  # fmt: skip

    @app.task
    async def rubric_cache() -> None:
        await cache.run()

    app.topology.append(Wired("Task", "rubric_cache", ("rubrics",), (),  # type: ignore[attr-defined]
                              does="every worker reads all of judge.rubrics into memory (a global table)"))  # fmt: skip

    watchdog = ProgressWatchdog(options.stall_seconds, options.stall_recovery_seconds, ready_lag=options.ready_lag)
    app.watchdog = watchdog  # type: ignore[attr-defined]
    app.outage = options.outage  # type: ignore[attr-defined]
    end_offsets = EndOffsets(options)

    @app.task
    async def progress_watchdog() -> None:
        """Committed progress per assigned stream partition against the broker's end offsets, every few
        seconds, in a loop of its own (not a Faust timer: a tick that hangs would stop those). A check that
        itself has not finished after the stall and recovery deadlines ends the process the same way."""
        interval = min(5.0, options.stall_seconds / 4)
        check: asyncio.Future[None] | None = None
        started = 0.0
        while True:
            await asyncio.sleep(interval)
            if check is None or check.done():
                if check is not None and check.exception() is not None:
                    log.error("progress watchdog check failed: %r; retrying", check.exception())
                check, started = asyncio.ensure_future(_watch(app, watchdog, end_offsets, options)), time.monotonic()
            await asyncio.wait({check}, timeout=interval)
            hung = time.monotonic() - started
            if not check.done() and hung > options.stall_seconds + options.stall_recovery_seconds:
                log.error("progress watchdog check hung for %.0fs; exiting for the supervisor to restart it", hung)
                if options.on_stall_exit is not None:
                    options.on_stall_exit(watchdog.state)

    app.topology.append(Wired("Task", "progress_watchdog", (), (),  # type: ignore[attr-defined]
                              does="committed progress vs end offsets: ERROR and rejoin on a stall, "
                              "then exit non-zero"))  # fmt: skip
    return app


END_OFFSETS_TIMEOUT = 10.0


class EndOffsets:
    """The broker's end offsets, asked with a group-less client of the watchdog's own (a consumer that stopped
    fetching cannot hide its lag). When the broker does not answer, every partition counts as lagging (at
    least one record past its position): a worker that has not reached its broker for the stall and recovery
    deadlines is restarted too, which rebuilds every connection."""

    def __init__(self, options: WorkerOptions) -> None:
        self.options = options
        self.timeout = max(1.0, min(END_OFFSETS_TIMEOUT, options.stall_seconds / 2))
        self.consumer: Any = None
        self.last: dict[tuple[str, int], int] = {}
        self._pending: asyncio.Future[dict[tuple[str, int], int]] | None = None

    async def _client(self) -> Any:
        from aiokafka import AIOKafkaConsumer

        if self.consumer is None:
            consumer = AIOKafkaConsumer(bootstrap_servers=self.options.bootstrap_servers, group_id=None,
                                        enable_auto_commit=False, **self.options.client_kwargs)  # fmt: skip
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


async def _watch(app: Any, watchdog: ProgressWatchdog, ends: EndOffsets, options: WorkerOptions) -> None:
    assigned = [tp for tp in app.assignor.assigned_actives() if tp.topic in app.stream_topics]
    committed = app.consumer._committed_offset
    positions = {(tp.topic, tp.partition): committed.get(tp) or 0 for tp in assigned}
    end_by_tp = await ends.of(positions, assigned)
    state = watchdog.observe(positions, end_by_tp, ends.partitions(app.stream_topics))
    outage = options.outage
    if outage.down():
        watchdog.excuse()  # the outage explains the stall; its own policy decides when to give up
        reason = outage.exit_reason()
        if reason is not None:
            log.error("worker gives up: %s; exiting for the supervisor to restart it", reason)
            if options.on_outage_exit is not None:
                options.on_outage_exit(reason)
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
        log.error("worker still stalled %.0fs after rejoining: %s; exiting for the supervisor to restart it",
                  options.stall_recovery_seconds, state.reason)  # fmt: skip
        if options.on_stall_exit is not None:
            options.on_stall_exit(state)


async def _rejoin(consumer: Any) -> None:
    """Ask the group coordinator for a rebalance: the group reassigns partitions and Faust re-seeks them."""
    consumer._coordinator.request_rejoin()


def describe(app: faust.App, names: TopicNames) -> str:
    """Kafka-Streams-style description of the wired topology: each agent's topics come from the agent."""
    lines = ["Topology"]
    agents = app.agents
    for node in app.topology:  # type: ignore[attr-defined]
        lines.append(f"  {node.kind}: {node.name}")
        reads = node.reads
        if node.kind == "Agent":
            reads = tuple(role_name for role_name in agents[node.name].channel.topics)  # the wired channel
        else:
            reads = tuple(names.all()[r] for r in reads)
        if reads:
            lines.append(f"    reads:  {', '.join(reads)}")
        if node.keeps:
            lines.append(f"    keeps:  {node.keeps} (table, changelog-backed)")
        if node.writes:
            lines.append(f"    writes: {', '.join(names.all()[r] for r in node.writes)}")
        if node.does:
            lines.append(f"    does:   {node.does}")
    return "\n".join(lines)
