"""Property: any input either parses or raises ContractError, never anything else."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgeflow import workload
from schemas import ContractError, parse_claim_check, parse_judge_output

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=25,
)
VALID = workload.judge_output(
    random.Random(11), workload.stable_id("run", 11), "gpt-4o", with_flag=True, with_adjustment=True
)
VALID_CHECK = workload.claim_check(random.Random(11), "claim-9")


def _outcome(parser: Any, data: Any) -> None:
    try:
        parser(data)
    except ContractError as err:
        assert err.codes and all(c.isupper() for c in err.codes)
        assert all(e.code in err.codes for e in err.errors)


@given(json_values)
def test_any_json_value_parses_or_raises_contract_error(value: Any) -> None:
    text = json.dumps(value)  # NaN/Infinity become literals the decoder must refuse
    _outcome(parse_judge_output, text)
    _outcome(parse_claim_check, text.encode())
    if isinstance(value, dict):
        _outcome(parse_judge_output, value)
        _outcome(parse_claim_check, value)


@given(st.binary(max_size=200))
def test_any_bytes_parse_or_raise_contract_error(data: bytes) -> None:
    _outcome(parse_judge_output, data)
    _outcome(parse_claim_check, data)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += _paths(v, (*prefix, i))
    return found


PATHS = _paths(VALID)
CHECK_PATHS = _paths(VALID_CHECK)


def _mutate(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    doc = json.loads(json.dumps(doc))
    target = doc
    for part in path[:-1]:
        target = target[part]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(st.sampled_from(PATHS), json_values, st.booleans())
def test_mutated_judge_output_parses_or_raises_contract_error(path: tuple[Any, ...], value: Any, delete: bool) -> None:
    _outcome(parse_judge_output, _mutate(VALID, path, value, delete))


@settings(max_examples=200)
@given(st.sampled_from(CHECK_PATHS), json_values, st.booleans())
def test_mutated_claim_check_parses_or_raises_contract_error(path: tuple[Any, ...], value: Any, delete: bool) -> None:
    _outcome(parse_claim_check, _mutate(VALID_CHECK, path, value, delete))


@given(st.sampled_from(["1.0", "2.0", "2.1", "2.9", "1.4"]))
def test_every_supported_version_round_trips_to_current(version: str) -> None:
    source = (
        workload.as_version_1_0(VALID)
        if version.startswith("1.")
        else (workload.as_version_2_0(VALID) if version == "2.0" else dict(VALID))
    )
    source["schema_version"] = version
    out = parse_judge_output(source)
    again = parse_judge_output(out.model_dump_json())
    assert again == out and again.schema_version == "2.1"
