"""Constrained scalar types shared by every contract (docs/contract.md says the same for producers).

Strings stay strings, in one canonical form: UUIDs are lower-cased, and a timestamp becomes the UTC text of the
instant it names (`2026-11-30T23:30:00.5+01:30` -> `2026-11-30T22:00:00.5Z`). A producer that already sends
lower-case UUIDs and UTC `Z` timestamps gets back the same JSON it sent; any other producer gets the canonical
text, and the raw event log keeps its bytes as received (DESIGN decision 4).

Every pattern matches the whole string, in ASCII: `[0-9]`, never `\\d` (which matches any Unicode digit in both
Python's `re` and the Rust engine pydantic-core uses), and Python's `re` only ever through `fullmatch` (its `$`
also matches before a final newline). The exported JSON Schema carries the same patterns, ended with
`$(?!\\n)` for validators built on Python's `re` (see `json_pattern`).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_UUID_RE = re.compile(UUID_PATTERN)
SCREAMING_SNAKE = r"^[A-Z_]+$"
LOWER_SNAKE = r"^[a-z_]+$"
SCHEMA_VERSION_PATTERN = r"^[0-9]+\.[0-9]+$"


def json_pattern(pattern: str) -> str:
    """`pattern` (anchored `^...$`) as the exported JSON Schema states it.

    JSON Schema patterns are ECMA-262, where `$` is the end of the text; the `(?!\\n)` changes nothing there
    but keeps validators built on Python's `re.search` (the `jsonschema` package) from accepting a trailing
    newline. pydantic-core's Rust engine has no look-ahead and needs none, so the models keep `pattern`.
    """
    if not (pattern.startswith("^") and pattern.endswith("$")):
        raise ValueError(f"not anchored at both ends: {pattern}")
    return pattern + r"(?!\n)"


def check_uuid(value: str) -> str:
    if not _UUID_RE.fullmatch(value):
        raise PydanticCustomError("INVALID_UUID", "must be a UUID like 8-4-4-4-12 hex digits")
    return value.lower()


# RFC 3339's `date-time` (section 5.6, whose notes allow a lower-case `t` / `z` and a space for the `T`).
_TIMESTAMP_RE = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})[Tt ]"
    r"(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]+))?"
    r"(?:[Zz]|(?P<sign>[+-])(?P<off_hour>[0-9]{2}):(?P<off_minute>[0-9]{2}))"
)
_TIMESTAMP_HELP = "an RFC 3339 date-time is due, e.g. 2026-11-30T22:00:00Z or 2026-11-30T23:00:00.5+01:00"

# The same profile as one JSON Schema pattern, calendar included (day of month, leap years, years 0001-9999).
_YEAR = r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = (
    r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    r"|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
_OFFSET = r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
TIMESTAMP_PATTERN = rf"^(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)[Tt ]{_TIME}{_OFFSET}$"


def _invalid_timestamp(why: str) -> PydanticCustomError:
    return PydanticCustomError("INVALID_TIMESTAMP", f"{why}: {_TIMESTAMP_HELP}")


_CANONICAL_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?Z")
"""Text already in the canonical form (what judges' clients mostly send): it is its own canonical text once its
date and time exist."""


def _check_timestamp(value: str) -> str:
    """The canonical UTC text of an RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS[.f]Z`.

    Postgres stores the instant, so the text is made to name it once: the offset is applied, the separators
    become `T` and `Z`, and the fraction keeps the digits sent, cut after the sixth (microseconds, what Python
    and Postgres hold; cut, never rounded, so no carry into the next second). A leap second (`:60`) is refused.
    Canonical text is returned as it is once its calendar checks out (a property test holds it equal to the
    general path)."""
    if _CANONICAL_RE.fullmatch(value) is not None:
        try:
            datetime(int(value[:4]), int(value[5:7]), int(value[8:10]), int(value[11:13]), int(value[14:16]),
                     int(value[17:19]))  # fmt: skip
        except ValueError:
            pass  # no such date or time: the general path words the error
        else:
            return value
    return _general_timestamp(value)


def _general_timestamp(value: str) -> str:
    """`_check_timestamp` for any RFC 3339 text: offsets, other separators, longer fractions."""
    m = _TIMESTAMP_RE.fullmatch(value)
    if m is None:
        raise _invalid_timestamp("not YYYY-MM-DDTHH:MM:SS[.fraction] then Z or +HH:MM")
    fraction = (m["fraction"] or "")[:6]
    try:
        local = datetime(
            int(m["year"]), int(m["month"]), int(m["day"]),
            int(m["hour"]), int(m["minute"]), int(m["second"]),
            int(fraction.ljust(6, "0")),
        )  # fmt: skip
    except ValueError:
        raise _invalid_timestamp("no such date or time (leap seconds are refused)") from None
    offset = timedelta()
    if m["sign"] is not None:
        hours, minutes = int(m["off_hour"]), int(m["off_minute"])
        if hours > 23 or minutes > 59:
            raise _invalid_timestamp("no such UTC offset")
        offset = timedelta(hours=hours, minutes=minutes) * (-1 if m["sign"] == "-" else 1)
    try:
        utc = local - offset
    except OverflowError:
        raise _invalid_timestamp("outside years 0001-9999 once in UTC") from None
    text = f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
    return f"{text}.{fraction}Z" if fraction else f"{text}Z"


def _integral_float_to_int(value: object) -> object:
    """JSON has one number type: `70.0` and `7e1` are the integer 70, as JSON Schema's `integer` says.

    Only a float with no fractional part becomes an int; anything else (70.5, "70", true, NaN) is left to the
    strict int validation after it, which refuses it as before.
    """
    if type(value) is float and value.is_integer():
        return int(value)
    return value


IntegralFloat = BeforeValidator(_integral_float_to_int)
"""Metadata for an int field that takes integral floats. Put it after the constraints,
`Annotated[int, Field(ge=0), IntegralFloat]`: constraints placed after a before-validator would no
longer sit on the int schema, and the exported JSON Schema would lose its `minimum` / `maximum`."""

Integer = Annotated[int, IntegralFloat]
Uuid = Annotated[
    str, AfterValidator(check_uuid), Field(json_schema_extra={"format": "uuid", "pattern": json_pattern(UUID_PATTERN)})
]
Timestamp = Annotated[
    str,
    AfterValidator(_check_timestamp),
    Field(json_schema_extra={"format": "date-time", "pattern": json_pattern(TIMESTAMP_PATTERN)}),
]
FlagCode = Annotated[str, Field(pattern=SCREAMING_SNAKE, json_schema_extra={"pattern": json_pattern(SCREAMING_SNAKE)})]
Key = Annotated[str, Field(pattern=LOWER_SNAKE, json_schema_extra={"pattern": json_pattern(LOWER_SNAKE)})]
SchemaVersion = Annotated[
    str, Field(pattern=SCHEMA_VERSION_PATTERN, json_schema_extra={"pattern": json_pattern(SCHEMA_VERSION_PATTERN)})
]


def utc_timestamp(value: str) -> str:
    """The canonical UTC text of an RFC 3339 date-time (what the contract stores); ValueError if it is not one."""
    return _check_timestamp(value)


def parse_timestamp(value: str) -> datetime:
    """The aware datetime of a validated `Timestamp` string (or of judgeflow's own ISO text in stored state)."""
    return datetime.fromisoformat(value)
