"""Bytes -> JSON object, refusing what JSON parsers silently accept.

Duplicate keys (last one wins elsewhere), NaN/Infinity literals, invalid
UTF-8, nesting past the parser's recursion limit and oversized payloads each get their own code, so a
poison message is described precisely in the dead-letter topic.

A lone surrogate (`"\\ud800"` with no partner) decodes to a Python string that no
UTF-8 encoder, Postgres column or `model_dump_json` accepts, so it is refused here,
in any string or key, as `INVALID_VALUE` at its location; an integer literal past
Python's 4,300-digit conversion limit is `OUT_OF_RANGE`.
"""

from __future__ import annotations

import json
import re
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
_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_at(value: Any, loc: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """Where the first lone surrogate sits in a decoded value (a key counts as its own location)."""
    if isinstance(value, str):
        return loc if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and _SURROGATE.search(key):
                return (*loc, key)
            found = _surrogate_at(item, (*loc, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _surrogate_at(item, (*loc, i))
            if found is not None:
                return found
    return None


def _refuse_surrogates(doc: dict[str, Any]) -> None:
    loc = _surrogate_at(doc)
    if loc is not None:
        raise ContractError.single(
            "INVALID_VALUE", "a lone UTF-16 surrogate is not a Unicode character and cannot be stored", loc
        )


def decode_object(
    data: bytes | bytearray | memoryview | str | dict[str, Any],
    *,
    max_bytes: int = MAX_PAYLOAD_BYTES,
    allow_surrogates: bool = False,
) -> dict[str, Any]:
    """Decode one event into a JSON object or raise `ContractError`.

    `allow_surrogates=True` is for reading fields out of an event already refused
    (e.g. the claim_id of a dead-lettered check), never for accepting one.
    """
    if isinstance(data, dict):
        if not allow_surrogates:
            _refuse_surrogates(data)
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
        if len(text) > max_bytes and len(text.encode("utf-8", "surrogatepass")) > max_bytes:
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
    except ValueError as exc:  # int() past sys.get_int_max_str_digits()
        raise ContractError.single("OUT_OF_RANGE", f"integer literal too long: {exc}") from None
    if not isinstance(value, dict):
        raise ContractError.single("NOT_AN_OBJECT", f"an event must be a JSON object, got {type(value).__name__}")
    # Lone surrogates come from \\uD800-\\uDFFF escapes or, in a str input, from the text itself.
    if allow_surrogates:
        return value
    if "\\ud" in text or "\\uD" in text or (isinstance(data, str) and _SURROGATE.search(text)):
        _refuse_surrogates(value)
    return value
