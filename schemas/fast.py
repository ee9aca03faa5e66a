"""The fast strict path: an event's bytes validated directly by pydantic-core.

`schemas.parse`'s reference path decodes with the stdlib (with hooks for duplicate
keys and NaN) and validates the resulting dict in python mode; it is the authority
and stays as it is. This path validates the JSON bytes in one pydantic-core pass, with
a schema derived from the same models, and returns a model only when it can show
that the reference would accept the same document and build an equal model.
Otherwise it returns None and the caller runs the reference, so every rejection,
code and location still comes from the reference alone.

What pydantic-core's JSON mode would let through that the reference refuses, and how
this path rules it out:

* a duplicate key (pydantic-core keeps the last) or an unknown field (ignored, and it
  may hide NaN, duplicates, deep nesting or a lone surrogate): the keys in the bytes
  are counted (`":` once JSON whitespace is removed, at least one per key) and must
  equal the keys the models were built from (the sum of `model_fields_set` over
  the tree), which only holds when every key is a known field and none repeats;
* a `\\u0000` escape anywhere: searched for in the bytes;
* a version other than the current one, or none: an older one needs upcasting and an
  unknown minor keeps its extra fields, so only the current version, present in
  the document, is taken here;
* invalid UTF-8, NaN / Infinity, lone surrogates, integers past 4,300 digits, deep
  nesting: pydantic-core refuses these itself, and the reference then says why.

The derived schema is never looser than the models': a UUID is matched and
lower-cased inside pydantic-core with `UUID_PATTERN` (in the Rust engine `$` is the end
of the text and the classes are ASCII, so it matches exactly what the reference's
`fullmatch` does), and the models' after-validators run on the built tree instead of
from inside pydantic-core, with the same functions. Field validators that stay inside
pydantic-core (a timestamp's normalisation to UTC, an integral float read as an int)
are the models' own functions, run on the same Python values in both modes.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Annotated, Any, Generic, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import SchemaValidator, ValidationError

from schemas.types import UUID_PATTERN, check_uuid

M = TypeVar("M", bound=BaseModel)
Check = Callable[[Any], Any]

_JSON_WHITESPACE = b" \t\n\r"
# Schema keys whose values are not sub-schemas; copied as they are.
_OPAQUE = frozenset({"cls", "function", "config", "metadata", "serialization", "default", "default_factory"})


def _derive(schema: Any, checks: dict[type, list[Check]]) -> Any:
    """A copy of a pydantic core schema with UUIDs native and model after-validators lifted out."""
    if isinstance(schema, list):
        return [_derive(item, checks) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("type") == "function-after" and schema["function"].get("type") == "no-info":
        func = schema["function"]["function"]
        inner = schema["schema"]
        if func is check_uuid and inner.get("type") == "str" and set(inner) <= {"type", "metadata"}:
            return {"type": "str", "pattern": UUID_PATTERN, "to_lower": True}
        inner = _derive(inner, checks)
        if inner.get("type") == "model":  # innermost validator first, as pydantic-core runs them
            checks.setdefault(inner["cls"], []).append(func)
            return inner
        return {**schema, "schema": inner}
    return {key: value if key in _OPAQUE else _derive(value, checks) for key, value in schema.items()}


def _model_in(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(the model a field holds, whether in a list); (None, False) for anything else."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _model_in(args[0])
    if origin is Union or origin is types.UnionType:
        found = [_model_in(arg) for arg in args if arg is not type(None)]
        models = [f for f in found if f[0] is not None]
        if len(models) > 1 or (models and len(found) > 1):
            raise TypeError(f"the fast path does not support a union of models: {annotation}")
        return models[0] if models else (None, False)
    if origin is list:
        model, many = _model_in(args[0])
        if many:
            raise TypeError(f"the fast path does not support nested lists of models: {annotation}")
        return model, model is not None
    # A dict of any kind is not a model: its keys are not counted, so its documents fall back.
    return None, False


class _Unsupported(Exception):
    """A field whose strings cannot be counted from the model (a dict, Any, a mixed union)."""


def _strings_in(annotation: Any) -> str | None:
    """How a field holds JSON strings: "one", "maybe" (or null), "many" (a list), or None (never)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is str:
        return "one"
    if origin is Annotated:
        return _strings_in(args[0])
    if origin is Literal:
        if all(isinstance(a, str) for a in args):
            return "one"
        if any(isinstance(a, str) for a in args):
            raise _Unsupported(annotation)
        return None
    if isinstance(annotation, type) and (issubclass(annotation, BaseModel) or annotation in (int, float, bool)):
        return None
    if origin is Union or origin is types.UnionType:
        kinds = {_strings_in(a) for a in args if a is not type(None)}
        if kinds == {None}:
            return None
        if kinds == {"one"} and type(None) in args:
            return "maybe"
        raise _Unsupported(annotation)
    if origin is list and _strings_in(args[0]) in ("one", None):
        return "many" if _strings_in(args[0]) == "one" else None
    raise _Unsupported(annotation)


_STRING_COUNT = {"one": "1", "maybe": "({v} is not None)", "many": "len({v})"}


def _key_counter(
    model: type[BaseModel], checks: dict[type, list[Check]]
) -> tuple[Callable[[Any], tuple[int, int]], bool]:
    """Compile, for one contract, a function that runs the lifted after-validators over a built
    tree and returns (keys, strings): how many keys the tree was built from (the sum of
    `model_fields_set`) and how many JSON string values; and whether strings could be counted.

    Only what came from the document counts: a field left at its default is skipped
    (a default model instance holds no keys of the document). The function is generated as
    nested loops over the model's fields: walking the tree generically costs twice as much.
    """
    env: dict[str, Any] = {"_Replaced": _Replaced}
    names = iter(range(1, 10_000))
    countable = True

    def emit(cls: type[BaseModel], var: str, pad: str, depth: int) -> tuple[list[str], int, int]:
        """Lines for one instance `var` of `cls`, and the keys and strings every instance adds
        (the caller multiplies those by the length of a list instead of looping for them)."""
        nonlocal countable
        if depth > 8:
            raise TypeError(f"{model.__name__}: models nest too deeply (or recursively) for the fast path")
        body: list[str] = []
        fields_set, keys = f"{var}.__pydantic_fields_set__", 0
        if all(info.is_required() for info in cls.model_fields.values()):
            keys = len(cls.model_fields)  # a built instance had every required key
        else:
            local = f"f{next(names)}"
            body += [f"{pad}{local} = {fields_set}", f"{pad}n += len({local})"]
            fields_set = local
        for check in checks.get(cls, ()):
            name = f"check_{len(env)}"
            env[name] = check
            body.append(f"{pad}if {name}({var}) is not {var}: raise _Replaced")
        strings, terms = 0, []
        for field_name, info in cls.model_fields.items():
            value = f"{var}.{field_name}"
            given = "" if info.is_required() else f" and {field_name!r} in {fields_set}"
            sub, many = _model_in(info.annotation)
            if sub is not None:
                local, item = f"v{next(names)}", f"o{next(names)}"
                if many:
                    inner, sub_keys, sub_strings = emit(sub, item, pad + "        ", depth + 1)
                    block = [f"{pad}    for {item} in {local}:", *inner] if inner else []
                    block += [f"{pad}    n += {sub_keys} * len({local})"] if sub_keys else []
                    block += [f"{pad}    s += {sub_strings} * len({local})"] if sub_strings else []
                    test = local
                else:
                    inner, sub_keys, sub_strings = emit(sub, local, pad + "    ", depth + 1)
                    block = [*inner, *([f"{pad}    n += {sub_keys}"] if sub_keys else [])]
                    block += [f"{pad}    s += {sub_strings}"] if sub_strings else []
                    test = f"{local} is not None"
                if block:
                    body += [f"{pad}{local} = {value}", f"{pad}if {test}{given}:", *block]
                continue
            try:
                kind = _strings_in(info.annotation)
            except _Unsupported:
                countable = False
                continue
            if kind is None:
                continue
            # A default None or [] holds no string; any other default must not be counted.
            exact = (
                info.is_required()
                or (kind == "maybe" and info.default is None)
                or (kind == "many" and (info.default == [] or info.default_factory is list))
            )
            if kind == "one" and exact:
                strings += 1
            elif exact:
                terms.append(_STRING_COUNT[kind].format(v=value))
            else:
                terms.append(f"({_STRING_COUNT[kind].format(v=value)} if {given[5:]} else 0)")
        if terms:
            body.append(f"{pad}s += {' + '.join(terms)}")
        return body, keys, strings

    body, keys, strings = emit(model, "o0", "    ", 0)
    source = "\n".join(["def count(o0):", "    n = 0", "    s = 0", *body, f"    return n + {keys}, s + {strings}"])
    exec(source, env)  # noqa: S102 - source built above from field names only
    return env["count"], countable


class _Replaced(Exception):
    """An after-validator returned another object; the reference decides."""


def _top_config(schema: dict[str, Any]) -> Any:
    node = schema
    while node.get("type") != "model":
        node = node["schema"]
    return node.get("config")


class FastContract(Generic[M]):
    """One contract's fast path: `parse` returns the model, or None to mean "ask the reference"."""

    def __init__(self, model: type[M], version: str):
        checks: dict[type, list[Check]] = {}
        schema = _derive(model.__pydantic_core_schema__, checks)
        self.model = model
        self.version = version
        self.validator = SchemaValidator(schema, _top_config(schema))
        self._count, self._strings_countable = _key_counter(model, checks)

    def parse(self, data: object, max_bytes: int) -> M | None:
        if type(data) is bytes:
            raw = data
        elif isinstance(data, (bytes, bytearray, memoryview)):
            raw = bytes(data)
        elif isinstance(data, str):
            try:
                raw = data.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate in the text itself
                return None
        else:
            return None
        escaped = b"\\" in raw
        if len(raw) > max_bytes or (escaped and b"\\u0000" in raw):
            return None
        if not raw.isascii():
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return None
        try:
            obj = self.validator.validate_json(raw)
        except ValidationError:
            return None
        if obj.schema_version != self.version or "schema_version" not in obj.__pydantic_fields_set__:
            return None
        try:
            keys, strings = self._count(obj)
        except Exception:  # a refinement failed: the reference reports it (or raises it) itself
            return None
        if self._strings_countable and not escaped:
            # With no escape at all, every quote delimits a key or a string value.
            if raw.count(b'"') != 2 * (keys + strings):
                return None
        elif raw.translate(None, _JSON_WHITESPACE).count(b'":') != keys:
            return None
        return obj
