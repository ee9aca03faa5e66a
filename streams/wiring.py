"""The worker's wiring as named objects: each agent, timer and task is one small object that attaches itself
to the Faust app and records itself in the `Topology` (what `judgeflow topology` prints).

- `Publisher`: hands a stage's records to the producer, refusing a role the node does not declare;
- `StageAgent`: one Faust agent running one stage over its table (decode, read state, `handle`, store, send);
- `Sweep`: a timer calling a stage's `sweep` on the keys its `SweepIndex` says may need it;
- `DriftFlush`: a timer publishing the drift deltas the stages observed inline;
- `RubricCacheTask`: the task that keeps every rubric in memory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from schemas import ContractError
from schemas.errors import ErrorDetail
from streams import metrics
from streams.drift import DriftAccumulator
from streams.edge import dead_letter
from streams.envelope import H_ERROR_CODES, Outgoing, SourceRef, micros
from streams.raw_records import RawRecords
from streams.rubric_cache import RubricCache
from streams.stage import Clock, HoldBudget, Inbound, State, Step
from streams.sweep_index import SweepIndex
from streams.topics import TopicNames

log = logging.getLogger("judgeflow.streams")


class Stage(Protocol):
    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    does: str

    def handle(self, record: Inbound, stored: State | None) -> Step: ...


class SweepingStage(Protocol):
    reads: tuple[str, ...]
    keeps: str
    clock: Clock

    def wake_at(self, doc: State) -> int | None: ...

    def sweep(self, states: list[tuple[str, State]]) -> list[Outgoing]: ...


@dataclass
class Wired:
    """One node of the topology as wired: an agent, a timer or a task."""

    kind: str
    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    keeps: str = ""
    does: str = ""


@dataclass
class Topology:
    """The nodes in the order they were attached."""

    nodes: list[Wired] = field(default_factory=list)

    def add(self, node: Wired) -> None:
        self.nodes.append(node)

    def __iter__(self) -> Any:
        return iter(self.nodes)


_ROUTED: dict[tuple[str, str], Any] = {}
"""The routing counter of each (route, subject), looked up once: `labels()` takes a lock and builds a key."""


def count(record: Outgoing) -> None:
    """The metrics (and the warnings) one published record stands for."""
    if record.role == "invalid":
        codes = dict(record.headers).get(H_ERROR_CODES, b"").decode().split(",")
        for code in filter(None, codes):
            metrics.INVALID.labels(code).inc()
    elif record.role in ("done", "second_judge", "human_review"):
        subject = "evaluation" if b'"subject":"evaluation"' in record.value else "claim"
        routed = _ROUTED.get((record.role, subject))
        if routed is None:
            routed = _ROUTED[(record.role, subject)] = metrics.ROUTES.labels(record.role, subject)
        routed.inc()
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


class Publisher:
    """Hands each record to the app's `OutgoingProducer` (librdkafka) when it has one: `DurableApp`'s commit
    waits until what it holds is acknowledged, so offsets never pass a record the broker did not take. Without
    one (`JUDGEFLOW_PRODUCER=aiokafka`) records go straight to aiokafka's accumulator (no Faust buffer in
    between: it sends one message at a time, and a full buffer holds up every consumed message), and Faust's
    commit flushes that producer first, as before."""

    def __init__(self, app: Any, names: TopicNames) -> None:
        self.app = app
        self.topic_of = names.all()

    async def publish(self, node: str, writes: tuple[str, ...], records: list[Outgoing]) -> None:
        outgoing = self.app.outgoing
        producer = outgoing if outgoing is not None else self.app.producer._ensure_producer()
        for record in records:
            if record.role not in writes:
                raise RuntimeError(f"{node} may not write {record.role}")
            topic = self.topic_of[record.role]
            if outgoing is None or not outgoing.offer(topic, record.value, record.key, record.headers):
                await producer.send(topic, value=record.value, key=record.key, headers=record.headers)
            count(record)


@dataclass(frozen=True)
class Take:
    """How an agent drains its stream: events per hand-over, and how long it holds the loop (see streams.app)."""

    events: int
    slice_ms: float


class StageAgent:
    """One Faust agent, by the stage's name: decode each record into an `Inbound`, read the key's state, call
    the stage's `handle`, store the state it returns (noting it in the sweep's index) and publish its records.
    `contract` names what a record that crashes the stage is dead-lettered as (None: an internal record)."""

    def __init__(
        self,
        stage: Stage,
        publisher: Publisher,
        cache: RubricCache,
        take: Take,
        *,
        table: Any = None,
        index: SweepIndex | None = None,
        contract: str | None,
    ) -> None:
        self.stage = stage
        self.publisher = publisher
        self.cache = cache
        self.take = take
        self.table = table
        self.index = index
        self.contract = contract
        self.processed = metrics.EVENTS.labels(stage.name)
        self.late = metrics.LATE.labels(stage.name)
        self.app: Any = None
        self.role_of: dict[str, str] = {}

    def attach(self, app: Any, names: TopicNames, topology: Topology) -> None:
        self.app = app
        self.role_of = {name: role for role, name in names.all().items()}
        channel = app.topic(*(names.all()[r] for r in self.stage.reads), schema=RawRecords())

        async def process(stream: Any) -> None:  # Faust wants a function of the stream
            await self.process(stream)

        process.__name__ = self.stage.name
        app.agent(channel, name=self.stage.name)(process)
        topology.add(
            Wired(
                "Agent",
                self.stage.name,
                self.stage.reads,
                self.stage.writes,
                getattr(self.stage, "keeps", ""),
                self.stage.does,
            )
        )

    async def process(self, stream: Any) -> None:
        await self.cache.ready.wait()
        if self.take.events <= 1:
            async for event in stream.events():
                await self.handle(event)
            return
        async for first in stream.events():
            await self.handle(first)
            await self._take_queued(stream)
            stream._set_current_event(first)  # Faust acks the event it handed over through this

    async def _take_queued(self, stream: Any) -> None:
        """Each event Faust's stream hands over brings with it what its queue already buffers: those are
        handled here without Faust's per-event stream iteration (a loop turn, sensors, processors per event),
        each tracked, made the current event (table writes find their changelog partition through it) and
        acked right after its step, as the stream itself would. An event of an older consumer generation
        (revoked) is skipped unhandled, as Faust skips it; its ack is refused (`UnhandledGuard`), so no commit
        passes it before it is read again. A queue that is
        empty ends the batch, so nothing waits for a timer."""
        app = self.app
        queue = stream.channel.queue
        acking = app.topics.acking_topics
        budget = self.take.slice_ms / 1000
        since = time.perf_counter()
        for _ in range(self.take.events - 1):
            if budget and time.perf_counter() - since > budget:
                await asyncio.sleep(0)  # a slice is up: let the sender and the other agents run
                since = time.perf_counter()
            # Only now, with no await before `get_nowait`: a rebalance clears the queue while the
            # agent yields, and a queue tested before the yield crashed the agent (QueueEmpty).
            if queue.empty() or queue._errors:
                break
            event = queue.get_nowait()
            msg = event.message
            if app.flow_control.is_active() and msg.generation_id == app.consumer_generation_id:
                if msg.topic in acking and not msg.tracked:
                    msg.tracked = True
                    app.consumer.track_message(msg)
                stream._set_current_event(event)
                await self.handle(event)
            await stream.ack(event)

    async def handle(self, event: Any) -> None:
        msg = event.message
        record = Inbound(
            self.role_of[msg.topic],
            msg.key,
            msg.value,
            SourceRef(msg.topic, msg.partition, msg.offset, msg.key),
            dict(msg.headers or ()),
            msg.timestamp,
        )
        key = (msg.key or b"").decode(errors="replace")
        table = self.table
        try:
            # `in` first: Faust's `get` raises and catches a KeyError for every key it lacks (most of them).
            step = self.stage.handle(record, table[key] if table is not None and key in table else None)
        except Exception as exc:  # a bug must not stall the partition
            log.exception("%s failed on %s", self.stage.name, record.src.coordinates())
            err = ContractError([ErrorDetail("INTERNAL_ERROR", (), repr(exc)[:500])])
            # An internal record (no contract) is skipped after the log: there is no input to dead-letter.
            contract = self.contract
            step = Step.emit([dead_letter(msg.value or b"", record.src, contract, err)] if contract else [])
        if step.changed and table is not None:
            if step.state is None:
                if key in table:
                    del table[key]
            else:
                table[key] = step.state
            if self.index is not None:
                self.index.note(key, step.state)
        await self.publisher.publish(self.stage.name, self.stage.writes, step.records)
        self.processed.inc()
        if step.late:
            self.late.inc()


class Sweep:
    """A timer that calls a stage's `sweep` on the due keys of the partitions this worker owns."""

    def __init__(
        self,
        name: str,
        stage: SweepingStage,
        index: SweepIndex,
        writes: tuple[str, ...],
        *,
        publisher: Publisher,
        cache: RubricCache,
        hold: HoldBudget,
        every: float,
    ) -> None:
        self.name = name
        self.stage = stage
        self.index = index
        self.writes = writes
        self.publisher = publisher
        self.cache = cache
        self.hold = hold
        self.every = every
        self.app: Any = None
        self.topic = ""

    def attach(self, app: Any, names: TopicNames, topology: Topology) -> None:
        self.app = app
        self.topic = names.all()[self.stage.reads[0]]

        async def tick() -> None:
            await self.tick()

        tick.__name__ = self.name
        app.timer(self.every, name=self.name)(tick)
        does = "sweep: " + " ".join((self.stage.sweep.__doc__ or "").split(".")[0].split())
        topology.add(Wired("Timer", self.name, (), self.writes, self.stage.keeps, does))

    def owned(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == self.topic)

    async def tick(self) -> None:
        if not self.cache.ready.is_set():
            return
        try:
            mine = self.owned()
            self.index.refill(mine)
            out = self.stage.sweep(self.index.due(mine, micros(self.stage.clock())))
            self.index.mark_sent([(r.key or b"").decode() for r in out])
            await self.publisher.publish(self.name, self.writes, out)
            metrics.STATE_KEYS.labels(self.stage.keeps).set(len(self.index.keys))
            metrics.HELD_EVENTS.set(self.hold.total)
        except Exception:
            log.exception("timer %s failed; retrying next tick", self.name)


class DriftFlush:
    """A timer publishing the drift deltas the run and claim steps observed inline (no consume per event)."""

    name = "drift_flush"
    writes = ("drift_partials",)

    def __init__(self, deltas: DriftAccumulator, publisher: Publisher, every: float) -> None:
        self.deltas = deltas
        self.publisher = publisher
        self.every = every

    def attach(self, app: Any, topology: Topology) -> None:
        async def drift_flush() -> None:
            await self.flush()

        app.timer(self.every, name=self.name)(drift_flush)
        topology.add(
            Wired(
                "Timer",
                self.name,
                (),
                self.writes,
                does="every few seconds: the claim and run steps' windowed drift deltas, one record per judge",
            )
        )

    async def flush(self) -> None:
        try:
            await self.publisher.publish(self.name, self.writes, self.deltas.drain())
        except Exception:
            log.exception("drift flush failed; those deltas are lost")


class RubricCacheTask:
    """Every worker reads all of judge.rubrics into memory (a global table); agents wait until it caught up."""

    name = "rubric_cache"

    def __init__(self, cache: RubricCache) -> None:
        self.cache = cache

    def attach(self, app: Any, topology: Topology) -> None:
        async def rubric_cache() -> None:
            await self.cache.run()

        app.task(rubric_cache)
        topology.add(
            Wired(
                "Task",
                self.name,
                ("rubrics",),
                (),
                does="every worker reads all of judge.rubrics into memory (a global table)",
            )
        )
