"""Records kept in table state per input, so a redelivered input re-sends
exactly what it produced the first time (same bytes, same event ids)."""

from __future__ import annotations

from typing import Any

from streams.edge import Outgoing


def to_dict(record: Outgoing) -> dict[str, Any]:
    return {
        "role": record.role,
        "key": record.key.decode() if record.key is not None else None,
        "value": record.value.decode(),
        "headers": [[k, v.decode()] for k, v in record.headers],
    }


def from_dict(doc: dict[str, Any]) -> Outgoing:
    return Outgoing(
        role=doc["role"],
        key=doc["key"].encode() if doc["key"] is not None else None,
        value=doc["value"].encode(),
        headers=[(k, v.encode()) for k, v in doc["headers"]],
    )
