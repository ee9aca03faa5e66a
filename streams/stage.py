"""What every stage takes and returns: a plain record in, the state change and the records to publish out.

Stages (`streams.claims.ClaimStage`, `streams.runs.RunStage`, `streams.rubrics.RubricStage`) are plain
objects with no Faust import: the wiring in `streams.app` decodes a Kafka record into an `Inbound`, reads the
key's state from a table, calls `handle`, and writes back what the returned `Step` says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schemas import RubricVersion
from streams.envelope import H_SOURCE, Outgoing, SourceRef

Clock = Callable[[], datetime]
RubricLookup = Callable[[str], RubricVersion | None]
State = dict[str, Any]


@dataclass(frozen=True)
class Inbound:
    """One consumed record: the role of the topic it came from (a `TopicNames` field) and its parts."""

    role: str
    key: bytes | None
    value: bytes | None
    src: SourceRef
    headers: dict[str, bytes] = field(default_factory=dict)
    timestamp: float | None = None
    """The Kafka record's timestamp (seconds since the epoch), when known."""

    def origin(self) -> SourceRef:
        """Where the record entered judgeflow: a re-keyed record names its original coordinates."""
        coordinates = self.headers.get(H_SOURCE)
        if coordinates is None:
            return self.src
        return SourceRef.parse(coordinates.decode(errors="replace"), self.src.key)


@dataclass(frozen=True)
class Step:
    """A stage's answer: records to publish and, if `changed`, the key's new state (None deletes it)."""

    records: list[Outgoing]
    state: State | None = None
    changed: bool = False
    late: bool = False
    """The input came for a run already final or a claim already decided (counted by the wiring)."""

    @classmethod
    def emit(cls, records: list[Outgoing], *, late: bool = False) -> Step:
        return cls(records, late=late)

    @classmethod
    def store(cls, state: State | None, records: list[Outgoing]) -> Step:
        return cls(records, state, True)


class HoldBudget:
    """One bound on the events this worker holds (outputs waiting for their run or rubric, checks waiting for
    their rubric), across every key: past it a new event is dead-lettered (`HOLD_LIMIT_EXCEEDED`), never
    dropped. The wiring keeps the per-key counts up to date from the states it stores."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.by_key: dict[str, int] = {}
        self.total = 0

    def note(self, key: str, held: int) -> None:
        self.total += held - self.by_key.get(key, 0)
        if held:
            self.by_key[key] = held
        else:
            self.by_key.pop(key, None)

    def full(self) -> bool:
        return self.total >= self.limit
