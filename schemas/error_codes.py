"""Translate pydantic's error types into judgeflow's stable codes.

Custom refinements already raise with a judgeflow code as their type; the
built-in ones are mapped by kind, with a few field-specific codes for the
rules the seed's review checklist names (evidence, deductions, flag codes).

Two codes are also raised while decoding, before any field is validated
(`schemas.decoding`): `INVALID_VALUE` for a lone UTF-16 surrogate (`"\\ud800"`) in
any string or key, located at that string, and `OUT_OF_RANGE` for an integer
literal longer than Python's 4,300-digit conversion limit.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from schemas.errors import ContractError, ErrorDetail

_KIND_CODES = {
    "missing": "MISSING_FIELD",
    "literal_error": "INVALID_ENUM",
    "enum": "INVALID_ENUM",
    "greater_than": "OUT_OF_RANGE",
    "greater_than_equal": "OUT_OF_RANGE",
    "less_than": "OUT_OF_RANGE",
    "less_than_equal": "OUT_OF_RANGE",
    "string_too_short": "TOO_SHORT",
    "string_too_long": "TOO_LONG",
    "too_short": "TOO_FEW_ITEMS",
    "too_long": "TOO_MANY_ITEMS",
    "string_pattern_mismatch": "PATTERN_MISMATCH",
    "finite_number": "NON_FINITE_NUMBER",
}

# (field name, generic code) -> the code the checklist item is known by.
_FIELD_CODES = {
    ("deduction", "OUT_OF_RANGE"): "DEDUCTION_OUT_OF_RANGE",
    ("flag_code", "PATTERN_MISMATCH"): "FLAG_CODE_NOT_SCREAMING_SNAKE",
    ("schema_version", "PATTERN_MISMATCH"): "INVALID_SCHEMA_VERSION",
    ("lane_key", "PATTERN_MISMATCH"): "INVALID_LANE_KEY",
    ("dimension_key", "PATTERN_MISMATCH"): "INVALID_DIMENSION_KEY",
    ("reasoning", "TOO_SHORT"): "REASONING_NOT_SUBSTANTIVE",
    ("excerpt", "TOO_LONG"): "EXCERPT_TOO_LONG",
}


def _field_name(loc: tuple[Any, ...]) -> str | None:
    for part in reversed(loc):
        if isinstance(part, str):
            return part
    return None


def code_for(kind: str, loc: tuple[Any, ...]) -> str:
    if kind.isupper():  # a judgeflow refinement raised with its own code
        return kind
    if kind.endswith("_type") or kind in ("int_from_float", "model_attributes_type"):
        if "evidence_refs" in loc and isinstance(loc[-1], int):
            return "EVIDENCE_REF_NOT_STRUCTURED"
        return "WRONG_TYPE"
    code = _KIND_CODES.get(kind, "INVALID_VALUE")
    field = _field_name(loc)
    if field == "evidence_refs" and code == "TOO_FEW_ITEMS" and "integrity_adjustments" in loc:
        return "ADJUSTMENT_EVIDENCE_REQUIRED"
    return _FIELD_CODES.get((field or "", code), code)


def contract_error(exc: ValidationError) -> ContractError:
    details = [
        ErrorDetail(code=code_for(err["type"], tuple(err["loc"])), loc=tuple(err["loc"]), message=err["msg"])
        for err in exc.errors(include_url=False, include_input=False)
    ]
    return ContractError(details)
