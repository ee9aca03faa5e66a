"""Bytes -> JSON object, refusing what JSON parsers silently accept.

Duplicate keys (last one wins elsewhere), NaN/Infinity literals, invalid
UTF-8, nesting past the parser's recursion limit and oversized payloads each get their own code, so a
poison message is described precisely in the dead-letter topic.
"""

from __future__ import annotations

import json
from typing import Any

from schemas.errors import ContractError

MAX_PAYLOAD_BYTES = 1_000_000
"""Documented producer limit (just under Kafka's default 1 MiB message size)."""


class _Duplicate(Exception):
    def __init__(self, key: str):
        self.key = key


class _NonFinite(Exception):
    def __init__(self, literal: str):
        self.literal = literal


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _Duplicate(key)
        obj[key] = value
    return obj


def _constant(literal: str) -> Any:
    raise _NonFinite(literal)


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant)


def decode_object(
    data: bytes | bytearray | memoryview | str | dict[str, Any],
    *,
    max_bytes: int = MAX_PAYLOAD_BYTES,
) -> dict[str, Any]:
    """Decode one event into a JSON object or raise `ContractError`."""
    if isinstance(data, dict):
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        if len(raw) > max_bytes:
            raise ContractError.single("PAYLOAD_TOO_LARGE", f"{len(raw)} bytes exceeds the {max_bytes}-byte limit")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ContractError.single("INVALID_UTF8", f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    elif isinstance(data, str):
        text = data
        if len(text) > max_bytes and len(text.encode("utf-8")) > max_bytes:
            raise ContractError.single("PAYLOAD_TOO_LARGE", f"payload exceeds the {max_bytes}-byte limit")
    else:
        raise ContractError.single("NOT_AN_OBJECT", f"expected bytes, str or dict, got {type(data).__name__}")
    if "\\u0000" in text:
        # U+0000 cannot be stored in a Postgres text column; refuse it at the edge
        # rather than let one event wedge the projector.
        raise ContractError.single("NUL_CHARACTER", "strings must not contain U+0000")
    try:
        value = _DECODER.decode(text)
    except _Duplicate as dup:
        raise ContractError.single("DUPLICATE_KEY", f"key {dup.key!r} appears twice in one object") from None
    except _NonFinite as nf:
        raise ContractError.single("NON_FINITE_NUMBER", f"{nf.literal} is not a JSON number") from None
    except json.JSONDecodeError as exc:
        raise ContractError.single("INVALID_JSON", f"{exc.msg} at line {exc.lineno} col {exc.colno}") from None
    except RecursionError:
        raise ContractError.single("NESTING_TOO_DEEP", "JSON nests too deeply") from None
    if not isinstance(value, dict):
        raise ContractError.single("NOT_AN_OBJECT", f"an event must be a JSON object, got {type(value).__name__}")
    return value
