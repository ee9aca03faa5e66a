"""Every worker's copy of `judge.rubrics` (a hand-made global table).

Rubrics are keyed by rubric_version_id, not by run or claim, so they are not
co-partitioned with the state that needs them: each worker reads the whole
compacted topic with an unassigned consumer, from the beginning, and keeps
the latest valid version of each. Agents wait for `ready` (caught up to the
end offsets seen at start) before they process anything.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from schemas import ContractError, RubricVersion, parse_rubric
from streams.edge import dead_letter, require_key
from streams.stage import Inbound, State, Step

log = logging.getLogger("judgeflow.rubrics")


class RubricCache:
    def __init__(self, bootstrap: str, topic: str, **client: Any):
        self.bootstrap = bootstrap
        self.topic = topic
        self.client = client
        self.rubrics: dict[str, RubricVersion] = {}
        self.ready = asyncio.Event()
        self.version = 0

    def get(self, rubric_version_id: str) -> RubricVersion | None:
        return self.rubrics.get(rubric_version_id)

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        if value is None:
            if key is not None:
                self.rubrics.pop(key.decode(errors="replace"), None)
            return
        try:
            rubric = parse_rubric(value)
        except ContractError as err:
            log.warning("ignoring invalid rubric (dead-lettered by validate_rubrics): %s", err.codes)
            return
        if key is not None and key.decode(errors="replace") != rubric.rubric_version_id:
            log.warning(
                "ignoring rubric %s under key %r (dead-lettered as KEY_MISMATCH)", rubric.rubric_version_id, key
            )
            return
        self.rubrics[rubric.rubric_version_id] = rubric
        self.version += 1

    async def run(self) -> None:
        from aiokafka import AIOKafkaConsumer

        # No group: the consumer is assigned every partition and reads from the start.
        consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **self.client,
        )
        await consumer.start()
        try:
            while not consumer.assignment():
                await self._consume(consumer)
            tps = sorted(consumer.assignment())
            end = await consumer.end_offsets(tps)
            while True:
                if not self.ready.is_set() and await self._caught_up(consumer, tps, end):
                    log.info("rubric cache ready with %d rubrics", len(self.rubrics))
                    self.ready.set()
                await self._consume(consumer)
        finally:
            await consumer.stop()

    async def _consume(self, consumer: Any) -> None:
        batch = await consumer.getmany(timeout_ms=200)
        for records in batch.values():
            for record in records:
                self.apply(record.key, record.value)

    @staticmethod
    async def _caught_up(consumer: Any, tps: list[Any], end: dict[Any, int]) -> bool:
        for tp in tps:
            if await consumer.position(tp) < end[tp]:
                return False
        return True


class RubricStage:
    """Dead-letter invalid rubric versions; valid ones feed every worker's `RubricCache`."""

    name = "validate_rubrics"
    reads: tuple[str, ...] = ("rubrics",)
    writes: tuple[str, ...] = ("invalid",)
    does = "dead-letter invalid rubric versions and those keyed by another id (valid ones feed the rubric cache)"

    def handle(self, record: Inbound, stored: State | None) -> Step:
        if record.value is None:
            return Step.emit([])  # a tombstone retires a rubric version
        try:
            rubric = parse_rubric(record.value)
        except ContractError as err:
            return Step.emit([dead_letter(record.value, record.src, "rubric", err)])
        try:
            require_key(record.key, rubric.rubric_version_id, "rubric_version_id")
        except ContractError as mismatch:
            return Step.emit([dead_letter(record.value, record.src, "rubric", mismatch)])
        return Step.emit([])
