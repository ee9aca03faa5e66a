"""The contract's edges, one test per row of the differential run against seed 000's Zod (docs/contract.md).

| input | before | now |
|---|---|---|
| `2026-11-30T23Z`, `2026-W48-1T22:00:00Z`, `2026-11-30T22:00:00,5Z` | accepted | INVALID_TIMESTAMP |
| `2026-11-30_22:00:00Z`, `20261130T220500Z` | accepted, stored as sent | INVALID_TIMESTAMP |
| an id with a trailing newline | accepted | INVALID_UUID |
| schema_version `"2.1\\n"`, `"٢.١"`, `"２.１"` | accepted | INVALID_SCHEMA_VERSION |
| `lane_score: 70.0`, `overall_score: 7e1`, `deduction: -5.0` | refused | accepted as 70, 70, -5 |

Every case goes through the public parser as bytes (the fast path first), as a dict (the reference path) and
through the reference itself, so the two paths are held to the same answer here too.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from judgeflow import workload
from schemas import (
    ContractError,
    JudgeOutput,
    parse,
    parse_claim_check,
    parse_evaluation_run,
    parse_human_review,
    parse_judge_output,
    parse_rubric,
)
from schemas.error_codes import code_for
from schemas.export import all_schemas
from schemas.parse import reference_parse_simple, reference_validate_claim_check, reference_validate_judge_output
from schemas.types import (
    LOWER_SNAKE,
    SCHEMA_VERSION_PATTERN,
    SCREAMING_SNAKE,
    UUID_PATTERN,
    Integer,
    SchemaVersion,
    json_pattern,
)

OUTPUT = workload.judge_output(random.Random(9), workload.stable_id("profile", 9), "gpt-4o", with_adjustment=True)
CHECK = workload.claim_check(random.Random(9), "claim-9")
RUBRIC = {**workload.rubric(workload.stable_id("rubric", 9)), "bands": [{"label": "Strong", "min_score": 70,
                                                                         "max_score": 100}]}  # fmt: skip
RUN = workload.evaluation_run(workload.stable_id("run", 9), timeout_s=30.0)
REVIEW = {"schema_version": "1.0", "review_id": workload.stable_id("review", 9), "claim_id": "claim-9",
          "reviewer": "ana", "final_verdict": "fail", "created_at": "2026-11-30T22:00:00Z"}  # fmt: skip


def with_numbers(doc: dict[str, Any], **numbers: str) -> bytes:
    """`doc` as JSON with some numbers written as they are (`"@name@"` placeholders replaced by `numbers`)."""
    text = json.dumps(doc)
    for name, literal in numbers.items():
        text = text.replace(json.dumps(f"@{name}@"), literal)
    return text.encode()


def readings(parser: Callable[[Any], Any], reference: Callable[[Any], Any], raw: bytes) -> list[Any]:
    """The document read by the public parser (bytes, then dict) and by the reference path: all must agree."""
    doc = json.loads(raw)
    return [parser(raw), parser(doc), reference(raw)]


def refusals(parser: Callable[[Any], Any], reference: Callable[[Any], Any], raw: bytes) -> list[ContractError]:
    found = []
    for read in (lambda: parser(raw), lambda: parser(json.loads(raw)), lambda: reference(raw)):
        with pytest.raises(ContractError) as info:
            read()
        found.append(info.value)
    return found


def ref_output(data: Any) -> JudgeOutput:
    return reference_validate_judge_output(data).event


def ref_check(data: Any) -> Any:
    return reference_validate_claim_check(data).event


CONTRACTS: dict[str, tuple[dict[str, Any], Callable[[Any], Any], Callable[[Any], Any]]] = {
    "judge_output": (OUTPUT, parse_judge_output, ref_output),
    "claim_check": (CHECK, parse_claim_check, ref_check),
    "rubric": (RUBRIC, parse_rubric, lambda d: reference_parse_simple(parse.RubricVersion, d)),
    "evaluation_run": (RUN, parse_evaluation_run, lambda d: reference_parse_simple(parse.EvaluationRunStarted, d)),
    "human_review": (REVIEW, parse_human_review, lambda d: reference_parse_simple(parse.HumanReview, d)),
}
TIMESTAMP_FIELDS = [("judge_output", "judge_started_at"), ("judge_output", "judge_completed_at"),
                    ("claim_check", "checked_at"), ("rubric", "created_at"), ("evaluation_run", "started_at"),
                    ("human_review", "created_at")]  # fmt: skip
UUID_FIELDS = [("judge_output", "judge_run_id"), ("judge_output", "evaluation_run_id"),
               ("judge_output", "submission_id"), ("judge_output", "rubric_version_id"),
               ("claim_check", "rubric_version_id"), ("rubric", "rubric_version_id"),
               ("evaluation_run", "evaluation_run_id"), ("evaluation_run", "submission_id"),
               ("evaluation_run", "rubric_version_id"), ("human_review", "review_id")]  # fmt: skip


# -- timestamps: one RFC 3339 profile, normalised to UTC ---------------------------------------------------------

REFUSED_TIMESTAMPS = [
    "2026-11-30T23Z",  # no minutes or seconds (ISO 8601 reduced precision)
    "2026-W48-1T22:00:00Z",  # ISO week date
    "2026-11-30T22:00:00,5Z",  # decimal comma
    "2026-11-30_22:00:00Z",  # any separator but T, t or one space
    "20261130T220500Z",  # ISO 8601 basic format
    "2026-11-30T22:00:00",  # no offset
    "2026-11-30T22:00:00+0200",  # offset without its colon
    "2026-11-30T22:00:00+02",  # offset without minutes
    "2026-11-30T22:00:00.Z",  # a dot with no digit
    "2026-11-30T22:00:00Z\n",  # a trailing newline
    " 2026-11-30T22:00:00Z",
    "2026-11-30  22:00:00Z",  # two spaces
    "２０２６-11-30T22:00:00Z",  # fullwidth digits
    "2026-11-30T22:00:00.٥Z",  # an Arabic-Indic digit in the fraction
    "2026-11-31T22:00:00Z",  # no 31 November
    "2026-02-29T22:00:00Z",  # 2026 is no leap year
    "2100-02-29T22:00:00Z",  # nor is 2100
    "2026-11-30T24:00:00Z",
    "2026-11-30T23:60:00Z",
    "2026-11-30T23:59:60Z",  # a leap second: refused (docs/contract.md)
    "2026-11-30T22:00:00+24:00",
    "2026-11-30T22:00:00-02:60",
    "0000-01-01T00:00:00Z",  # no year 0
    "0001-01-01T00:30:00+01:00",  # before year 1 in UTC
    "9999-12-31T23:30:00-01:00",  # after year 9999 in UTC
    "2026-11-30T22:00:00ZZ",
    "yesterday",
    "",
]


@pytest.mark.parametrize("stamp", REFUSED_TIMESTAMPS)
@pytest.mark.parametrize("contract,field", TIMESTAMP_FIELDS, ids=lambda v: v if isinstance(v, str) else None)
def test_timestamps_outside_the_profile_are_refused(contract: str, field: str, stamp: str) -> None:
    doc, parser, reference = CONTRACTS[contract]
    for err in refusals(parser, reference, json.dumps({**doc, field: stamp}).encode()):
        assert err.codes == ["INVALID_TIMESTAMP"]
        assert err.errors[0].loc == (field,)


NORMALISED = [
    ("2026-11-30T22:00:00Z", "2026-11-30T22:00:00Z"),  # canonical already: the text is kept
    ("2026-11-30T22:00:00.123Z", "2026-11-30T22:00:00.123Z"),  # the fraction keeps the digits sent
    ("2026-11-30T22:00:00.500000Z", "2026-11-30T22:00:00.500000Z"),
    ("2026-12-01T00:00:00+02:00", "2026-11-30T22:00:00Z"),
    ("2026-11-30T20:00:00-02:00", "2026-11-30T22:00:00Z"),
    ("2026-12-01T03:30:00.25+05:30", "2026-11-30T22:00:00.25Z"),
    ("2026-11-30 22:00:00Z", "2026-11-30T22:00:00Z"),  # one space, as RFC 3339 section 5.6 allows
    ("2026-11-30 23:00:00+01:00", "2026-11-30T22:00:00Z"),
    ("2026-11-30t22:00:00z", "2026-11-30T22:00:00Z"),
    ("2026-11-30T22:00:00-00:00", "2026-11-30T22:00:00Z"),  # RFC 3339's "offset unknown": the instant is UTC
    ("2027-01-01T01:00:00+02:00", "2026-12-31T23:00:00Z"),  # across a year
    ("2028-03-01T01:00:00+02:00", "2028-02-29T23:00:00Z"),  # into a leap day
    ("2026-11-30T22:00:00.123456789Z", "2026-11-30T22:00:00.123456Z"),  # cut after microseconds, not rounded
    ("2026-11-30T22:00:00.9999999+00:00", "2026-11-30T22:00:00.999999Z"),
    ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"),
    ("9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999999Z"),
]


@pytest.mark.parametrize("sent,stored", NORMALISED)
@pytest.mark.parametrize("contract,field", TIMESTAMP_FIELDS, ids=lambda v: v if isinstance(v, str) else None)
def test_timestamps_are_normalised_to_utc(contract: str, field: str, sent: str, stored: str) -> None:
    doc, parser, reference = CONTRACTS[contract]
    if contract == "judge_output":  # keep the other end of the run in order
        doc = {**doc, "judge_started_at": "0001-01-01T00:00:00Z", "judge_completed_at": None}
    for event in readings(parser, reference, json.dumps({**doc, field: sent}).encode()):
        assert getattr(event, field) == stored
        assert json.loads(event.model_dump_json())[field] == stored
        # Normalising is idempotent: the stored text reads back as itself.
        again = parser(event.model_dump_json().encode())
        assert getattr(again, field) == stored


def test_run_order_compares_instants_not_texts() -> None:
    in_order = {**OUTPUT, "judge_started_at": "2026-11-30T23:30:00+01:00", "judge_completed_at": "2026-11-30T22:45:00Z"}
    assert parse_judge_output(json.dumps(in_order).encode()).judge_started_at == "2026-11-30T22:30:00Z"
    backwards = {
        **OUTPUT,
        "judge_started_at": "2026-11-30T22:30:00Z",
        "judge_completed_at": "2026-11-30T23:15:00+01:00",
    }
    for err in refusals(parse_judge_output, ref_output, json.dumps(backwards).encode()):
        assert err.codes == ["TIMESTAMPS_OUT_OF_ORDER"]


def test_the_fast_path_builds_the_normalised_model() -> None:
    raw = json.dumps({**OUTPUT, "judge_started_at": "2026-11-30 23:00:00+01:00"}).encode()
    fast = parse._FAST_JUDGE_OUTPUT.parse(raw, 1_000_000)
    assert fast is not None and fast == ref_output(raw)
    assert fast.judge_started_at == "2026-11-30T22:00:00Z"


# -- identifiers, keys and versions: whole ASCII strings ----------------------------------------------------------


@pytest.mark.parametrize("suffix", ["\n", " ", "\r\n", "\t"])
@pytest.mark.parametrize("contract,field", UUID_FIELDS, ids=lambda v: v if isinstance(v, str) else None)
def test_ids_with_a_trailing_character_are_refused(contract: str, field: str, suffix: str) -> None:
    doc, parser, reference = CONTRACTS[contract]
    sent = (doc.get(field) or OUTPUT["rubric_version_id"]) + suffix
    for err in refusals(parser, reference, json.dumps({**doc, field: sent}).encode()):
        assert err.codes == ["INVALID_UUID"]
        assert err.errors[0].loc == (field,)


@pytest.mark.parametrize("odd", ["٣", "３", "G", "_"])
def test_ids_are_ascii_hex(odd: str) -> None:
    bad = odd + OUTPUT["judge_run_id"][1:]
    for err in refusals(parse_judge_output, ref_output, json.dumps({**OUTPUT, "judge_run_id": bad}).encode()):
        assert err.codes == ["INVALID_UUID"]


def test_ids_are_still_lower_cased() -> None:
    raw = json.dumps({**OUTPUT, "judge_run_id": OUTPUT["judge_run_id"].upper()}).encode()
    assert {o.judge_run_id for o in readings(parse_judge_output, ref_output, raw)} == {OUTPUT["judge_run_id"]}


@pytest.mark.parametrize("version", ["2.1\n", "٢.١", "２.１", "2.1 ", "\n2.1", "2.١"])
def test_schema_versions_are_ascii_major_minor(version: str) -> None:
    for err in refusals(parse_judge_output, ref_output, json.dumps({**OUTPUT, "schema_version": version}).encode()):
        assert err.codes == ["INVALID_SCHEMA_VERSION"]
    check = version.replace("2", "1").replace("٢", "١").replace("２", "１").replace("1.1", "1.0")
    for err in refusals(parse_claim_check, ref_check, json.dumps({**CHECK, "schema_version": check}).encode()):
        assert err.codes == ["INVALID_SCHEMA_VERSION"]


@pytest.mark.parametrize("version", ["2.1\n", "٢.١", "２.１", "2.1 "])
def test_the_schema_version_field_pattern_is_whole_and_ascii(version: str) -> None:
    """Events judgeflow emits are validated by the model alone: its pattern must refuse these too."""
    with pytest.raises(ValidationError) as info:
        TypeAdapter(SchemaVersion).validate_python(version, strict=True)
    err = info.value.errors()[0]
    assert code_for(err["type"], ("schema_version",)) == "INVALID_SCHEMA_VERSION"


@pytest.mark.parametrize("where,value,code", [
    ("lane_key", "correctness\n", "INVALID_LANE_KEY"),
    ("lane_key", "ｃorrectness", "INVALID_LANE_KEY"),
    ("dimension_key", "edge_case_handling\n", "INVALID_DIMENSION_KEY"),
    ("flag_code", "COPY_PASTE_DETECTED\n", "FLAG_CODE_NOT_SCREAMING_SNAKE"),
    ("flag_code", "ＣOPY", "FLAG_CODE_NOT_SCREAMING_SNAKE"),
])  # fmt: skip
def test_keys_and_flag_codes_are_whole_ascii(where: str, value: str, code: str) -> None:
    doc = json.loads(json.dumps(OUTPUT))
    if where == "lane_key":
        doc["lane_scores"][0]["lane_key"] = doc["completed_lane_keys"][0] = value
    elif where == "dimension_key":
        doc["lane_scores"][0]["dimension_scores"][0]["dimension_key"] = value
    else:
        doc["integrity_adjustments"][0]["flag_code"] = value
    for err in refusals(parse_judge_output, ref_output, json.dumps(doc).encode()):
        assert code in err.codes


@pytest.mark.parametrize("pattern", [UUID_PATTERN, SCREAMING_SNAKE, LOWER_SNAKE, SCHEMA_VERSION_PATTERN])
def test_patterns_are_ascii_and_anchored(pattern: str) -> None:
    assert "\\d" not in pattern and pattern.startswith("^") and pattern.endswith("$")
    assert json_pattern(pattern).endswith("$(?!\\n)")
    with pytest.raises(ValueError):
        json_pattern(pattern[1:])


# -- integral floats where an integer is due -----------------------------------------------------------------------


def _integral_output() -> tuple[dict[str, Any], dict[str, str], dict[str, int]]:
    """An output with every kind of int field sent as a float, the literals, and the ints they stand for."""
    doc = json.loads(json.dumps(OUTPUT))
    lane, dim, adj = (
        doc["lane_scores"][0],
        doc["lane_scores"][0]["dimension_scores"][0],
        doc["integrity_adjustments"][0],
    )
    overall, deduction = 70, -5
    doc["overall_score"], doc["integrity_adjusted_score"] = "@overall@", "@adjusted@"
    lane["lane_score"], dim["score"], adj["deduction"] = "@lane@", "@dim@", "@deduction@"
    doc["telemetry_summary"]["step_count"] = "@steps@"
    literals = {"overall": "7e1", "adjusted": "65.0", "lane": "70.0", "dim": "0.7e2", "deduction": "-5.0",
                "steps": "1.2E1"}  # fmt: skip
    return doc, literals, {"overall": overall, "adjusted": 65, "lane": 70, "dim": 70, "deduction": deduction,
                           "steps": 12}  # fmt: skip


def test_integral_floats_are_read_as_integers() -> None:
    doc, literals, ints = _integral_output()
    for out in readings(parse_judge_output, ref_output, with_numbers(doc, **literals)):
        lane = out.lane_scores[0]
        got = {"overall": out.overall_score, "adjusted": out.integrity_adjusted_score, "lane": lane.lane_score,
               "dim": lane.dimension_scores[0].score, "deduction": out.integrity_adjustments[0].deduction,
               "steps": out.telemetry_summary.step_count}  # fmt: skip
        assert got == ints and all(type(v) is int for v in got.values())
        assert '"overall_score":70,' in out.model_dump_json()


def test_the_fast_path_takes_integral_floats_itself() -> None:
    doc, literals, _ = _integral_output()
    raw = with_numbers(doc, **literals)
    fast = parse._FAST_JUDGE_OUTPUT.parse(raw, 1_000_000)
    assert fast is not None and fast == ref_output(raw)


@pytest.mark.parametrize("literal", ["70.5", "69.99999", '"70"', "true", "1e400"])
def test_a_non_integer_stays_refused(literal: str) -> None:
    raw = with_numbers({**OUTPUT, "overall_score": "@x@"}, x=literal)
    for err in refusals(parse_judge_output, ref_output, raw):
        assert err.codes == ["WRONG_TYPE"]


def test_an_integral_float_out_of_range_is_out_of_range() -> None:
    for field, literal in (("overall_score", "1e3"), ("overall_score", "-1.0")):
        for err in refusals(parse_judge_output, ref_output, with_numbers({**OUTPUT, field: "@x@"}, x=literal)):
            assert err.codes == ["OUT_OF_RANGE"]
    doc = json.loads(json.dumps(OUTPUT))
    doc["integrity_adjustments"][0]["deduction"] = "@x@"
    for err in refusals(parse_judge_output, ref_output, with_numbers(doc, x="-51.0")):
        assert err.codes == ["DEDUCTION_OUT_OF_RANGE"]
    doc["integrity_adjustments"][0]["deduction"] = "@x@"
    for err in refusals(parse_judge_output, ref_output, with_numbers(doc, x="-5.5")):
        assert err.codes == ["WRONG_TYPE"]  # a fractional deduction (DESIGN 17)


def test_rubric_bands_take_integral_floats() -> None:
    doc = json.loads(json.dumps(RUBRIC))
    doc["bands"][0]["min_score"], doc["bands"][0]["max_score"] = "@lo@", "@hi@"
    raw = with_numbers(doc, lo="70.0", hi="1e2")
    for rubric in readings(parse_rubric, lambda d: reference_parse_simple(parse.RubricVersion, d), raw):
        assert (rubric.bands[0].min_score, rubric.bands[0].max_score) == (70, 100)
    with pytest.raises(ContractError) as info:
        parse_rubric(with_numbers(doc, lo="70.5", hi="100"))
    assert info.value.codes == ["WRONG_TYPE"]


def test_integer_alone_takes_integral_floats_strictly() -> None:
    adapter = TypeAdapter(Integer)
    assert adapter.validate_python(70.0, strict=True) == 70 and adapter.validate_json("7e1", strict=True) == 70
    for value in (70.5, "70", True, float("nan")):
        with pytest.raises(ValidationError):
            adapter.validate_python(value, strict=True)


# -- the exported JSON Schema ------------------------------------------------------------------------------------


def test_exported_integers_keep_their_bounds() -> None:
    """The integral-float validator sits after the constraints, so they stay JSON Schema keywords."""
    schemas = all_schemas()
    text = json.dumps(schemas)
    assert not any(f'"{k}":' in text for k in ("ge", "le", "gt", "lt"))
    deduction = schemas["judge_output-2.1.json"]["$defs"]["IntegrityAdjustment"]["properties"]["deduction"]
    assert deduction == {"maximum": 0, "minimum": -50, "title": "Deduction", "type": "integer"}
