"""The Faust wiring: each stage becomes one agent, by name; nothing else happens here.

An agent decodes a Kafka record into an `Inbound`, reads the key's state, calls its stage's `handle`,
stores the state the stage returns and publishes its records without awaiting each one (through the
librdkafka producer, `streams.rdkafka_producer`; `DurableApp` waits until they are acknowledged before
offsets are committed). Timers call the stages' `sweep` on the keys
that can need it. `describe(app)` prints the topology from the wired app itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import faust

from streams import metrics
from streams.claims import ClaimStage
from streams.drift import DriftAccumulator, DriftOptions, DriftStage
from streams.durable_commit import DurableApp
from streams.envelope import utc_now
from streams.liveness import LivenessOptions, WatchdogLoop
from streams.outage import Reachability
from streams.rdkafka_producer import OutgoingProducer
from streams.rubric_cache import RubricCache, RubricStage
from streams.runs import RunStage
from streams.stage import Clock, HoldBudget
from streams.state_codec import STATE_CODEC
from streams.sweep_index import SweepIndex
from streams.topics import TopicNames
from streams.watchdog import ProgressWatchdog, WatchdogState
from streams.wiring import DriftFlush, Publisher, RubricCacheTask, StageAgent, Sweep, Take, Topology

log = logging.getLogger("judgeflow.streams")
ROCKSDB_OPTIONS = {"write_buffer_size": 8 << 20, "max_write_buffer_number": 2}
"""Per database; what all of them hold together is bounded by `WorkerOptions.rocksdb_memory_bytes`."""
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
    commit_interval_seconds: float = 2.8
    """How often offsets are committed (each commit first waits until what was published is acknowledged)."""
    producer_config: dict[str, Any] | None = None
    """librdkafka's settings (bootstrap servers, security) for the producer the stages publish through
    (`streams.rdkafka_producer`); None: they publish through Faust's aiokafka producer."""
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

    def liveness(self) -> LivenessOptions:
        return LivenessOptions(
            self.bootstrap_servers,
            self.client_kwargs,
            self.stall_seconds,
            self.stall_recovery_seconds,
            self.outage,
            self.on_stall_exit,
            self.on_outage_exit,
        )


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


class WorkerApp(DurableApp):
    """The worker's Faust app, with what its wiring attached: `judgeflow topology` prints `topology`, health
    reads `watchdog` and `outage`."""

    topology: Topology
    watchdog: ProgressWatchdog
    outage: Reachability


def _durable_app(options: WorkerOptions, store_url: str) -> WorkerApp:
    return WorkerApp(
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
        broker_commit_interval=options.commit_interval_seconds,
        # Batches of up to 1 MiB per partition, and room in each stream's buffer for a whole take of events.
        producer_max_batch_size=1 << 20,
        stream_buffer_maxsize=max(4096, 4 * options.take_events),
        broker_max_poll_records=options.poll_records or None,
        topic_disable_leader=True,
        cython_optimizations=True,
    )


class Tables:
    """The worker's changelog-backed tables, each encoded with `STATE_CODEC`."""

    def __init__(self, app: faust.App, options: WorkerOptions, store: Callable[[], dict[str, Any]]) -> None:
        self.app = app
        self.options = options
        self.store = store

    def __call__(self, name: str) -> Any:
        made: Any = self.app.Table(name, default=None, partitions=self.options.partitions, key_type=str, **self.store())
        # Faust takes a table's codecs from its types only. Its store is made later, with these, and its
        # changelog records are sent with the table's codecs (`Table.send_changelog`).
        made.key_serializer = made.value_serializer = STATE_CODEC
        return made


def build_app(options: WorkerOptions) -> WorkerApp:
    """The worker: four stages as agents over their tables, three sweeps, the drift flush, the rubric cache and
    the progress watchdog, composed here in the order `judgeflow topology` prints them."""
    names = options.names
    store_url, store = _stores(options)
    app = _durable_app(options, store_url)
    if options.producer_config is not None:
        app.outgoing = OutgoingProducer(options.producer_config, linger_ms=options.producer_linger_ms)
    cache = RubricCache(options.bootstrap_servers, names.rubrics, **options.client_kwargs)
    common = dict(
        clock=options.clock,
        retention=options.state_retention,
        max_payload_bytes=options.max_payload_bytes,
        stale_after=options.stale_after,
    )
    hold = HoldBudget(options.max_held_events)
    deltas = DriftAccumulator(options.drift)  # observed inline by the run and claim steps, flushed by a timer
    runs = RunStage(cache.get, hold=hold, drift=deltas, **common)  # type: ignore[arg-type]
    claims = ClaimStage(cache.get, hold=hold, drift=deltas, **common)  # type: ignore[arg-type]
    rubrics, drift = RubricStage(), DriftStage(options.drift, clock=options.clock)
    app.stream_topics = frozenset(names.all()[r] for stage in (runs, claims, rubrics, drift) for r in stage.reads)
    table = Tables(app, options, store)
    run_table, claim_table, drift_table = table(runs.keeps), table(claims.keeps), table(drift.keeps)
    open_runs = SweepIndex(run_table, runs.wake_at, hold, runs.keeps)
    watched_claims = SweepIndex(claim_table, claims.wake_at, hold, claims.keeps)
    drifting = SweepIndex(drift_table, drift.wake_at)

    topology = app.topology = Topology()
    out, take = Publisher(app, names), Take(options.take_events, options.agent_slice_ms)
    for agent in (
        StageAgent(runs, out, cache, take, table=run_table, index=open_runs, contract="judge_output"),
        StageAgent(claims, out, cache, take, table=claim_table, index=watched_claims, contract="claim_check"),
        StageAgent(rubrics, out, cache, take, contract="rubric"),
        StageAgent(drift, out, cache, take, table=drift_table, index=drifting, contract=None),
    ):
        agent.attach(app, names, topology)
    every = options.timer_interval_seconds
    for sweep in (
        Sweep(
            "judge_timeouts",
            runs,
            open_runs,
            ("judge_outputs", "reconcile_control"),
            publisher=out,
            cache=cache,
            hold=hold,
            every=every,
        ),
        Sweep(
            "claim_resumes",
            claims,
            watched_claims,
            ("claims_control",),
            publisher=out,
            cache=cache,
            hold=hold,
            every=every,
        ),
        Sweep(
            "drift_windows", drift, drifting, ("drift_partials",), publisher=out, cache=cache, hold=hold, every=every
        ),
    ):
        sweep.attach(app, names, topology)
    DriftFlush(deltas, out, options.drift.flush_seconds).attach(app, topology)
    RubricCacheTask(cache).attach(app, topology)
    app.watchdog = ProgressWatchdog(options.stall_seconds, options.stall_recovery_seconds, ready_lag=options.ready_lag)
    app.outage = options.outage
    WatchdogLoop(app, app.watchdog, options.liveness()).attach(app, topology)
    return app


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
