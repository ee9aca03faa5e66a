"""The worker's agents read each record's raw bytes from its message, so its channels skip Faust's decoding.

A Faust channel runs every record through its schema's `decode`: key and value loaded by their serializers
("raw" here: the bytes as they are) and wrapped in an event. For the raw key and value the stages take,
that was 7% of the worker's main thread on a claim backlog (bench/PROFILE.md). `RawRecords` makes the same
event from the message without the serializer registry.
"""

from __future__ import annotations

from typing import Any

import faust


class RawRecords(faust.Schema):
    """A schema whose events carry the message's key and value bytes unchanged (None stays None)."""

    def __init__(self) -> None:
        super().__init__(key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")

    def compile(self, app: Any, *, default_propagate: bool = False, **_errors: Any) -> Any:
        create_event = app.create_event

        async def decode(message: Any, *, propagate: bool = default_propagate) -> Any:
            return create_event(message.key, message.value, message.headers, message)

        return decode
