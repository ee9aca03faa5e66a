from __future__ import annotations

import pytest

from schemas import ContractError, parse_judge_output
from schemas.decoding import decode_object


@pytest.mark.parametrize(
    "raw,code",
    [
        (b"\xff\xfe\x00", "INVALID_UTF8"),
        (b"", "INVALID_JSON"),
        (b"{not json", "INVALID_JSON"),
        (b'{"a": 1, "a": 2}', "DUPLICATE_KEY"),
        (b'{"a": {"b": 1, "b": 1}}', "DUPLICATE_KEY"),
        (b'{"x": NaN}', "NON_FINITE_NUMBER"),
        (b'{"x": -Infinity}', "NON_FINITE_NUMBER"),
        (b'{"x": "a\\u0000b"}', "NUL_CHARACTER"),
        (b"[1, 2]", "NOT_AN_OBJECT"),
        (b'"a string"', "NOT_AN_OBJECT"),
        (b"null", "NOT_AN_OBJECT"),
        (b"[" * 50_000 + b"]" * 50_000, "NESTING_TOO_DEEP"),
        (b'{"x": "' + b"a" * 1_000_001 + b'"}', "PAYLOAD_TOO_LARGE"),
    ],
)
def test_decoding_codes(raw: bytes, code: str) -> None:
    with pytest.raises(ContractError) as info:
        decode_object(raw)
    assert info.value.codes == [code]


def test_non_object_inputs() -> None:
    with pytest.raises(ContractError) as info:
        parse_judge_output(42)  # type: ignore[arg-type]
    assert info.value.codes == ["NOT_AN_OBJECT"]


def test_error_is_machine_readable() -> None:
    with pytest.raises(ContractError) as info:
        parse_judge_output(b'{"schema_version": "2.1"}')
    err = info.value
    as_dict = err.to_dict()
    assert as_dict["codes"] == ["MISSING_FIELD"]
    assert {"code", "loc", "message"} <= set(as_dict["errors"][0])
    assert isinstance(err, ValueError)
