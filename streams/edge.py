"""Validation at the edge: one raw record in, the records to send out.

Pure functions (no Faust import): a valid event goes on normalised to the
current contract version with its warnings in headers; anything invalid goes
to the dead-letter topic with the original bytes, its source coordinates and
codes. An invalid claim check is also read as `unclear`, confidence 0.0, and
sent to the human queue (DESIGN decision 5) when its claim_id is readable.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from schemas import (
    ClaimCheck,
    ContractError,
    ContractWarning,
    InvalidEvent,
    JudgeOutput,
    RoutingDecision,
    RubricVersion,
    check_claim_against_rubric,
    validate_claim_check,
    validate_judge_output,
)
from schemas.decoding import MAX_PAYLOAD_BYTES, decode_object
from schemas.errors import RubricRefusal
from streams.envelope import (
    H_ERROR_CODES,
    H_SOURCE,
    H_SOURCE_VERSION,
    H_WARNINGS,
    Headers,
    Outgoing,
    SourceRef,
    iso,
    utc_now,
)
from streams.ids import event_id
from streams.routing import route_invalid

DEAD_LETTER_FULL_BYTES = 512 * 1024
DEAD_LETTER_KEEP_BYTES = 64 * 1024
"""A payload over 512 KiB is dead-lettered as its first 64 KiB plus size and
sha256 (base64 would push the record past Kafka's 1 MiB default); the whole
original stays at its source coordinates, since input topics keep everything."""


def _warning_header(warnings: tuple[ContractWarning, ...]) -> Headers:
    if not warnings:
        return []
    return [(H_WARNINGS, json.dumps([w.to_dict() for w in warnings]).encode())]


__all__ = [
    "H_ERROR_CODES",
    "H_SOURCE",
    "H_SOURCE_VERSION",
    "H_WARNINGS",
    "Outgoing",
    "SourceRef",
    "Admitted",
    "admit_claim_check",
    "admit_judge_output",
    "dead_letter",
    "screen_claim_check",
    "screen_judge_output",
]

E = TypeVar("E")


@dataclass(frozen=True)
class Admitted(Generic[E]):
    """The edge's verdict on one record: the valid event (or None) and what to publish for it."""

    event: E | None
    records: list[Outgoing]
    refused: E | None = None
    """A well-formed event its rubric refused (the records then hold its dead letter)."""


def dead_letter(
    raw: bytes, src: SourceRef, contract: str, error: ContractError, *, received_at: str | None = None
) -> Outgoing:
    truncated = len(raw) > DEAD_LETTER_FULL_BYTES
    kept = raw[:DEAD_LETTER_KEEP_BYTES] if truncated else raw
    record = InvalidEvent(
        event_id=event_id("invalid", src.coordinates()),
        contract=contract,  # type: ignore[arg-type]
        source_topic=src.topic,
        source_partition=src.partition,
        source_offset=src.offset,
        source_key_b64=base64.b64encode(src.key).decode() if src.key is not None else None,
        original_b64=base64.b64encode(kept).decode(),
        original_size=len(raw),
        original_sha256=hashlib.sha256(raw).hexdigest(),
        original_truncated=truncated,
        error_codes=error.codes,
        errors=[e.to_dict() for e in error.errors[:50]],
        received_at=received_at or iso(utc_now()),
    )
    return Outgoing(
        role="invalid",
        key=src.key,
        value=record.model_dump_json().encode(),
        headers=[(H_SOURCE, src.coordinates().encode()), (H_ERROR_CODES, ",".join(error.codes).encode())],
    )


def require_key(key: bytes | None, ident: str, field: str) -> None:
    """Rubric and run records are keyed by their id: one under another key is refused everywhere it is read
    (KEY_MISMATCH), never used."""
    if key is not None and key.decode(errors="replace") != ident:
        raise ContractError.single("KEY_MISMATCH", f"key must be the {field}")


def over_hold_limit(raw: bytes, src: SourceRef, contract: str, limit: int) -> Outgoing:
    """The dead letter of a valid event that would have to wait while the hold is full."""
    err = ContractError.single("HOLD_LIMIT_EXCEEDED", f"{limit} events already held for a rubric or run")
    return dead_letter(raw, src, contract, err)


def admit_judge_output(
    raw: bytes,
    src: SourceRef,
    *,
    rubric: RubricVersion | None = None,
    rubric_for: Callable[[JudgeOutput], RubricVersion | None] | None = None,
    max_bytes: int = MAX_PAYLOAD_BYTES,
) -> Admitted[JudgeOutput]:
    """Validate one judge output with its rubric when known (`rubric`, or `rubric_for` the parsed output: the
    stage knows the rubric of the run the output names); the valid one goes on to the validated topic. One
    that is well-formed but refused by its rubric comes back as `refused`, beside its dead letter."""
    try:
        parsed = validate_judge_output(raw, rubric=rubric, rubric_for=rubric_for, max_bytes=max_bytes)
    except RubricRefusal as err:
        return Admitted(None, [dead_letter(raw, src, "judge_output", err)], refused=err.event)
    except ContractError as err:
        return Admitted(None, [dead_letter(raw, src, "judge_output", err)])
    out = parsed.event
    headers = [
        (H_SOURCE, src.coordinates().encode()),
        (H_SOURCE_VERSION, parsed.source_version.encode()),
        *_warning_header(parsed.warnings),
    ]
    record = Outgoing("judge_outputs_valid", out.evaluation_run_id.encode(), out.model_dump_json().encode(), headers)
    return Admitted(out, [record])


def screen_judge_output(raw: bytes, src: SourceRef, *, max_bytes: int = MAX_PAYLOAD_BYTES) -> list[Outgoing]:
    return admit_judge_output(raw, src, max_bytes=max_bytes).records


def _readable_claim(raw: bytes) -> tuple[str | None, str | None]:
    try:
        doc = decode_object(raw)
    except ContractError:
        return None, None
    claim, judge = doc.get("claim_id"), doc.get("judge_id")
    return (
        claim if isinstance(claim, str) and claim else None,
        judge if isinstance(judge, str) and judge else None,
    )


def admit_claim_check(
    raw: bytes,
    src: SourceRef,
    *,
    now: datetime | None = None,
    max_bytes: int = MAX_PAYLOAD_BYTES,
    rubrics: Callable[[str], RubricVersion | None] | None = None,
) -> Admitted[ClaimCheck]:
    """Validate one claim check, with its rubric when `rubrics` knows it (CLAIM_SCORE_OUT_OF_RANGE). An
    invalid one is dead-lettered and, when its claim_id is readable, queued for humans as `unclear`
    (DESIGN decision 5)."""
    try:
        parsed = validate_claim_check(raw, max_bytes=max_bytes)
        rubric_id = parsed.event.rubric_version_id
        rubric = rubrics(rubric_id) if rubrics is not None and rubric_id is not None else None
        if rubric is not None:
            check_claim_against_rubric(parsed.event, rubric)
    except ContractError as err:
        dlq = dead_letter(raw, src, "claim_check", err, received_at=iso(now) if now is not None else None)
        claim_id, judge_id = _readable_claim(raw) if len(raw) <= max_bytes else (None, None)
        if claim_id is None:
            return Admitted(None, [dlq])
        decision = route_invalid()
        routed = RoutingDecision(
            event_id=event_id("route-invalid", src.coordinates()),
            subject="claim",
            claim_id=claim_id,
            route=decision.route,
            reason=decision.reason,
            verdict="unclear",
            score=None,
            confidence=0.0,
            judge_ids=[judge_id] if judge_id else [],
            input_ids=[event_id("invalid", src.coordinates())],
            decided_at=iso(now or utc_now()),
        )
        source = [(H_SOURCE, src.coordinates().encode())]
        return Admitted(
            None, [dlq, Outgoing("human_review", claim_id.encode(), routed.model_dump_json().encode(), source)]
        )
    check = parsed.event
    headers = [(H_SOURCE, src.coordinates().encode()), (H_SOURCE_VERSION, parsed.source_version.encode())]
    record = Outgoing("checks_valid", check.claim_id.encode(), check.model_dump_json().encode(), headers)
    return Admitted(check, [record])


def screen_claim_check(raw: bytes, src: SourceRef, *, max_bytes: int = MAX_PAYLOAD_BYTES) -> list[Outgoing]:
    return admit_claim_check(raw, src, max_bytes=max_bytes).records
