"""The record envelope every stage speaks: where a record came from, what to send, and how times are written.

One place for the source coordinates (`topic/partition/offset`), the headers judgeflow adds, and the ISO-8601
form of timestamps in every emitted document, so no stage formats or parses them on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

H_SOURCE = "judgeflow-source"
H_SOURCE_VERSION = "judgeflow-source-version"
H_WARNINGS = "judgeflow-warnings"
H_ERROR_CODES = "judgeflow-error-codes"

Headers = list[tuple[str, bytes]]


@dataclass(frozen=True)
class SourceRef:
    """Where an input record was read: its coordinates name it in dead letters and raw-event rows."""

    topic: str
    partition: int
    offset: int
    key: bytes | None = None

    def coordinates(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"

    @classmethod
    def parse(cls, coordinates: str, key: bytes | None = None) -> SourceRef:
        """The inverse of `coordinates()`; topic names may contain '/', so split from the right."""
        rest, _, offset = coordinates.rpartition("/")
        topic, _, partition = rest.rpartition("/")
        try:
            return cls(topic, int(partition), int(offset), key)
        except ValueError:
            return cls(coordinates or "unknown", -1, -1, key)


@dataclass(frozen=True)
class Outgoing:
    """A record to publish; `role` names a field of `TopicNames`."""

    role: str
    key: bytes | None
    value: bytes
    headers: Headers = field(default_factory=list)


def iso(ts: datetime) -> str:
    """UTC timestamps as emitted everywhere: ISO-8601 with a `Z`."""
    if ts.tzinfo is not UTC:  # the clock's own times are UTC already
        ts = ts.astimezone(UTC)
    return ts.isoformat().replace("+00:00", "Z")


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def micros(ts: datetime) -> int:
    """A timestamp as table state keeps it: whole microseconds since the epoch (UTC), exact, so
    `iso(from_micros(micros(ts))) == iso(ts)` and an emitted time regenerated from state has the same bytes."""
    return (ts.astimezone(UTC) - EPOCH) // _MICROSECOND


def from_micros(value: int) -> datetime:
    return EPOCH + value * _MICROSECOND


def utc_now() -> datetime:
    """The default clock of long-running stages; tests pass their own."""
    return datetime.now(UTC)
