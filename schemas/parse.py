"""The one way in: bytes | str | dict -> a validated, current-version contract.

Each parser decodes strictly, resolves and upcasts the schema version, and
validates; every failure is a `ContractError` with codes. `validate_*`
also returns the warnings and the version the producer sent.

Two paths give the same answers: `reference_*` (stdlib decode with hooks, then
python-mode validation) is the authority; the public parsers first try
`schemas.fast` (one pydantic-core pass over the bytes), which accepts only what
it can show the reference accepts identically and otherwise hands over to it,
so every rejection and its codes come from the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from schemas.claim_check import ClaimCheck
from schemas.decoding import MAX_PAYLOAD_BYTES, decode_object
from schemas.error_codes import contract_error
from schemas.errors import ContractError, ContractWarning, ErrorDetail, RubricRefusal
from schemas.events import EvaluationRunStarted, HumanReview, RunReview
from schemas.fast import FastContract
from schemas.judge_output import JudgeOutput
from schemas.quality import judge_output_warnings
from schemas.rubric import RubricVersion
from schemas.versions import CLAIM_CHECK_VERSIONS, HUMAN_REVIEW_VERSIONS, JUDGE_OUTPUT_VERSIONS, VersionLine

T = TypeVar("T", bound=BaseModel)
RawEvent = bytes | bytearray | memoryview | str | dict[str, Any]


@dataclass(frozen=True)
class Parsed(Generic[T]):
    event: T
    warnings: tuple[ContractWarning, ...] = ()
    source_version: str = ""


def _validate(model: type[T], doc: dict[str, Any]) -> T:
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise contract_error(exc) from None


def _decode_versioned(data: RawEvent, line: VersionLine, max_bytes: int) -> tuple[str, dict[str, Any]]:
    return line.upcast(decode_object(data, max_bytes=max_bytes))


def check_against_rubric(output: JudgeOutput, rubric: RubricVersion) -> None:
    """Lane and dimension keys outside the rubric are invalid, never dropped (decision 3)."""
    errors: list[ErrorDetail] = []
    if output.rubric_version_id != rubric.rubric_version_id:
        errors.append(
            ErrorDetail(
                "RUBRIC_MISMATCH",
                ("rubric_version_id",),
                f"output names rubric {output.rubric_version_id}, checked against {rubric.rubric_version_id}",
            )
        )
    for i, lane in enumerate(output.lane_scores):
        spec = rubric.lane(lane.lane_key)
        if spec is None:
            errors.append(
                ErrorDetail(
                    "UNKNOWN_LANE_KEY",
                    ("lane_scores", i, "lane_key"),
                    f"lane {lane.lane_key!r} is not in rubric {rubric.name}",
                )
            )
            continue
        known = spec.dimension_weights()
        for j, dim in enumerate(lane.dimension_scores):
            if dim.dimension_key not in known:
                errors.append(
                    ErrorDetail(
                        "UNKNOWN_DIMENSION_KEY",
                        ("lane_scores", i, "dimension_scores", j, "dimension_key"),
                        f"dimension {dim.dimension_key!r} is not in lane {lane.lane_key}",
                    )
                )
    if errors:
        raise ContractError(errors)


def check_claim_against_rubric(check: ClaimCheck, rubric: RubricVersion) -> None:
    """A claim score outside its rubric's `claim_score_range` is invalid (the contract alone allows [0, 1])."""
    r = rubric.claim_score_range
    if check.score is not None and check.score not in r:
        raise ContractError.single(
            "CLAIM_SCORE_OUT_OF_RANGE",
            f"score {check.score:g} is outside rubric {rubric.name}'s claim_score_range [{r.min:g}, {r.max:g}]",
            ("score",),
        )


def reference_validate_judge_output(
    data: RawEvent, *, rubric: RubricVersion | None = None, max_bytes: int = MAX_PAYLOAD_BYTES
) -> Parsed[JudgeOutput]:
    """The reference path: stdlib decode, upcast, python-mode validation."""
    sent, doc = _decode_versioned(data, JUDGE_OUTPUT_VERSIONS, max_bytes)
    output = _validate(JudgeOutput, doc)
    if rubric is not None:
        check_against_rubric(output, rubric)
    return Parsed(output, tuple(judge_output_warnings(output, rubric)), sent)


def reference_validate_claim_check(
    data: RawEvent, *, rubric: RubricVersion | None = None, max_bytes: int = MAX_PAYLOAD_BYTES
) -> Parsed[ClaimCheck]:
    """The reference path for claim checks."""
    sent, doc = _decode_versioned(data, CLAIM_CHECK_VERSIONS, max_bytes)
    check = _validate(ClaimCheck, doc)
    if rubric is not None:
        check_claim_against_rubric(check, rubric)
    return Parsed(check, (), sent)


_SIMPLE_VERSIONS: dict[type[BaseModel], VersionLine] = {HumanReview: HUMAN_REVIEW_VERSIONS}
"""The version lines of the small contracts with more than one version (the others have 1.0 only)."""


def reference_parse_simple(model: type[T], data: RawEvent) -> T:
    """The reference path for the small contracts (rubric, run, review)."""
    line = _SIMPLE_VERSIONS.get(model) or VersionLine(model.__name__, {"1.0": None})
    _, doc = line.upcast(decode_object(data))
    return _validate(model, doc)


_FAST_JUDGE_OUTPUT = FastContract(JudgeOutput, JUDGE_OUTPUT_VERSIONS.current)
_FAST_CLAIM_CHECK = FastContract(ClaimCheck, CLAIM_CHECK_VERSIONS.current)
_FAST_SIMPLE: dict[type[BaseModel], FastContract[Any]] = {
    model: FastContract(model, _SIMPLE_VERSIONS[model].current if model in _SIMPLE_VERSIONS else "1.0")
    for model in (RubricVersion, EvaluationRunStarted, HumanReview, RunReview)
}


def validate_judge_output(
    data: RawEvent,
    *,
    rubric: RubricVersion | None = None,
    rubric_for: Callable[[JudgeOutput], RubricVersion | None] | None = None,
    max_bytes: int = MAX_PAYLOAD_BYTES,
) -> Parsed[JudgeOutput]:
    """Validate one judge output, with `rubric` or the one `rubric_for` finds for the parsed output (the worker
    knows the rubric of the run the output names). One its rubric refuses raises `RubricRefusal`, which carries
    the parsed output. Warnings are computed once, with the rubric when there is one."""
    output = _FAST_JUDGE_OUTPUT.parse(data, max_bytes)
    if output is None:
        sent, doc = _decode_versioned(data, JUDGE_OUTPUT_VERSIONS, max_bytes)
        output = _validate(JudgeOutput, doc)
    else:
        sent = output.schema_version
    found = rubric if rubric is not None else rubric_for(output) if rubric_for is not None else None
    if found is not None:
        try:
            check_against_rubric(output, found)
        except ContractError as err:
            raise RubricRefusal(err.errors, output) from None
    return Parsed(output, tuple(judge_output_warnings(output, found)), sent)


def parse_judge_output(data: RawEvent, *, rubric: RubricVersion | None = None) -> JudgeOutput:
    """Parse one judge output of any supported schema_version into the 2.1 model."""
    output = _FAST_JUDGE_OUTPUT.parse(data, MAX_PAYLOAD_BYTES)
    if output is None:
        return reference_validate_judge_output(data, rubric=rubric).event
    if rubric is not None:
        check_against_rubric(output, rubric)
    return output  # warnings never reject, so the fast path skips computing them here


def validate_claim_check(
    data: RawEvent, *, rubric: RubricVersion | None = None, max_bytes: int = MAX_PAYLOAD_BYTES
) -> Parsed[ClaimCheck]:
    """Validate a claim check, and its score against `rubric`'s claim_score_range when the rubric is given."""
    check = _FAST_CLAIM_CHECK.parse(data, max_bytes)
    if check is None:
        return reference_validate_claim_check(data, rubric=rubric, max_bytes=max_bytes)
    if rubric is not None:
        check_claim_against_rubric(check, rubric)
    return Parsed(check, (), check.schema_version)


def parse_claim_check(data: RawEvent, *, rubric: RubricVersion | None = None) -> ClaimCheck:
    """Parse one claim check (seed 003) strictly: "0.9" is not a number."""
    return validate_claim_check(data, rubric=rubric).event


def _parse_simple(model: type[T], data: RawEvent) -> T:
    parsed = _FAST_SIMPLE[model].parse(data, MAX_PAYLOAD_BYTES)
    return reference_parse_simple(model, data) if parsed is None else parsed


def parse_rubric(data: RawEvent) -> RubricVersion:
    return _parse_simple(RubricVersion, data)


def parse_evaluation_run(data: RawEvent) -> EvaluationRunStarted:
    return _parse_simple(EvaluationRunStarted, data)


def parse_human_review(data: RawEvent) -> HumanReview:
    return _parse_simple(HumanReview, data)


def parse_run_review(data: RawEvent) -> RunReview:
    return _parse_simple(RunReview, data)


def names_run(data: RawEvent) -> bool:
    """A `reviews` record naming an `evaluation_run_id` and no claim is a `RunReview`; any other is read as a
    `HumanReview` (and refused as a review if it is neither)."""
    if isinstance(data, dict):
        doc: Any = data
    else:
        try:
            doc = orjson.loads(bytes(data) if isinstance(data, memoryview) else data)
        except orjson.JSONDecodeError:
            return False
    return isinstance(doc, dict) and "evaluation_run_id" in doc and "claim_id" not in doc


def parse_review(data: RawEvent) -> HumanReview | RunReview:
    """A `reviews` record: a claim's `HumanReview` or a run's `RunReview`."""
    return parse_run_review(data) if names_run(data) else parse_human_review(data)
