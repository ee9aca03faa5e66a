"""Differential: the exported JSON Schema and the parser give the same answer on the same document.

Valid judge outputs (2.1, 2.0, 1.0) and claim checks are mutated (a field dropped, a value of another type,
integral floats, trailing newlines and Unicode digits in ids, keys and versions, RFC 3339 timestamps good and
bad, blank text, statuses, confidences, telemetry and verdicts that switch the conditional rules on, fields of a
later version sent early, unknown fields) and each document is given, as the same JSON text, to `parse_*` and
to `jsonschema` (Draft 2020-12 with its format checker) over the file `judgeflow schema export` writes for the
version sent. Both accept, or both refuse; the only disagreement allowed is a refusal whose codes all name rules
JSON Schema cannot say (`INEXPRESSIBLE`, the table in docs/contract.md), and those documents are skipped.

The installed `jsonschema` has no `date-time` format checker (that needs `rfc3339-validator`), so the
timestamp profile is checked by the `pattern` the export gives every timestamp, which is what it is for.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from jsonschema import Draft202012Validator, FormatChecker

from judgeflow import workload
from schemas import ContractError, parse_claim_check, parse_judge_output
from schemas.export import SPACE, export_json_schemas

# Rules the exported schema does not carry, by the code the parser refuses with (docs/contract.md lists them).
INEXPRESSIBLE = frozenset(
    {
        "ADJUSTED_EXCEEDS_OVERALL",  # one field compared with another
        "TIMESTAMPS_OUT_OF_ORDER",  # two instants compared
        "COMPLETED_LANES_MISMATCH",  # one list equal, as a set, to the keys of another
        "DUPLICATE_LANE_KEY",  # uniqueItems compares whole items, not one key of them
        "DUPLICATE_DIMENSION_KEY",
        "DUPLICATE_KEY",  # rules on the bytes, before there is a JSON value to validate
        "NUL_CHARACTER",
        "NON_FINITE_NUMBER",
        "INVALID_UTF8",
        "INVALID_JSON",
        "NESTING_TOO_DEEP",
        "PAYLOAD_TOO_LARGE",
    }
)


def _exported() -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        return {p.name: json.loads(p.read_text()) for p in export_json_schemas(Path(tmp))}


SCHEMAS = _exported()
VALIDATORS = {name: Draft202012Validator(schema, format_checker=FormatChecker()) for name, schema in SCHEMAS.items()}
PARSERS = {"judge_output": parse_judge_output, "claim_check": parse_claim_check}


@dataclass(frozen=True)
class Num:
    """A number written as it is (`7e1`, `-5.0`): json.dumps would write every one of them as a float."""

    text: str


def write(value: Any) -> str:
    if isinstance(value, Num):
        return value.text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {write(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(write(v) for v in value) + "]"
    return json.dumps(value)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every value below the root, containers included."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    found: list[tuple[Any, ...]] = []
    for key, item in items:
        found.append((*prefix, key))
        found += paths(item, (*prefix, key))
    return found


def parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


def named(doc: Any, *names: str) -> list[tuple[Any, ...]]:
    """Paths to the strings held by fields of these names (an earlier mutation may have retyped one)."""
    return [p for p in paths(doc) if p[-1] in names and isinstance(parent(doc, p)[p[-1]], str)]


# -- values ------------------------------------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=6,
)

DIGITS = "0123456789"
ODD_DIGITS = ["٣", "３", "५", "߃"]  # Arabic-Indic, fullwidth, Devanagari, NKo: digits to \d, never to [0-9]
BAD_TIMESTAMPS = [
    "2026-11-30T23Z", "2026-W48-1T22:00:00Z", "2026-11-30T22:00:00,5Z", "2026-11-30_22:00:00Z", "20261130T220500Z",
    "2026-11-30T22:00:00", "2026-11-30T22:00:00+0200", "2026-11-30T22:00:00+02", "2026-11-30T22:00Z",
    "2026-11-30T22:00:00.Z", "2026-11-30T22:00:00Z\n", " 2026-11-30T22:00:00Z", "2026-11-30  22:00:00Z",
    "2026-11-30T24:00:00Z", "2026-11-30T23:60:00Z", "2026-11-30T23:59:60Z", "2026-11-31T22:00:00Z",
    "2026-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "0000-01-01T00:00:00Z", "2026-00-10T00:00:00Z",
    "2026-11-00T00:00:00Z", "2026-13-01T00:00:00Z", "2026-11-30T22:00:00+24:00", "2026-11-30T22:00:00+02:60",
    "２０２６-11-30T22:00:00Z", "2026-11-30T22:00:00.٥Z", "2026-11-30T22:00:00ZZ", "2026-11-30", "",
]  # fmt: skip
GOOD_TIMESTAMPS = [
    "2026-11-30T22:00:00Z", "2026-11-30t22:00:00z", "2026-11-30 22:00:00Z", "2026-12-01T00:00:00+02:00",
    "2026-11-30T22:00:00.5Z", "2026-11-30T22:00:00.123456789-07:30", "2026-11-30T22:00:00-00:00",
    "2000-02-29T23:59:59+23:59", "2024-02-29T00:00:00-23:59", "1600-02-29T12:00:00Z", "0004-02-29T00:00:00Z",
]  # fmt: skip


@st.composite
def timestamps(draw: st.DrawFn) -> str:
    """RFC 3339 date-times from their parts, calendar and offsets at and past their bounds, sometimes with one
    character changed. Years stay 0002-9998: on 0001-01-01 and 9999-12-31 an offset can leave the years a
    UTC instant can have, which the parser refuses and the pattern cannot see (docs/contract.md)."""
    if draw(st.integers(0, 4)) == 0:
        return draw(st.sampled_from(BAD_TIMESTAMPS + GOOD_TIMESTAMPS))
    year = draw(st.sampled_from(["2026", "2024", "2000", "2100", "1900", "2400", "1904", "0400", "0004", "9998"]))
    month = f"{draw(st.integers(0, 13)):02d}"
    day = f"{draw(st.integers(0, 32)):02d}"
    hour, minute, second = (f"{draw(st.integers(0, n)):02d}" for n in (25, 61, 61))
    fraction = "".join(draw(st.lists(st.sampled_from(DIGITS), max_size=9)))
    zone = draw(st.sampled_from(["Z", "z", "+", "-"]))
    if zone in "+-":
        zone += f"{draw(st.integers(0, 24)):02d}:{draw(st.integers(0, 60)):02d}"
    sep = draw(st.sampled_from(["T", "t", " "]))
    text = f"{year}-{month}-{day}{sep}{hour}:{minute}:{second}{'.' + fraction if fraction else ''}{zone}"
    if draw(st.integers(0, 5)) == 0:
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + draw(st.sampled_from([*ODD_DIGITS, "\n", " ", "T", ":", "-", "0", ""])) + text[i + 1 :]
    return text


def odd_uuid(draw: st.DrawFn, value: str) -> str:
    i = draw(st.sampled_from([i for i, c in enumerate(value) if c != "-"] or [0]))
    swapped = value[:i] + draw(st.sampled_from([*ODD_DIGITS, "_", "g", "F"])) + value[i + 1 :]
    return draw(st.sampled_from([value + "\n", "\n" + value, value + " ", value.upper(), "{" + value + "}",
                                 "urn:uuid:" + value, value.replace("-", ""), swapped]))  # fmt: skip


def integral(draw: st.DrawFn, value: int) -> Num:
    """An int written as a float: integral (70.0, 7e1, -5.0, 0.7e2) or not (70.5)."""
    forms = [f"{value}.0", f"{value}e0", f"{value}.000", f"{value * 10}e-1", f"{value}.5", f"{value}.0000001"]
    if value % 10 == 0 and value:
        forms.append(f"{value // 10}e1")
    if value == 0:
        forms += ["-0.0", "0e5"]
    return Num(draw(st.sampled_from(forms)))


BLANKS = ["", " ", "\u3000\x1c", "\t\n\x85\xa0", "\ufeff", "\u200b", "x", "  " + "a" * 18 + "  ", "a" + " " * 18 + "b",
          "a" * 19, "a" * 20, "\u2028" + "b" * 19 + "\u2029", "\x1f" * 25, "\u205f" + "é" * 20]  # fmt: skip


# -- mutations ---------------------------------------------------------------------------------------------------


def mutate(doc: dict[str, Any], draw: st.DrawFn, how: str) -> None:
    every = paths(doc)
    if how == "drop" and every:
        path = draw(st.sampled_from(every))
        del parent(doc, path)[path[-1]]
    elif how == "retype" and every:
        path = draw(st.sampled_from(every))
        parent(doc, path)[path[-1]] = draw(json_values)
    elif how == "integral":
        ints = [p for p in every if type(parent(doc, p)[p[-1]]) is int]
        if ints:
            path = draw(st.sampled_from(ints))
            parent(doc, path)[path[-1]] = integral(draw, parent(doc, path)[path[-1]])
    elif how == "uuid":
        ids = named(doc, "judge_run_id", "evaluation_run_id", "submission_id", "rubric_version_id")
        if ids:
            path = draw(st.sampled_from(ids))
            parent(doc, path)[path[-1]] = odd_uuid(draw, parent(doc, path)[path[-1]])
    elif how == "version":
        version = draw(st.sampled_from(["2.1\n", "٢.١", "２.１", "2.1 ", " 2.1", "v2.1", "3.0", "2", "", 2.1, None]))
        doc["schema_version"] = version
    elif how == "timestamp":
        stamps = named(doc, "judge_started_at", "judge_completed_at", "checked_at")
        if stamps:
            path = draw(st.sampled_from(stamps))
            parent(doc, path)[path[-1]] = draw(timestamps())
    elif how == "key":
        keys = named(doc, "lane_key", "dimension_key", "flag_code")
        if keys:
            path = draw(st.sampled_from(keys))
            old = parent(doc, path)[path[-1]]
            new = draw(st.sampled_from([old + "\n", old.upper(), old.lower(), old + "2", "ｘ" + old, "", old + "é"]))
            parent(doc, path)[path[-1]] = new
            if path[-1] == "lane_key" and path[0] == "lane_scores" and draw(st.booleans()):
                # keep completed_lane_keys in step, so that only the key itself is judged
                doc["completed_lane_keys"] = [lane.get("lane_key") for lane in doc["lane_scores"]]
    elif how == "status":
        doc["status"] = draw(st.sampled_from(["complete", "partial", "failed"]))
        if draw(st.booleans()):
            doc["failure_reason"] = draw(st.sampled_from([None, *BLANKS]))
        if draw(st.booleans()):
            doc["lane_scores"], doc["completed_lane_keys"] = [], []
        for signal in ("positive_signal", "primary_weakness"):
            if draw(st.booleans()):
                doc[signal] = None
    elif how == "confidence":
        doc["confidence"] = "low"
        doc["confidence_reasoning"] = draw(st.sampled_from(BLANKS))
    elif how == "telemetry":
        telemetry = doc.get("telemetry_summary")
        if not isinstance(telemetry, dict):
            telemetry = doc["telemetry_summary"] = {}
        for name in ("tool_call_count", "step_count", "error_count", "error_rate", "total_tokens_used",
                     "wall_time_seconds", "telemetry_unavailable_reason"):  # fmt: skip
            choice = draw(st.integers(0, 4))
            if choice == 0:
                telemetry[name] = None
            elif choice == 1:
                telemetry.pop(name, None)
            elif choice == 2 and name == "telemetry_unavailable_reason":
                telemetry[name] = draw(st.sampled_from(BLANKS))
            elif choice == 2:
                telemetry[name] = 0
    elif how == "verdict":
        doc["verdict"] = draw(st.sampled_from(["pass", "fail", "unclear", "PASS"]))
        if draw(st.booleans()):
            doc["score"] = None
    elif how == "text":
        texts = [p for p in every if isinstance(parent(doc, p)[p[-1]], str) and p[-1] != "schema_version"]
        if texts:
            path = draw(st.sampled_from(texts))
            parent(doc, path)[path[-1]] = draw(st.sampled_from([*BLANKS, "a\x00b", "ok"]))
    elif how == "cross_field":
        cross_field(doc, draw)
    elif how == "later_field":
        target = doc if draw(st.booleans()) or not isinstance(doc.get("telemetry_summary"), dict) else None
        target = target if target is not None else doc["telemetry_summary"]
        name = draw(st.sampled_from(["status", "failure_reason", "completed_lane_keys", "integrity_adjusted_score",
                                     "integrity_adjustments", "telemetry_summary", "error_count",
                                     "telemetry_unavailable_reason", "unknown_field"]))  # fmt: skip
        target[name] = draw(json_values | st.sampled_from(["failed", "partial", *BLANKS]))


def cross_field(doc: dict[str, Any], draw: st.DrawFn) -> None:
    """One of the rules JSON Schema cannot say, broken (on a document earlier mutations may have reshaped)."""
    with contextlib.suppress(KeyError, IndexError, TypeError, AttributeError):
        _cross_field(doc, draw)


def _cross_field(doc: dict[str, Any], draw: st.DrawFn) -> None:
    lanes = doc.get("lane_scores")
    kind = draw(st.sampled_from(["lane", "dimension", "adjusted", "order", "completed"]))
    if kind == "lane" and isinstance(lanes, list) and lanes:
        lanes.append(copy.deepcopy(lanes[0]))
        doc["completed_lane_keys"] = [lane["lane_key"] for lane in lanes]
    elif kind == "dimension" and isinstance(lanes, list) and lanes:
        lanes[0]["dimension_scores"].append(copy.deepcopy(lanes[0]["dimension_scores"][0]))
    elif kind == "adjusted" and "overall_score" in doc:
        doc["overall_score"] = draw(st.integers(0, 100))
        doc["integrity_adjusted_score"] = draw(st.integers(0, 100))
    elif kind == "order" and doc.get("judge_completed_at"):
        doc["judge_started_at"], doc["judge_completed_at"] = doc["judge_completed_at"], doc["judge_started_at"]
    elif kind == "completed" and isinstance(doc.get("completed_lane_keys"), list):
        doc["completed_lane_keys"] = draw(st.sampled_from([[], ["correctness"], doc["completed_lane_keys"] * 2]))


JUDGE_MUTATIONS = ["drop", "retype", "integral", "uuid", "version", "timestamp", "key", "status", "confidence",
                   "telemetry", "text", "cross_field", "later_field"]  # fmt: skip
CHECK_MUTATIONS = ["drop", "retype", "integral", "uuid", "version", "timestamp", "verdict", "text", "later_field"]


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, str, str]:
    """(contract, exported file, JSON text)."""
    seed = draw(st.integers(0, 10_000))
    rng = random.Random(seed)
    if draw(st.integers(0, 3)) == 0:
        doc = workload.claim_check(rng, f"claim-{seed}")
        if draw(st.booleans()):
            doc["rubric_version_id"] = workload.stable_id("rubric", seed)
        contract, file, mutations = "claim_check", "claim_check-1.0.json", CHECK_MUTATIONS
    else:
        doc = workload.judge_output(rng, workload.stable_id("differential", seed), "gpt-4o",
                                    status=draw(st.sampled_from(["complete", "partial"])),
                                    with_flag=draw(st.booleans()), with_adjustment=draw(st.booleans()),
                                    evidence_per_dimension=draw(st.integers(0, 2)))  # fmt: skip
        version = draw(st.sampled_from(["2.1", "2.1", "2.0", "1.0"]))
        doc = {"2.1": dict, "2.0": workload.as_version_2_0, "1.0": workload.as_version_1_0}[version](doc)
        contract, file, mutations = "judge_output", f"judge_output-{version}.json", JUDGE_MUTATIONS
    doc = json.loads(json.dumps(doc))
    for _ in range(draw(st.integers(0, 3))):
        mutate(doc, draw, draw(st.sampled_from(mutations)))
    return contract, file, write(doc)


def refusal(contract: str, text: str) -> list[str] | None:
    """The parser's codes, or None when it accepts."""
    try:
        PARSERS[contract](text.encode())
    except ContractError as err:
        return err.codes
    return None


def schema_errors(file: str, text: str) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATORS[file].iter_errors(json.loads(text))
    ]


def event(name: str) -> None:
    if currently_in_test_context():
        hypothesis_event(name)


def assert_agree(contract: str, file: str, text: str) -> None:
    codes, errors = refusal(contract, text), schema_errors(file, text)
    if codes is None:
        assert not errors, f"parser accepts, {file} refuses: {errors[:3]}\n{text}"
        event("both accept")
    elif errors:
        event("both refuse")
    else:
        assert set(codes) <= INEXPRESSIBLE, f"parser refuses with {codes}, {file} accepts\n{text}"
        event("skipped: only rules JSON Schema cannot say")


@settings(max_examples=500, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(documents())
def test_exported_schema_and_parser_agree(document: tuple[str, str, str]) -> None:
    assert_agree(*document)


@pytest.mark.parametrize("stamp", BAD_TIMESTAMPS + GOOD_TIMESTAMPS)
@pytest.mark.parametrize("field", ["judge_started_at", "judge_completed_at"])
def test_every_listed_timestamp_gets_the_same_answer(stamp: str, field: str) -> None:
    doc = workload.judge_output(random.Random(3), workload.stable_id("differential", 3), "gpt-4o")
    doc["judge_started_at"], doc["judge_completed_at"] = "0001-01-01T00:00:00Z", None  # never out of order
    doc[field] = stamp
    assert_agree("judge_output", "judge_output-2.1.json", json.dumps(doc))
    expected = stamp in GOOD_TIMESTAMPS
    assert (refusal("judge_output", json.dumps(doc)) is None) is expected


def test_blank_means_what_str_strip_removes() -> None:
    """The export's whitespace class is exactly Python's str.isspace, which the refinements' strip() uses."""
    space = re.compile(f"[{SPACE}]")
    assert all((space.fullmatch(chr(c)) is not None) == chr(c).isspace() for c in range(0x110000))


def test_every_inexpressible_rule_is_in_the_contract_page() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "contract.md").read_text()
    table = set(re.findall(r"^\| `([A-Z0-9_]+)`", page, re.M))
    assert table >= INEXPRESSIBLE, INEXPRESSIBLE - table


def test_the_timestamp_pattern_refuses_a_trailing_newline_under_python_re() -> None:
    """jsonschema applies `pattern` with re.search, where `$` also matches before a final newline."""
    validator = VALIDATORS["claim_check-1.0.json"]
    check = workload.claim_check(random.Random(1), "c")
    assert validator.is_valid(check)
    for field, value in (
        ("checked_at", check["checked_at"] + "\n"),
        ("rubric_version_id", workload.stable_id("r") + "\n"),
    ):
        assert not validator.is_valid({**check, field: value})
