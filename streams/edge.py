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
from dataclasses import dataclass, field
from datetime import UTC, datetime

from schemas import (
    ContractError,
    ContractWarning,
    InvalidEvent,
    RoutingDecision,
    validate_claim_check,
    validate_judge_output,
)
from schemas.decoding import MAX_PAYLOAD_BYTES, decode_object
from streams.ids import event_id
from streams.routing import route_invalid

DEAD_LETTER_FULL_BYTES = 512 * 1024
DEAD_LETTER_KEEP_BYTES = 64 * 1024
"""A payload over 512 KiB is dead-lettered as its first 64 KiB plus size and
sha256 (base64 would push the record past Kafka's 1 MiB default); the whole
original stays at its source coordinates, since input topics keep everything."""

H_SOURCE = "judgeflow-source"
H_SOURCE_VERSION = "judgeflow-source-version"
H_WARNINGS = "judgeflow-warnings"
H_ERROR_CODES = "judgeflow-error-codes"

Headers = list[tuple[str, bytes]]


@dataclass(frozen=True)
class SourceRef:
    topic: str
    partition: int
    offset: int
    key: bytes | None = None

    def coordinates(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"


@dataclass(frozen=True)
class Outgoing:
    """A record to publish; `role` names a field of `TopicNames`."""

    role: str
    key: bytes | None
    value: bytes
    headers: Headers = field(default_factory=list)


def now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _warning_header(warnings: tuple[ContractWarning, ...]) -> Headers:
    if not warnings:
        return []
    return [(H_WARNINGS, json.dumps([w.to_dict() for w in warnings]).encode())]


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
        received_at=received_at or now_iso(),
    )
    return Outgoing(
        role="invalid",
        key=src.key,
        value=record.model_dump_json().encode(),
        headers=[(H_SOURCE, src.coordinates().encode()), (H_ERROR_CODES, ",".join(error.codes).encode())],
    )


def screen_judge_output(raw: bytes, src: SourceRef, *, max_bytes: int = MAX_PAYLOAD_BYTES) -> list[Outgoing]:
    try:
        parsed = validate_judge_output(raw, max_bytes=max_bytes)
    except ContractError as err:
        return [dead_letter(raw, src, "judge_output", err)]
    out = parsed.event
    headers = [
        (H_SOURCE, src.coordinates().encode()),
        (H_SOURCE_VERSION, parsed.source_version.encode()),
        *_warning_header(parsed.warnings),
    ]
    return [Outgoing("judge_outputs_valid", out.evaluation_run_id.encode(), out.model_dump_json().encode(), headers)]


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


def screen_claim_check(raw: bytes, src: SourceRef, *, max_bytes: int = MAX_PAYLOAD_BYTES) -> list[Outgoing]:
    try:
        parsed = validate_claim_check(raw, max_bytes=max_bytes)
    except ContractError as err:
        dlq = dead_letter(raw, src, "claim_check", err)
        claim_id, judge_id = _readable_claim(raw) if len(raw) <= max_bytes else (None, None)
        if claim_id is None:
            return [dlq]
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
            decided_at=now_iso(),
        )
        return [
            dlq,
            Outgoing(
                "human_review",
                claim_id.encode(),
                routed.model_dump_json().encode(),
                [(H_SOURCE, src.coordinates().encode())],
            ),
        ]
    check = parsed.event
    headers = [(H_SOURCE, src.coordinates().encode()), (H_SOURCE_VERSION, parsed.source_version.encode())]
    return [Outgoing("checks_valid", check.claim_id.encode(), check.model_dump_json().encode(), headers)]
