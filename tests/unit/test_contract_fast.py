"""Differential: the fast strict path and the reference path give the same answers.

The public parsers try `schemas.fast` first and fall back to the reference, so two
properties are checked on valid documents and on mutations of them (duplicate keys,
NaN / Infinity, lone surrogates, huge integers, deep nesting, wrong types, numbers
and booleans sent as strings, unknown fields, odd whitespace and escapes, integral floats,
timestamps to normalise or refuse, versions with a newline or Unicode digits):

* the public parser and the reference agree: accepted by both with equal models
  (and equal JSON dumps, source versions and warnings), or refused by both with the
  same codes and errors;
* whenever the fast path itself returns a model, the reference accepts the same
  input and builds an equal model (the fast path never accepts on its own).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from judgeflow import workload
from schemas import ContractError, EvaluationRunStarted, HumanReview, RubricVersion, parse
from schemas.parse import (
    reference_parse_simple,
    reference_validate_claim_check,
    reference_validate_judge_output,
    validate_claim_check,
    validate_judge_output,
)


class Pairs(list):  # type: ignore[type-arg]
    """A JSON object as [key, value] pairs, so a key can appear twice."""


@dataclass
class Raw:
    """Text written into the JSON as it is (NaN, 4,301-digit integers, deep nesting)."""

    text: str


def to_pairs(value: Any) -> Any:
    if isinstance(value, dict):
        return Pairs([[k, to_pairs(v)] for k, v in value.items()])
    if isinstance(value, list):
        return [to_pairs(v) for v in value]
    return value


@dataclass
class Style:
    item: str = ", "
    colon: str = ": "
    ensure_ascii: bool = True


def write(value: Any, style: Style) -> str:
    if isinstance(value, Pairs):
        body = style.item.join(f"{write(k, style)}{style.colon}{write(v, style)}" for k, v in value)
        return "{" + body + "}"
    if isinstance(value, list):
        return "[" + style.item.join(write(v, style) for v in value) + "]"
    if isinstance(value, Raw):
        return value.text
    return json.dumps(value, ensure_ascii=style.ensure_ascii)


STYLES = [
    Style(),
    Style(",", ":"),
    Style(",\n  ", ": "),
    Style(", ", " : "),
    Style(",", "\t:\r\n"),
    Style(", ", ": ", ensure_ascii=False),
]


def slots(value: Any, found: list[tuple[Any, Any]] | None = None) -> list[tuple[Any, Any]]:
    """(container, index) of every value below the root, objects and arrays included
    (in an object, container[index] is the [key, value] pair)."""
    found = [] if found is None else found
    if isinstance(value, Pairs):
        for i, pair in enumerate(value):
            found.append((value, i))
            slots(pair[1], found)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.append((value, i))
            slots(item, found)
    return found


def objects(value: Any) -> list[Pairs]:
    found = [value] if isinstance(value, Pairs) else []
    for container, index in slots(value):
        if isinstance(get(container, index), Pairs):
            found.append(get(container, index))
    return found


def get(container: Any, index: int) -> Any:
    return container[index][1] if isinstance(container, Pairs) else container[index]


def put(container: Any, index: int, value: Any) -> None:
    if isinstance(container, Pairs):
        container[index][1] = value
    else:
        container[index] = value


json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
ODD_STRINGS = ["\ud800", "a\udfffb", "\udc00\ud800", "\ud83d\ude00", "x\x00y", 'say "hi": ok', "line\nbreak", "é ü",
               "\\u0000", "", "2026-03-31T12:00:00Z", "8E7A1C2D-1111-4222-8333-944455556666\n"]  # fmt: skip
VERSIONS = ["1.0", "2.0", "2.1", "2.9", "1.4", "3.0", "0.1", "2.1\n", "٢.١", "２.１", None, 2.1, "missing"]
MUTATIONS = ["none", "dup", "dup_same", "nonfinite", "surrogate", "huge", "deep", "wrong", "stringify", "extra",
             "delete", "odd_string", "version", "escaped_key", "integral", "timestamp"]  # fmt: skip
TIMESTAMP_KEYS = {"judge_started_at", "judge_completed_at", "checked_at", "created_at", "started_at"}
# Normalised (offsets, separators, long fractions) or refused (not RFC 3339, no such day, Unicode digits).
TIMESTAMPS = ["2026-11-30 23:00:00+01:00", "2026-11-30t22:00:00.1234567z", "2026-12-01T00:00:00.5+02:00",
              "2026-11-30T22:00:00-00:00", "2026-11-30T23Z", "2026-W48-1T22:00:00Z", "2026-11-30T22:00:00,5Z",
              "20261130T220500Z", "2026-11-31T22:00:00Z", "2026-11-30T22:00:00Z\n", "٢٠٢٦-11-30T22:00:00Z"]  # fmt: skip


def mutate(doc: Any, data: st.DataObject, how: str) -> None:
    if how == "none":
        return
    if how in ("dup", "dup_same", "extra", "escaped_key"):
        target = data.draw(st.sampled_from(objects(doc)))
        if how == "extra":
            target.append([data.draw(st.text(max_size=8)), to_pairs(data.draw(json_values))])
        elif target and how == "escaped_key":
            pair = data.draw(st.sampled_from(target))
            if isinstance(pair[0], str) and pair[0]:
                pair[0] = Raw('"' + f"\\u{ord(pair[0][0]):04x}" + json.dumps(pair[0][1:])[1:])
        elif target:
            key, value = data.draw(st.sampled_from(target))
            copy = value if how == "dup_same" else to_pairs(data.draw(json_values))
            target.insert(data.draw(st.integers(0, len(target))), [key, copy])
        return
    places = slots(doc)
    if how == "integral":  # 70.0, 7e1, 700e-1 are the integer 70 on both paths; 70.5 is refused by both
        ints = [(c, i) for c, i in places if type(get(c, i)) is int]
        if ints:
            container, index = data.draw(st.sampled_from(ints))
            n = get(container, index)
            put(container, index, Raw(data.draw(st.sampled_from([f"{n}.0", f"{n}e0", f"{n * 10}e-1", f"{n}.5"]))))
        return
    if how == "timestamp":
        stamps = [
            (c, i) for c, i in places if isinstance(c, Pairs) and isinstance(c[i][0], str) and c[i][0] in TIMESTAMP_KEYS
        ]
        if stamps:
            container, index = data.draw(st.sampled_from(stamps))
            put(container, index, data.draw(st.sampled_from(TIMESTAMPS)))
        return
    if how == "version":
        doc[:] = [p for p in doc if p[0] != "schema_version"]
        version = data.draw(st.sampled_from(VERSIONS))
        if version != "missing" or data.draw(st.booleans()):
            doc.insert(0, ["schema_version", version])
        return
    container, index = data.draw(st.sampled_from(places))
    current = get(container, index)
    if how == "delete":
        del container[index]
    elif how == "nonfinite":
        put(container, index, Raw(data.draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999"]))))
    elif how == "surrogate":
        put(container, index, data.draw(st.sampled_from(ODD_STRINGS[:4])))
    elif how == "odd_string":
        put(container, index, data.draw(st.sampled_from(ODD_STRINGS)))
    elif how == "huge":
        digits = data.draw(st.sampled_from([19, 20, 300, 4300, 4301, 6000]))
        put(container, index, Raw(data.draw(st.sampled_from(["", "-"])) + "9" * digits))
    elif how == "deep":
        depth = data.draw(st.sampled_from([3, 150, 199, 200, 201, 600, 1500]))
        kind = data.draw(st.sampled_from(["list", "object"]))
        put(container, index, Raw("[" * depth + "]" * depth if kind == "list" else '{"a":' * depth + "1" + "}" * depth))
    elif how == "wrong":
        put(container, index, to_pairs(data.draw(json_values)))
    elif how == "stringify" and isinstance(current, (bool, int, float)):
        put(container, index, json.dumps(current))
    elif how == "stringify":
        put(container, index, data.draw(st.sampled_from(["0.9", "true", "72", "null", "1e3"])))


def document(data: st.DataObject, base: dict[str, Any], shapes: int = 2) -> bytes | str | bytearray | memoryview:
    doc = to_pairs(base)
    for _ in range(data.draw(st.integers(0, shapes))):
        mutate(doc, data, data.draw(st.sampled_from(MUTATIONS)))
    text = write(doc, data.draw(st.sampled_from(STYLES)))
    form = data.draw(st.sampled_from(["bytes", "bytes", "str", "bytearray", "memoryview"]))
    if form == "str":
        return text
    raw = text.encode("utf-8", "surrogatepass")  # a raw surrogate becomes invalid UTF-8
    return raw if form == "bytes" else bytearray(raw) if form == "bytearray" else memoryview(raw)


def outcome(fn: Any, data: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(data)
    except ContractError as err:
        return "error", (err.codes, [e.to_dict() for e in err.errors])


def agree(public: Any, reference: Any, data: Any) -> None:
    got, want = outcome(public, data), outcome(reference, data)
    assert got[0] == want[0], (got, want)
    if got[0] == "error":
        assert got[1] == want[1]
        return
    a, b = got[1], want[1]
    assert a.event == b.event
    assert a.event.model_dump_json() == b.event.model_dump_json()
    assert a.event.model_dump_json(exclude_unset=True) == b.event.model_dump_json(exclude_unset=True)
    assert (a.source_version, a.warnings) == (b.source_version, b.warnings)


def fast_is_sound(fast: Any, reference: Any, data: Any) -> bool:
    """When the fast path accepts, the reference accepts the same and builds an equal model."""
    model = fast.parse(data, 1_000_000)
    if currently_in_test_context():
        event("fast path took it" if model is not None else "the reference decided")
    if model is None:
        return False
    kind, want = outcome(reference, data)
    assert kind == "ok", want
    assert model == want.event and model.model_dump_json() == want.event.model_dump_json()
    return True


def judge_output_base(seed: int, flags: bool, adjustment: bool, refs: int) -> dict[str, Any]:
    rng = random.Random(seed)
    run_id = workload.stable_id("fast", seed)
    return workload.judge_output(rng, run_id, workload.JUDGE_MODELS[seed % len(workload.JUDGE_MODELS)],
                                 with_flag=flags, with_adjustment=adjustment,
                                 evidence_per_dimension=refs)  # fmt: skip


SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.data(), st.integers(0, 10_000), st.booleans(), st.booleans(), st.integers(0, 3))
def test_judge_output_paths_agree(data: st.DataObject, seed: int, flags: bool, adjustment: bool, refs: int) -> None:
    base = judge_output_base(seed, flags, adjustment, refs)
    version = data.draw(st.sampled_from(["2.1", "2.1", "2.0", "1.0"]))
    if version == "2.0":
        base = workload.as_version_2_0(base)
    elif version == "1.0":
        base = workload.as_version_1_0(base)
    raw = document(data, base)
    agree(validate_judge_output, reference_validate_judge_output, raw)
    fast_is_sound(parse._FAST_JUDGE_OUTPUT, reference_validate_judge_output, raw)


@SETTINGS
@given(st.data(), st.integers(0, 10_000))
def test_claim_check_paths_agree(data: st.DataObject, seed: int) -> None:
    raw = document(data, workload.claim_check(random.Random(seed), f"claim-{seed}"))
    agree(validate_claim_check, reference_validate_claim_check, raw)
    fast_is_sound(parse._FAST_CLAIM_CHECK, reference_validate_claim_check, raw)


def _review(seed: int) -> dict[str, Any]:
    """A 1.1 review (the current version, which the fast path takes); every other one with the desk's fields."""
    desk = {"review_seconds": 41.5, "blind_verdict": "fail", "source": "audit",
            "lease_id": workload.stable_id("lease", seed)} if seed % 2 else {}  # fmt: skip
    return {
        "schema_version": "1.1",
        "review_id": workload.stable_id("review", seed),
        "claim_id": f"claim-{seed}",
        "reviewer": "ana",
        "final_verdict": "pass",
        "notes": None,
        "created_at": "2026-03-31T12:00:00Z",
        **desk,
    }


SIMPLE = {
    RubricVersion: lambda seed: workload.rubric(workload.stable_id("rubric", seed)),
    EvaluationRunStarted: lambda seed: workload.evaluation_run(workload.stable_id("run", seed), timeout_s=30.0),
    HumanReview: _review,
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(0, 10_000), st.sampled_from(sorted(SIMPLE, key=lambda m: m.__name__)))
def test_single_version_contracts_agree(data: st.DataObject, seed: int, model: Any) -> None:
    raw = document(data, SIMPLE[model](seed))
    got = outcome(lambda d: parse._parse_simple(model, d), raw)
    want = outcome(lambda d: reference_parse_simple(model, d), raw)
    assert got[0] == want[0] and (got[1] == want[1] if got[0] == "error" else got[1] == want[1])
    fast_is_sound(parse._FAST_SIMPLE[model], lambda d: _Parsed(reference_parse_simple(model, d)), raw)


@dataclass
class _Parsed:
    event: Any


@pytest.mark.parametrize("style", STYLES, ids=lambda s: repr((s.item, s.colon, s.ensure_ascii)))
@pytest.mark.parametrize("seed", range(0, 40, 3))
def test_fast_path_takes_valid_documents(style: Style, seed: int) -> None:
    """Valid current-version documents, however they are spaced or escaped, never need the reference
    (one known exception: a string holding a quote right before a colon looks like one more key)."""
    base = judge_output_base(seed, seed % 2 == 0, seed % 3 == 0, seed % 4)
    base["confidence_reasoning"] += ' "quoted" and\nescaped é: x'
    assert fast_is_sound(parse._FAST_JUDGE_OUTPUT, reference_validate_judge_output, write(to_pairs(base), style))
    check = workload.claim_check(random.Random(seed), f"claim-{seed}")
    assert fast_is_sound(parse._FAST_CLAIM_CHECK, reference_validate_claim_check, write(to_pairs(check), style))
    for model, make in SIMPLE.items():
        text = write(to_pairs(make(seed)), style).encode()
        assert parse._FAST_SIMPLE[model].parse(text, 1_000_000) == reference_parse_simple(model, text)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        '"schema_version": "2.1", "schema_version": "2.1"',
        '"overall_score": NaN',
        '"judge_model": "\\ud800"',
        '"extra": {"x": Infinity}',
        '"extra": ' + "9" * 5000,
        '"extra": ' + "[" * 1200 + "]" * 1200,
        '"extra": {"k": 1, "k": 2}',
        '"confidence_reasoning": "a\\u0000b"',
    ],
)
def test_fast_path_refuses_what_it_cannot_vouch_for(text: str) -> None:
    """Each of these must reach the reference (which may still accept, e.g. an unknown field)."""
    doc = json.dumps(judge_output_base(1, True, True, 2))
    raw = ("{" + text + ", " + doc[1:]).encode() if not text.startswith("{") else text.encode()
    assert parse._FAST_JUDGE_OUTPUT.parse(raw, 1_000_000) is None
    agree(validate_judge_output, reference_validate_judge_output, raw)
