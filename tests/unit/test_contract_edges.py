"""Contract edges found by fuzzing: lone surrogates, 1.0 without a completion time, huge integers."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judgeflow import workload
from schemas import (
    ContractError,
    parse_claim_check,
    parse_evaluation_run,
    parse_human_review,
    parse_judge_output,
    parse_rubric,
)
from schemas.decoding import decode_object
from schemas.parse import reference_validate_claim_check, reference_validate_judge_output

JUDGE_OUTPUT = workload.judge_output(
    random.Random(5), workload.stable_id("edges", 5), "gpt-4o", with_flag=True, with_adjustment=True
)
CLAIM_CHECK = workload.claim_check(random.Random(5), "claim-5")
RUBRIC = workload.rubric(workload.stable_id("rubric", 5))
RUBRIC["lanes"][0]["dimensions"][0]["description"] = "what this dimension looks at"
RUBRIC["bands"] = [{"label": "Strong", "min_score": 70, "max_score": 100}]
RUN = workload.evaluation_run(workload.stable_id("run", 5), timeout_s=30.0)
REVIEW = {
    "schema_version": "1.0",
    "review_id": workload.stable_id("review", 5),
    "claim_id": "claim-5",
    "reviewer": "ana",
    "final_verdict": "fail",
    "notes": "the quote is from another filing",
    "created_at": "2026-03-31T12:00:00Z",
}
CONTRACTS: dict[str, tuple[dict[str, Any], Callable[[Any], Any]]] = {
    "judge_output": (JUDGE_OUTPUT, parse_judge_output),
    "claim_check": (CLAIM_CHECK, parse_claim_check),
    "rubric": (RUBRIC, parse_rubric),
    "evaluation_run": (RUN, parse_evaluation_run),
    "human_review": (REVIEW, parse_human_review),
}


def string_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, str):
        return [prefix]
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return [path for key, item in items for path in string_paths(item, (*prefix, key))]


def replaced(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(doc))
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return out


def forms(doc: dict[str, Any]) -> list[Any]:
    """The same document as bytes (surrogates escaped), as str (surrogates raw) and as a dict."""
    return [json.dumps(doc).encode(), json.dumps(doc, ensure_ascii=False), doc]


@pytest.mark.parametrize(
    "parser,doc,path",
    [
        (parse_claim_check, CLAIM_CHECK, ("passage",)),
        (parse_claim_check, CLAIM_CHECK, ("passage_quote",)),
        (parse_judge_output, JUDGE_OUTPUT, ("confidence_reasoning",)),
        (parse_judge_output, JUDGE_OUTPUT, ("lane_scores", 0, "dimension_scores", 0, "band_label")),
        (parse_judge_output, JUDGE_OUTPUT, ("lane_scores", 0, "dimension_scores", 0, "evidence_refs", 0, "location")),
        (parse_judge_output, JUDGE_OUTPUT, ("judge_run_id",)),
    ],
)
@pytest.mark.parametrize("text", ["\ud800", "ok \udfff", "\udc00\ud800"])
def test_lone_surrogate_is_refused_at_parse_time(parser: Any, doc: dict[str, Any], path: tuple[Any, ...], text: str):
    for data in forms(replaced(doc, path, text)):
        with pytest.raises(ContractError) as info:
            parser(data)
        assert info.value.codes == ["INVALID_VALUE"]
        assert info.value.errors[0].loc == path


def test_lone_surrogate_in_an_unknown_field_or_key_is_refused_too() -> None:
    for doc in ({**CLAIM_CHECK, "note": ["x", "\ud800"]}, {**CLAIM_CHECK, "\udfff": 1}):
        with pytest.raises(ContractError) as info:
            parse_claim_check(json.dumps(doc).encode())
        assert info.value.codes == ["INVALID_VALUE"]


def test_a_refused_event_can_still_be_read_for_its_identifiers() -> None:
    raw = json.dumps({**CLAIM_CHECK, "passage": "\ud800"}).encode()
    with pytest.raises(ContractError):
        decode_object(raw)
    assert decode_object(raw, allow_surrogates=True)["claim_id"] == "claim-5"


def test_a_surrogate_pair_is_one_character_and_accepted() -> None:
    check = parse_claim_check(json.dumps({**CLAIM_CHECK, "passage": "ok \U0001f600"}).encode())
    assert check.passage == "ok \U0001f600"
    assert json.loads(check.model_dump_json())["passage"] == "ok \U0001f600"


def test_version_1_0_without_completion_time_upcasts_with_null() -> None:
    old = workload.as_version_1_0(JUDGE_OUTPUT)
    del old["judge_completed_at"]
    for data in (json.dumps(old).encode(), old):
        out = parse_judge_output(data)
        assert out.judge_completed_at is None and out.schema_version == "2.1"
        assert reference_validate_judge_output(data).event == out
    # 2.0 and 2.1 still require the field (it is nullable, not optional).
    current = dict(JUDGE_OUTPUT)
    del current["judge_completed_at"]
    with pytest.raises(ContractError) as info:
        parse_judge_output(json.dumps(current).encode())
    assert info.value.codes == ["MISSING_FIELD"]


@pytest.mark.parametrize("where", ["score", "extra"])
def test_integer_past_the_conversion_limit_is_a_contract_error(where: str) -> None:
    raw = json.dumps({**CLAIM_CHECK, where: "HUGE"}).replace('"HUGE"', "9" * 5000).encode()
    for validate in (parse_claim_check, lambda d: reference_validate_claim_check(d).event):
        with pytest.raises(ContractError) as info:
            validate(raw)
        assert info.value.codes == ["OUT_OF_RANGE"]


ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40) | st.sampled_from(
    ["\ud800", "a\udbffb", "\udc00", "\ud83d\ude00", "\x00", "é\u2028"]
)
STRING_FIELDS = [(name, path) for name, (doc, _) in CONTRACTS.items() for path in string_paths(doc)]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(STRING_FIELDS), ANY_TEXT, st.sampled_from([0, 1, 2]))
def test_any_text_in_any_string_field_is_refused_or_serialises(field: Any, text: str, form: int) -> None:
    """Either a ContractError with codes, or a model that `model_dump_json` writes without error."""
    name, path = field
    doc, parser = CONTRACTS[name]
    data = forms(replaced(doc, path, text))[form]
    try:
        model = parser(data)
    except ContractError as err:
        assert err.codes and all(code.isupper() for code in err.codes)
        return
    model.model_dump_json().encode("utf-8")
