"""Constrained scalar types shared by every contract.

Strings stay strings (UUIDs are lower-cased, timestamps keep their text) so a
validated event re-serialises to the same JSON a producer sent.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_UUID_RE = re.compile(UUID_PATTERN)
SCREAMING_SNAKE = r"^[A-Z_]+$"
LOWER_SNAKE = r"^[a-z_]+$"
SCHEMA_VERSION_PATTERN = r"^\d+\.\d+$"


def check_uuid(value: str) -> str:
    if not _UUID_RE.match(value):
        raise PydanticCustomError("INVALID_UUID", "must be a UUID like 8-4-4-4-12 hex digits")
    return value.lower()


def _check_timestamp(value: str) -> str:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise PydanticCustomError(
            "INVALID_TIMESTAMP", "must be an ISO 8601 date-time, e.g. 2026-03-31T12:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        raise PydanticCustomError("INVALID_TIMESTAMP", "must carry a time zone (Z or +hh:mm)")
    return value


Uuid = Annotated[str, AfterValidator(check_uuid), Field(json_schema_extra={"format": "uuid"})]
Timestamp = Annotated[str, AfterValidator(_check_timestamp), Field(json_schema_extra={"format": "date-time"})]
FlagCode = Annotated[str, Field(pattern=SCREAMING_SNAKE)]
Key = Annotated[str, Field(pattern=LOWER_SNAKE)]
SchemaVersion = Annotated[str, Field(pattern=SCHEMA_VERSION_PATTERN)]


def parse_timestamp(value: str) -> datetime:
    """The aware datetime of a validated `Timestamp` string."""
    return datetime.fromisoformat(value)
