"""The projector: Kafka topics -> Postgres read models, exactly once in effect.

A plain aiokafka consumer group (no Kafka offset commits): the offsets live
in `projection_offsets`, written in the same transaction as the rows, so a
crash between the database commit and anything else neither loses nor
duplicates a row. On assignment, and whenever the stored offsets are not
where this process left them (a rebuild swapped the schema in, or another
projector took over), it seeks to the stored offsets.

Running unattended it also keeps itself honest: it creates its topics when
they are missing (so starting before the worker is fine) and refreshes topic
metadata every few seconds; a `ProgressWatchdog` checks its committed progress,
rebuilds the consumer when a partition stalls, and ends the run with
`ProjectorStalled` when that does not help (for a supervisor to restart it).
Metrics go through an injected `ProjectorObserver`: this package does not
depend on the application that exports them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import random
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg

from projections import agreement_store
from projections.agreement import DEFAULT_RESAMPLES
from projections.migrate import DEFAULT_SCHEMA, check_schema_name
from projections.review_items import ReviewSample
from projections.rows import (
    PROJECTION_REFUSED,
    PROJECTION_UNDECODABLE,
    Record,
    Rows,
    project,
    raw_event_row,
    reject_row,
)
from projections.store import OffsetConflict, WriteTimings, refused_by_data, stored_offsets, write_batch
from streams.outage import BROKER, POSTGRES, Reachability
from streams.topics import INPUT_ROLES, TopicNames, ensure_topics
from streams.watchdog import TP, Action, ProgressWatchdog, WatchdogState, format_partitions

log = logging.getLogger("judgeflow.projector")

AGREEMENT_IDLE_FACTOR = 9.0
"""After a judge-agreement refresh that took s seconds, the projector starts the next one no sooner than 9 x s
seconds later (the throttle still applies when that is longer). Measured: over 8 minutes at 300 events/s one
refresh grew from 0.6 s to 11-17 s; without this bound refreshes ran back to back, a core's share growing with
the data."""

PROJECTED_ROLES = (
    "rubrics",
    "runs",
    "judge_outputs",
    "checks",
    "reviews",
    "judge_outputs_valid",
    "checks_valid",
    "invalid",
    "reconciled",
    "done",
    "second_judge",
    "human_review",
    "alerts",
    "judge_alerts",
)

DEFAULT_BATCH = 2000
"""Records per batch at most (`JUDGEFLOW_PROJECTOR_BATCH`)."""
DEFAULT_LINGER_MS = 20.0
"""The flush interval (`JUDGEFLOW_PROJECTOR_LINGER_MS`): how long a batch keeps
collecting after its first record arrived; a row is visible this long plus the
batch's write after its record reached the projector (see `Projector._fetch`)."""

AGREEMENT_SECONDS = "JUDGEFLOW_AGREEMENT_SECONDS"
"""At most one judge-agreement refresh per rubric this often (default `agreement_store.DEFAULT_REFRESH_SECONDS`;
0 refreshes after every batch that touched the rubric)."""
AGREEMENT_RESAMPLES = "JUDGEFLOW_AGREEMENT_RESAMPLES"
"""Bootstrap resamples per agreement figure (default `agreement.DEFAULT_RESAMPLES`; 0 leaves the intervals out)."""

FAULT_KILL_IN_BATCH = "JUDGEFLOW_FAULT_KILL_IN_BATCH"
"""Tests only: SIGKILL this process inside the Nth batch's transaction that gets
past the offset check, after its rows are written and before it commits."""
FAULT_KILL_AFTER_COMMIT = "JUDGEFLOW_FAULT_KILL_AFTER_COMMIT"
"""Tests only: SIGKILL this process right after its Nth committed batch, before
the consumer moves on (where a Kafka-committing projector would commit offsets)."""


class ProjectorObserver(Protocol):
    """What the projector reports as it goes; the application exports it (Prometheus)."""

    def batch_committed(self, rows: int) -> None: ...

    def partition_lag(self, topic: str, partition: int, lag: int) -> None: ...

    def watchdog(self, state: WatchdogState) -> None: ...

    def record_rejected(self, topic: str, code: str) -> None: ...


class NoObserver:
    """The default: report nothing (rebuilds, tests, library use)."""

    def batch_committed(self, rows: int) -> None:
        return None

    def partition_lag(self, topic: str, partition: int, lag: int) -> None:
        return None

    def watchdog(self, state: WatchdogState) -> None:
        return None

    def record_rejected(self, topic: str, code: str) -> None:
        return None


class ProjectorStalled(RuntimeError):
    """The watchdog saw no progress, rebuilt the consumer, and still saw none:
    exit non-zero and let the supervisor start a fresh process."""


class ProjectorOutage(ProjectorStalled):
    """The broker or Postgres stayed out of reach past the outage window (`streams.outage`): exit non-zero
    (status 4) so a supervisor restarts the process and an operator sees the restarts."""


def postgres_target(database_url: str) -> str:
    """Where Postgres is, for logs and health: host, port and database, never the user or the password."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(database_url)
    except psycopg.ProgrammingError:
        return "Postgres"
    host, port, db = info.get("host") or "localhost", info.get("port") or "5432", info.get("dbname") or ""
    return f"Postgres {host}:{port}/{db}"


@dataclass
class ProjectorStats:
    batches: int = 0
    committed: int = 0
    records: int = 0
    rows: int = 0
    conflicts: int = 0
    rejects: int = 0
    """Records set aside in `projection_rejects` (see `Projector._write`)."""
    reconnects: int = 0
    rebuilds: int = 0
    seconds_writing: float = 0.0
    seconds_projecting: float = 0.0
    """Decoding records into rows (CPU in the event loop), beside `seconds_writing`."""
    agreement_refreshes: int = 0
    seconds_agreement: float = 0.0
    """Refreshing judge agreement after commits (not part of `seconds_writing`)."""
    timings: WriteTimings = field(default_factory=WriteTimings)
    started: float = field(default_factory=time.monotonic)


class Projector:
    def __init__(
        self,
        bootstrap: str,
        database_url: str,
        names: TopicNames,
        *,
        schema: str = DEFAULT_SCHEMA,
        consumer_name: str = "projector",
        group_id: str = "judgeflow-projector",
        max_records: int = DEFAULT_BATCH,
        linger_ms: float = DEFAULT_LINGER_MS,
        client: dict[str, Any] | None = None,
        observer: ProjectorObserver | None = None,
        stall_seconds: float = 60.0,
        recovery_seconds: float = 60.0,
        ready_lag: int = 0,
        check_seconds: float | None = None,
        ensure_partitions: int | None = None,
        ensure_replication: int = 1,
        metadata_max_age_ms: int = 5000,
        agreement_seconds: float | None = None,
        agreement_resamples: int | None = None,
        outage: Reachability | None = None,
        review_sample: ReviewSample | None = None,
    ):
        """`ensure_partitions`: create missing topics at start with this many
        partitions (and `ensure_replication`), as the worker would; None leaves
        topic creation to others. `stall_seconds` / `recovery_seconds` /
        `ready_lag` configure the watchdog (see streams.watchdog); `outage` the outage policy (see
        streams.outage: health during an outage, the exit after it lasted too long, quiet retries)."""
        self.bootstrap = bootstrap
        self.database_url = database_url
        self.names = names
        self.schema = check_schema_name(schema)
        self.consumer_name = consumer_name
        self.group_id = group_id
        self.client = client or {}
        self.topics = [getattr(names, r) for r in PROJECTED_ROLES]
        self.roles = {getattr(names, r): r for r in PROJECTED_ROLES}
        self.believed: dict[tuple[str, int], int | None] = {}
        self.review_sample = review_sample or ReviewSample.from_env()
        """Which claims the review queue audits and which want two reviewers (`projections.review_items`)."""
        self.stats = ProjectorStats()
        self._stop = asyncio.Event()
        self._conn: psycopg.Connection | None = None
        self._reaching_commit = 0
        self._environment_knobs(max_records, linger_ms)
        self.observer: ProjectorObserver = observer or NoObserver()
        self.watchdog = ProgressWatchdog(stall_seconds, recovery_seconds, ready_lag=ready_lag)
        self.outage = outage or Reachability(stall_seconds=stall_seconds, log=log)
        self.broker_target = f"broker {bootstrap}"
        self.postgres_target = postgres_target(database_url)
        self._postgres_ok_at = 0.0
        self._probe_conn: psycopg.Connection | None = None
        self.check_seconds = check_seconds or min(5.0, stall_seconds / 4)
        self.ensure_partitions = ensure_partitions
        self.ensure_replication = ensure_replication
        self.metadata_max_age_ms = metadata_max_age_ms
        self._agreement_options(agreement_seconds, agreement_resamples)
        self._agreement_next = 0.0
        self._agreement_task: asyncio.Task[None] | None = None
        self._agreement_conn: psycopg.Connection | None = None
        self._floor: dict[TP, int] = {}
        """Log start offsets of partitions without a stored offset: their progress so far."""
        self._ends: dict[TP, int] = {}
        self._consumer: Any = None
        self._rebuild = asyncio.Event()
        self._fatal: str | None = None
        self._fatal_outage = False
        self._since = time.monotonic()
        """When the records not yet fetched can have arrived at the earliest: the
        moment the last batch closed, or the consumer was last seen empty."""

    def _environment_knobs(self, max_records: int, linger_ms: float) -> None:
        """Batch size and linger (the environment overrides the arguments), and the reliability suite's
        fault points (a SIGKILL inside, or after, the commit of a given batch)."""
        self.max_records = int(os.environ.get("JUDGEFLOW_PROJECTOR_BATCH", max_records))
        self.linger_s = float(os.environ.get("JUDGEFLOW_PROJECTOR_LINGER_MS", linger_ms)) / 1000
        self._fault_at = int(os.environ.get(FAULT_KILL_IN_BATCH, "0") or 0)
        self._fault_after = int(os.environ.get(FAULT_KILL_AFTER_COMMIT, "0") or 0)

    def _agreement_options(self, seconds: float | None, resamples: int | None) -> None:
        """How often judge agreement is refreshed, and its bootstrap's resamples (environment first)."""
        self.agreement_seconds = float(
            os.environ.get(AGREEMENT_SECONDS)
            or (agreement_store.DEFAULT_REFRESH_SECONDS if seconds is None else seconds)
        )
        self.agreement_resamples = int(
            os.environ.get(AGREEMENT_RESAMPLES) or (DEFAULT_RESAMPLES if resamples is None else resamples)
        )

    def stop(self) -> None:
        self._stop.set()

    def health(self) -> WatchdogState:
        """The watchdog's latest verdict; a dead one once it has missed a few checks."""
        return self.outage.judge(self.watchdog.state.stale(time.monotonic(), max(3 * self.check_seconds, 10.0)))

    def _connect(self) -> psycopg.Connection:
        # No server-side prepared statements: a prepared plan keeps pointing at the
        # old tables after a rebuild renames schemas; a fresh parse follows the name.
        return psycopg.connect(
            self.database_url,
            options=f"-c search_path={self.schema}",
            autocommit=True,
            prepare_threshold=None,
            connect_timeout=5,
        )

    async def _connection(self) -> psycopg.Connection:
        """The open connection, or a new one: retried with capped, jittered backoff while Postgres is
        unreachable (the consumer simply waits meanwhile; `self.outage` logs it quietly and decides when
        the process gives up)."""
        delay = 0.2
        while self._conn is None or self._conn.closed:
            try:
                self._conn = await asyncio.to_thread(self._connect)
                self._postgres_answered()
            except psycopg.OperationalError as exc:
                self.stats.reconnects += 1
                self.outage.failed(POSTGRES, self.postgres_target, exc)
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, 10.0)
        return self._conn

    def _postgres_answered(self) -> None:
        self._postgres_ok_at = time.monotonic()
        self.outage.succeeded(POSTGRES)

    async def _probe_postgres(self) -> None:
        """`SELECT 1` when nothing else reached Postgres for a check interval: an idle projector whose database
        went away must not report itself healthy."""
        if time.monotonic() - self._postgres_ok_at < self.check_seconds:
            return

        def probe() -> None:
            if self._probe_conn is None or self._probe_conn.closed:
                self._probe_conn = self._connect()
            self._probe_conn.execute("SELECT 1")

        try:
            await asyncio.wait_for(asyncio.to_thread(probe), self.check_seconds + 5)
        except (psycopg.Error, TimeoutError) as exc:
            if self._probe_conn is not None:
                self._probe_conn.close()
            self.outage.failed(POSTGRES, self.postgres_target, exc)
            return
        self._postgres_answered()

    async def _seek_to_stored(self, consumer: Any, tps: Iterable[Any]) -> None:
        while True:
            conn = await self._connection()
            try:
                stored = await asyncio.to_thread(stored_offsets, conn, self.consumer_name)
                break
            except (psycopg.OperationalError, psycopg.InterfaceError):
                conn.close()
        tps = list(tps)
        log.info("assigned %d partitions; seeking to the %d stored offsets", len(tps), len(stored))
        fresh = [tp for tp in tps if (tp.topic, tp.partition) not in stored]
        if fresh:
            try:
                begin = await asyncio.wait_for(consumer.beginning_offsets(fresh), 10)
                self._floor.update({(tp.topic, tp.partition): o for tp, o in begin.items()})
            except Exception as exc:  # only the watchdog's lag estimate depends on it
                log.warning("could not read the log start offsets (%s)", exc)
        for tp in tps:
            nxt = stored.get((tp.topic, tp.partition))
            self.believed[(tp.topic, tp.partition)] = nxt
            if nxt is None:
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, nxt)

    async def run(self, *, until_end: dict[tuple[str, int], int] | None = None) -> ProjectorStats:
        """Project until stopped, or (rebuild) until every partition reaches `until_end`.

        In group mode, raises `ProjectorStalled` when the watchdog gives up."""
        from aiokafka import AIOKafkaConsumer, TopicPartition

        await self._connection()
        try:
            if until_end is not None:
                consumer = AIOKafkaConsumer(
                    bootstrap_servers=self.bootstrap,
                    group_id=None,
                    enable_auto_commit=False,
                    auto_offset_reset="earliest",
                    max_poll_records=self.max_records,
                    **self.client,
                )
                await consumer.start()
                try:
                    tps = [TopicPartition(t, p) for t, p in until_end]
                    consumer.assign(tps)
                    await self._seek_to_stored(consumer, tps)
                    while not self._stop.is_set() and not self._reached(until_end):
                        records = await self._fetch(consumer)
                        if records:
                            await self._write(consumer, records)
                        await self._agreement()
                    if not self._stop.is_set():
                        await self._agreement(force=True)  # a rebuild ends with every figure up to date
                finally:
                    await consumer.stop()
            else:
                await self._run_group()
        finally:
            # Not after a fatal stall: the connection may be stuck in a write, and the
            # process is about to exit anyway.
            if self._fatal is None:
                if self._agreement_task is not None:
                    await self._agreement_task  # reports its own errors
                for conn in (self._conn, self._agreement_conn):
                    if conn is not None:
                        conn.close()
        return self.stats

    async def _ensure_topics(self) -> None:
        """Create missing topics as the worker does, so that subscribing finds them
        (and the broker does not auto-create them without judgeflow's settings)."""
        if self.ensure_partitions is None:
            return
        try:
            ensuring = ensure_topics(
                self.bootstrap,
                self.names,
                partitions=self.ensure_partitions,
                replication=self.ensure_replication,
                required=self.topics,
                **self.client,
            )
            created = await asyncio.wait_for(ensuring, 60)
            if created:
                log.info("created %d missing topic(s): %s", len(created), ", ".join(created))
        except Exception as exc:
            # Not fatal: the metadata refresh picks the topics up once someone creates them.
            log.warning("could not ensure the topics (%s); waiting for them to appear", exc)

    def _new_consumer(self) -> Any:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

        projector = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                return None

            async def on_partitions_assigned(self, assigned: Any) -> None:
                # Paused before the first await: aiokafka may already fetch the new
                # partitions from the reset position while the stored offsets load,
                # and a batch of those records would meet an offset conflict.
                assigned = list(assigned)
                consumer.pause(*assigned)
                try:
                    await projector._seek_to_stored(consumer, assigned)
                finally:
                    consumer.resume(*assigned)

        # A brisk metadata refresh: topics (or partitions) created after the start
        # are subscribed within seconds, not after aiokafka's default 5 minutes.
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=self.max_records,
            metadata_max_age_ms=self.metadata_max_age_ms,
            **self.client,
        )
        consumer.subscribe(self.topics, listener=Listener())
        return consumer

    async def _run_group(self) -> None:
        from aiokafka.errors import KafkaError

        await self._ensure_topics()
        main = asyncio.current_task()
        assert main is not None
        watch = asyncio.create_task(self._watch(main))
        retry = 1.0
        try:
            while not self._stop.is_set():
                self._rebuild.clear()
                consumer = self._new_consumer()
                self._consumer = consumer
                try:
                    await consumer.start()
                    retry = 1.0
                    while not self._stop.is_set() and not self._rebuild.is_set():
                        records = await self._fetch(consumer)
                        if records:
                            await self._write(consumer, records)
                        await self._agreement()
                except (KafkaError, OSError) as exc:  # anything else is a bug: crash as before
                    if self._stop.is_set():
                        raise
                    self.outage.failed(BROKER, self.broker_target, f"consumer failed: {type(exc).__name__}: {exc}")
                    self._rebuild.set()
                    await asyncio.sleep(retry * random.uniform(0.5, 1.0))
                    retry = min(retry * 2, 10.0)
                finally:
                    self._consumer = None
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(consumer.stop(), 15 if self._fatal is None else 3)
                if self._rebuild.is_set() and not self._stop.is_set():
                    self.stats.rebuilds += 1
                    self.believed.clear()
                    self._floor.clear()
        except asyncio.CancelledError:
            if self._fatal is not None:
                main.uncancel()  # the watchdog's own cancellation, turned into the error below
                raise self._fatal_error() from None
            raise
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
        if self._fatal is not None:
            raise self._fatal_error()

    def _fatal_error(self) -> ProjectorStalled:
        return (ProjectorOutage if self._fatal_outage else ProjectorStalled)(self._fatal or "")

    async def _watch(self, main: asyncio.Task[Any]) -> None:
        """Every `check_seconds`: observe, export, and act on the watchdog's verdict."""
        while True:
            await asyncio.sleep(self.check_seconds)
            try:
                await self._probe_postgres()
                state = await self._observe()
            except Exception as exc:  # the watchdog must outlive any one bad check
                log.warning("watchdog check failed: %s", exc)
                continue
            self.observer.watchdog(state)
            if self.outage.down():
                self.watchdog.excuse()  # the outage explains the stall; its own policy decides when to give up
                reason = self.outage.exit_reason()
                if reason is not None:
                    self._fatal = reason
                    self._fatal_outage = True
                    log.error("projector gives up: %s; exiting", reason)
                    self._stop.set()
                    main.cancel()
                    return
                continue
            if state.action is Action.RECOVER:
                log.error(
                    "projector stalled: %s; rebuilding its consumer (rejoining the group), giving up after %gs",
                    state.reason,
                    self.watchdog.recovery_seconds,
                )
                self._rebuild.set()
            elif state.action is Action.EXIT:
                partitions = format_partitions(state.stalled) or "none assigned"
                self._fatal = (
                    f"still stalled {state.recovering_seconds:.0f}s after rebuilding the consumer: "
                    f"{state.reason}; stalled partitions: {partitions}"
                )
                log.error("projector stalled: %s; exiting", self._fatal)
                self._stop.set()
                main.cancel()
                return

    async def _observe(self) -> WatchdogState:
        consumer = self._consumer
        if consumer is None:  # between two consumers: nothing assigned
            return self.watchdog.observe({}, {}, self._topic_partitions(None))
        assigned = list(consumer.assignment())
        try:  # the end offsets, or with nothing assigned the topics: either way the broker answers, or not
            asked = consumer.end_offsets(assigned) if assigned else consumer.topics()
            answer = await asyncio.wait_for(asked, self.check_seconds)
            if assigned:
                self._ends.update({(tp.topic, tp.partition): o for tp, o in answer.items()})
            self.outage.succeeded(BROKER)
        except Exception as exc:  # unreachable broker: what the fetches last saw (health reports the lag unknown)
            self.outage.failed(BROKER, self.broker_target, exc)
            for tp in assigned:
                highwater = consumer.highwater(tp)
                if highwater is not None:
                    self._ends[(tp.topic, tp.partition)] = highwater
        positions: dict[TP, int] = {}
        for tp in assigned:
            key = (tp.topic, tp.partition)
            believed = self.believed.get(key)
            positions[key] = believed if believed is not None else self._floor.get(key, 0)
            end = self._ends.get(key)
            if end is not None:
                self.observer.partition_lag(key[0], key[1], max(0, end - positions[key]))
        return self.watchdog.observe(
            positions, {tp: self._ends.get(tp) for tp in positions}, self._topic_partitions(consumer)
        )

    def _topic_partitions(self, consumer: Any) -> int:
        """Partitions the topics have, as far as this process has ever seen (a
        consumer that cannot reach the broker knows none, yet they exist)."""
        known = self.watchdog.state.topic_partitions
        if consumer is None:
            return known
        return max(known, sum(len(consumer.partitions_for_topic(t) or ()) for t in self.topics))

    async def _fetch(self, consumer: Any) -> list[Record]:
        """Up to `max_records`, collected for at most `linger_s` after the earliest
        moment the first of them can have reached this process.

        Lingering lets one transaction carry a few dozen records instead of one or
        two (at moderate load the per-transaction cost exceeds the rows'). Records
        that came in while the previous batch was being written have waited since
        that batch closed: the linger counts from then, so they go as soon as the
        write is done when it took longer than the linger, and a record waits for
        at most one linger plus the writes in flight, never two lingers."""
        records: list[Record] = []

        def take(batch: dict[Any, list[Any]]) -> None:
            records.extend(
                Record(r.topic, r.partition, r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp)
                for part in batch.values()
                for r in part
            )

        take(await consumer.getmany(timeout_ms=0, max_records=self.max_records))
        if records:
            since = self._since  # already buffered: they arrived after the last batch closed
        else:
            take(await consumer.getmany(timeout_ms=200, max_records=self.max_records))
            since = time.monotonic()  # nothing was buffered: these arrived just now
        if not records:
            self._since = time.monotonic()
            return records
        deadline = since + self.linger_s
        while len(records) < self.max_records:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            take(await consumer.getmany(timeout_ms=math.ceil(left * 1000), max_records=self.max_records - len(records)))
        self._since = time.monotonic()
        return records

    async def _agreement(self, *, force: bool = False) -> None:
        """Start a refresh of the judge agreement of the rubrics committed batches marked: checked at most once
        a second (or after every batch when the throttle is under a second), each rubric at most once per
        throttle, and after a refresh of s seconds not for 9 x s seconds (AGREEMENT_IDLE_FACTOR). It runs beside
        the batches, on a connection and a thread of its own: a refresh (a bootstrap over a rubric's facts)
        never holds a batch up. `force` waits for it."""
        if force:
            if self._agreement_task is not None:
                await self._agreement_task
            await self._refresh_agreement(force=True)
            return
        now = time.monotonic()
        if now < self._agreement_next or (self._agreement_task is not None and not self._agreement_task.done()):
            return
        self._agreement_next = now + min(1.0, self.agreement_seconds)
        self._agreement_task = asyncio.create_task(self._refresh_agreement(force=False))

    async def _refresh_agreement(self, *, force: bool) -> None:
        started = time.monotonic()
        try:
            await self._refresh_agreement_once(force=force)
        finally:
            # A refresh reads a rubric's every fact, so it lasts longer as the data grows: the next one waits
            # AGREEMENT_IDLE_FACTOR times as long (a failed one too), so refreshes take at most a tenth of a core.
            idle = AGREEMENT_IDLE_FACTOR * (time.monotonic() - started)
            self._agreement_next = max(self._agreement_next, time.monotonic() + idle)

    async def _refresh_agreement_once(self, *, force: bool) -> None:
        try:
            if self._agreement_conn is None or self._agreement_conn.closed:
                self._agreement_conn = await asyncio.to_thread(self._connect)
            done, seconds = await asyncio.to_thread(
                agreement_store.timed_refresh,
                self._agreement_conn,
                throttle_seconds=self.agreement_seconds,
                force=force,
                resamples=self.agreement_resamples,
            )
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            # Logged by the outage, quietly; the rubrics stay marked and are refreshed once Postgres answers.
            self.outage.failed(POSTGRES, self.postgres_target, f"judge agreement refresh failed: {exc}")
            if self._agreement_conn is not None:
                self._agreement_conn.close()
            return
        except Exception:  # a bad figure must not stop projection: the rubric stays marked, retried later
            log.exception("judge agreement refresh failed; the rubrics stay marked")
            return
        self.stats.agreement_refreshes += done
        self.stats.seconds_agreement += seconds
        if done:
            self.stats.timings.seconds["(agreement refresh, beside the batches)"] += seconds
            self.stats.timings.rows["(agreement refresh, beside the batches)"] += done

    def _before_commit(self) -> None:
        """Fault hook: the Nth batch that gets as far as its commit dies there."""
        self._reaching_commit += 1
        if self._reaching_commit == self._fault_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def _reached(self, until_end: dict[tuple[str, int], int]) -> bool:
        return all((self.believed.get(tp) or 0) >= end for tp, end in until_end.items())

    def _rows(self, records: list[Record]) -> Rows:
        """The rows of `records`; a record that cannot be made into rows becomes a projection reject instead
        (it would fail the same way on every attempt), so the records around it are still projected."""
        rows = Rows()
        try:
            for record in records:
                project(record, self.names, self.roles, rows)
            return rows
        except Exception:  # noqa: BLE001 - one record's content; found and set aside below
            pass
        rows = Rows()
        for record in records:
            try:
                project(record, self.names, self.roles, Rows())  # alone first: a failure adds nothing to `rows`
            except Exception as exc:  # noqa: BLE001 - whatever the record holds, it must not stop projection
                error = f"{type(exc).__name__}: {exc}"
                self._rejected(record, PROJECTION_UNDECODABLE, error, None)
                rows.add("projection_rejects", reject_row(record, PROJECTION_UNDECODABLE, error))
                continue
            project(record, self.names, self.roles, rows)
        return rows

    def _rejected(self, record: Record, code: str, error: str, sqlstate: str | None) -> None:
        self.stats.rejects += 1
        self.observer.record_rejected(record.topic, code)
        first = (error.strip().splitlines() or [""])[0]
        log.error(
            "set aside %s[%d]@%d as %s%s: %s (in projection_rejects; the records after it are projected)",
            record.topic,
            record.partition,
            record.offset,
            code,
            f" ({sqlstate})" if sqlstate else "",
            first,
        )

    async def _write(self, consumer: Any, records: list[Record]) -> None:
        """Write `records` in one transaction; when Postgres refuses a row of them for its data, find the
        record (halving the batch, each part in a transaction of its own), set it aside as a projection
        reject, and write the rest. An outage never sets anything aside: the batch is retried."""
        pending = [records]
        while pending:
            chunk = pending.pop(0)
            t_project = time.perf_counter()
            rows = self._rows(chunk)
            self.stats.seconds_projecting += time.perf_counter() - t_project
            refused = await self._commit(consumer, chunk, rows)
            if refused is None:
                continue
            if not isinstance(refused, psycopg.Error):  # rewound: the records are read again
                return
            if len(chunk) > 1:
                half = len(chunk) // 2
                pending[:0] = [chunk[:half], chunk[half:]]
                continue
            await self._set_aside(consumer, chunk[0], refused)

    async def _set_aside(self, consumer: Any, record: Record, refused: psycopg.Error) -> None:
        """Commit one refused record as a reject, with its raw event when it is an input (raw events are kept
        whatever they hold); without it if even that is refused. Its offset moves on with it."""
        error, sqlstate = str(refused), refused.sqlstate
        self._rejected(record, PROJECTION_REFUSED, error, sqlstate)
        again: object = None
        for with_raw in (True, False) if self.roles.get(record.topic) in INPUT_ROLES else (False,):
            rows = Rows()
            if with_raw:
                rows.add("raw_events", raw_event_row(record))
            rows.add("projection_rejects", reject_row(record, PROJECTION_REFUSED, error, sqlstate))
            again = await self._commit(consumer, [record], rows)
            if again is None or again is _RETRY:
                return
        raise RuntimeError(
            f"Postgres refuses even the reject row of {record.topic}[{record.partition}]@{record.offset}: {again}"
        )

    async def _commit(self, consumer: Any, records: list[Record], rows: Rows) -> psycopg.Error | object | None:
        """One transaction of `rows` with the offsets after `records`: None once committed, the error when
        Postgres refused the data, `_RETRY` when the consumer was rewound (an outage or moved offsets)."""
        from aiokafka import TopicPartition

        offsets: dict[tuple[str, int], tuple[int | None, int]] = {}
        for record in records:
            tp = (record.topic, record.partition)
            believed = offsets[tp][0] if tp in offsets else self.believed.get(tp)
            offsets[tp] = (believed, record.offset + 1)
        self.stats.batches += 1
        t0 = time.perf_counter()
        conn = await self._connection()
        try:
            await asyncio.to_thread(
                write_batch,
                conn,
                self.consumer_name,
                rows,
                offsets,
                self._before_commit if self._fault_at else None,
                self.stats.timings,
                self.review_sample,
            )
        except psycopg.Error as exc:
            if refused_by_data(exc):
                return exc
            if not isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
                raise
            # The batch did not commit (or its commit was not acknowledged): rewind
            # to what is stored and write it again once Postgres answers.
            self.outage.failed(POSTGRES, self.postgres_target, f"write failed, the batch is retried: {exc}")
            conn.close()
            for tp_key in offsets:
                tp = TopicPartition(*tp_key)
                believed = self.believed.get(tp_key)
                if believed is None:
                    await consumer.seek_to_beginning(tp)
                else:
                    consumer.seek(tp, believed)
            return _RETRY
        except OffsetConflict as conflict:
            self.stats.conflicts += 1
            log.warning("offsets moved under this projector; re-seeking: %s", conflict)
            for (topic, partition), nxt in conflict.stored.items():
                tp = TopicPartition(topic, partition)
                self.believed[(topic, partition)] = nxt
                if nxt is None:
                    await consumer.seek_to_beginning(tp)
                else:
                    consumer.seek(tp, nxt)
            # Partitions without a conflict are re-read from where this batch started.
            for tp_key in offsets:
                if tp_key not in conflict.stored:
                    tp = TopicPartition(*tp_key)
                    first = min(r.offset for r in records if (r.topic, r.partition) == tp_key)
                    consumer.seek(tp, first)
            return _RETRY
        self._postgres_answered()
        self.stats.committed += 1
        if self._fault_after and self.stats.committed == self._fault_after:
            os.kill(os.getpid(), signal.SIGKILL)
        self.stats.seconds_writing += time.perf_counter() - t0
        self.stats.records += len(records)
        self.stats.rows += rows.count()
        self.observer.batch_committed(rows.count())
        for tp, (_, nxt) in offsets.items():
            self.believed[tp] = nxt
            highwater = consumer.highwater(TopicPartition(*tp))
            if highwater is not None:
                self._ends[tp] = max(highwater, self._ends.get(tp, 0))
                self.observer.partition_lag(tp[0], tp[1], max(0, highwater - nxt))
        return None


_RETRY = object()
"""`Projector._commit`'s answer when the consumer was rewound to what is stored: the batch is read again."""
