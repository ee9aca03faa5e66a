"""The projector: Kafka topics -> Postgres read models, exactly once in effect.

A plain aiokafka consumer group (no Kafka offset commits): the offsets live
in `projection_offsets`, written in the same transaction as the rows, so a
crash between the database commit and anything else neither loses nor
duplicates a row. On assignment, and whenever the stored offsets are not
where this process left them (a rebuild swapped the schema in, or another
projector took over), it seeks to the stored offsets.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from judgeflow import metrics
from projections.migrate import DEFAULT_SCHEMA, check_schema_name
from projections.rows import Record, Rows, project
from projections.store import OffsetConflict, stored_offsets, write_batch
from streams.topics import TopicNames

log = logging.getLogger("judgeflow.projector")

PROJECTED_ROLES = (
    "rubrics", "runs", "judge_outputs", "checks", "reviews", "judge_outputs_valid", "checks_valid",
    "invalid", "reconciled", "done", "second_judge", "human_review",
)  # fmt: skip

FAULT_KILL_IN_BATCH = "JUDGEFLOW_FAULT_KILL_IN_BATCH"
"""Tests only: SIGKILL this process inside the Nth batch's transaction that gets
past the offset check, after its rows are written and before it commits."""
FAULT_KILL_AFTER_COMMIT = "JUDGEFLOW_FAULT_KILL_AFTER_COMMIT"
"""Tests only: SIGKILL this process right after its Nth committed batch, before
the consumer moves on (where a Kafka-committing projector would commit offsets)."""


@dataclass
class ProjectorStats:
    batches: int = 0
    committed: int = 0
    records: int = 0
    rows: int = 0
    conflicts: int = 0
    reconnects: int = 0
    seconds_writing: float = 0.0
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
        max_records: int = 2000,
        linger_ms: float = 20.0,
        client: dict[str, Any] | None = None,
    ):
        self.bootstrap = bootstrap
        self.database_url = database_url
        self.names = names
        self.schema = check_schema_name(schema)
        self.consumer_name = consumer_name
        self.group_id = group_id
        self.max_records = max_records
        self.client = client or {}
        self.topics = [getattr(names, r) for r in PROJECTED_ROLES]
        self.roles = {getattr(names, r): r for r in PROJECTED_ROLES}
        self.believed: dict[tuple[str, int], int | None] = {}
        self.stats = ProjectorStats()
        self._stop = asyncio.Event()
        self._conn: psycopg.Connection | None = None
        self._fault_at = int(os.environ.get(FAULT_KILL_IN_BATCH, "0") or 0)
        self._fault_after = int(os.environ.get(FAULT_KILL_AFTER_COMMIT, "0") or 0)
        self._reaching_commit = 0
        self.max_records = int(os.environ.get("JUDGEFLOW_PROJECTOR_BATCH", max_records))
        self.linger_s = float(os.environ.get("JUDGEFLOW_PROJECTOR_LINGER_MS", linger_ms)) / 1000

    def stop(self) -> None:
        self._stop.set()

    def _connect(self) -> psycopg.Connection:
        # No server-side prepared statements: a prepared plan keeps pointing at the
        # old tables after a rebuild renames schemas; a fresh parse follows the name.
        return psycopg.connect(self.database_url, options=f"-c search_path={self.schema}", autocommit=True,
                               prepare_threshold=None, connect_timeout=5)  # fmt: skip

    async def _connection(self) -> psycopg.Connection:
        """The open connection, or a new one: retried with capped backoff while
        Postgres is unreachable (the consumer simply waits meanwhile)."""
        delay = 0.2
        while self._conn is None or self._conn.closed:
            try:
                self._conn = await asyncio.to_thread(self._connect)
                if delay > 0.2:
                    log.info("reconnected to Postgres")
            except psycopg.OperationalError as exc:
                self.stats.reconnects += 1
                log.warning("Postgres unreachable (%s); retrying in %.1fs", str(exc).strip().splitlines()[0], delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        return self._conn

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
        for tp in tps:
            nxt = stored.get((tp.topic, tp.partition))
            self.believed[(tp.topic, tp.partition)] = nxt
            if nxt is None:
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, nxt)

    async def run(self, *, until_end: dict[tuple[str, int], int] | None = None) -> ProjectorStats:
        """Project until stopped, or (rebuild) until every partition reaches `until_end`."""
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

        await self._connection()
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

        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=None if until_end is not None else self.group_id,
            enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=self.max_records,
            **self.client,
        )  # fmt: skip
        await consumer.start()
        try:
            if until_end is not None:
                tps = [TopicPartition(t, p) for t, p in until_end]
                consumer.assign(tps)
                await self._seek_to_stored(consumer, tps)
            else:
                consumer.subscribe(self.topics, listener=Listener())
            while not self._stop.is_set():
                if until_end is not None and self._reached(until_end):
                    break
                records = await self._fetch(consumer)
                if records:
                    await self._write(consumer, records)
        finally:
            await consumer.stop()
            if self._conn is not None:
                self._conn.close()
        return self.stats

    async def _fetch(self, consumer: Any) -> list[Record]:
        """Up to `max_records`; once the first records are in, keep collecting for
        `linger_s`. One transaction then carries a few dozen records instead of
        one or two, which at moderate load cost more CPU than the rows."""
        records: list[Record] = []
        deadline = None
        while len(records) < self.max_records:
            timeout = 0.2 if deadline is None else deadline - time.monotonic()
            if timeout <= 0:
                break
            batch = await consumer.getmany(timeout_ms=int(timeout * 1000), max_records=self.max_records - len(records))
            records.extend(
                Record(r.topic, r.partition, r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp)
                for part in batch.values() for r in part
            )  # fmt: skip
            if not records:
                break
            if deadline is None:
                deadline = time.monotonic() + self.linger_s
        return records

    def _before_commit(self) -> None:
        """Fault hook: the Nth batch that gets as far as its commit dies there."""
        self._reaching_commit += 1
        if self._reaching_commit == self._fault_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def _reached(self, until_end: dict[tuple[str, int], int]) -> bool:
        return all((self.believed.get(tp) or 0) >= end for tp, end in until_end.items())

    async def _write(self, consumer: Any, records: list[Record]) -> None:
        from aiokafka import TopicPartition

        rows = Rows()
        offsets: dict[tuple[str, int], tuple[int | None, int]] = {}
        for record in records:
            project(record, self.names, self.roles, rows)
            tp = (record.topic, record.partition)
            believed = offsets[tp][0] if tp in offsets else self.believed.get(tp)
            offsets[tp] = (believed, record.offset + 1)
        self.stats.batches += 1
        t0 = time.perf_counter()
        conn = await self._connection()
        try:
            await asyncio.to_thread(write_batch, conn, self.consumer_name, rows, offsets,
                                    self._before_commit if self._fault_at else None)  # fmt: skip
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            # The batch did not commit (or its commit was not acknowledged): rewind
            # to what is stored and write it again once Postgres answers.
            log.warning("Postgres write failed (%s); will retry the batch", str(exc).strip().splitlines()[0])
            conn.close()
            for tp_key in offsets:
                tp = TopicPartition(*tp_key)
                believed = self.believed.get(tp_key)
                if believed is None:
                    await consumer.seek_to_beginning(tp)
                else:
                    consumer.seek(tp, believed)
            return
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
            return
        self.stats.committed += 1
        if self._fault_after and self.stats.committed == self._fault_after:
            os.kill(os.getpid(), signal.SIGKILL)
        self.stats.seconds_writing += time.perf_counter() - t0
        self.stats.records += len(records)
        self.stats.rows += rows.count()
        metrics.PROJECTED_ROWS.inc(rows.count())
        metrics.PROJECTED_BATCHES.inc()
        for tp, (_, nxt) in offsets.items():
            self.believed[tp] = nxt
            highwater = consumer.highwater(TopicPartition(*tp))
            if highwater is not None:
                metrics.PROJECTION_LAG.labels(tp[0], str(tp[1])).set(max(0, highwater - nxt))
