"""The edge screens: what one raw record turns into, without a broker."""

from __future__ import annotations

import base64
import json
import random

from judgeflow import workload
from schemas import InvalidEvent, RoutingDecision, parse_judge_output
from streams.edge import H_WARNINGS, SourceRef, screen_claim_check, screen_judge_output

SRC = SourceRef("judge.outputs", 2, 41, b"key-1")


def test_valid_output_goes_on_normalised_with_headers() -> None:
    d = workload.as_version_1_0(workload.judge_output(random.Random(1), workload.stable_id("r", 1), "gpt-4o"))
    d["positive_signal"] = "Shows good understanding of the task at hand"
    [out] = screen_judge_output(json.dumps(d).encode(), SRC)
    assert out.role == "judge_outputs_valid" and out.key == d["evaluation_run_id"].encode()
    assert parse_judge_output(out.value).schema_version == "2.1"
    headers = dict(out.headers)
    assert headers["judgeflow-source-version"] == b"1.0"
    assert headers["judgeflow-source"] == b"judge.outputs/2/41"
    assert "GENERIC_SIGNAL" in {w["code"] for w in json.loads(headers[H_WARNINGS])}


def test_invalid_output_is_dead_lettered_with_original_bytes() -> None:
    raw = b'{"schema_version": "9.0"}'
    [out] = screen_judge_output(raw, SRC)
    assert out.role == "invalid" and out.key == b"key-1"
    record = InvalidEvent.model_validate_json(out.value)
    assert base64.b64decode(record.original_b64) == raw
    assert record.error_codes == ["UNSUPPORTED_SCHEMA_VERSION"]
    assert (record.source_topic, record.source_partition, record.source_offset) == ("judge.outputs", 2, 41)
    again = InvalidEvent.model_validate_json(screen_judge_output(raw, SRC)[0].value)
    assert again.event_id == record.event_id  # deterministic across redelivery


def test_oversized_payload_keeps_prefix_size_and_hash() -> None:
    raw = b'{"a": "' + b"x" * 2_000_000 + b'"}'
    [out] = screen_judge_output(raw, SRC)
    record = InvalidEvent.model_validate_json(out.value)
    assert record.error_codes == ["PAYLOAD_TOO_LARGE"] and record.original_truncated
    assert record.original_size == len(raw) and len(out.value) < 200_000


def test_invalid_check_is_dead_lettered_and_queued_for_humans_as_unclear() -> None:
    bad = {**workload.claim_check(random.Random(2), "claim-7"), "confidence": "0.9"}
    dlq, human = screen_claim_check(json.dumps(bad).encode(), SourceRef("judge.checks", 0, 5, b"claim-7"))
    assert dlq.role == "invalid" and human.role == "human_review" and human.key == b"claim-7"
    decision = RoutingDecision.model_validate_json(human.value)
    assert (decision.route, decision.reason, decision.verdict) == ("human_review", "invalid", "unclear")
    assert decision.confidence == 0.0 and decision.score is None
    assert decision.input_ids == [InvalidEvent.model_validate_json(dlq.value).event_id]


def test_unreadable_check_is_only_dead_lettered() -> None:
    assert [o.role for o in screen_claim_check(b"\x00\x01", SourceRef("judge.checks", 0, 6))] == ["invalid"]


def test_valid_check_goes_on() -> None:
    [out] = screen_claim_check(json.dumps(workload.claim_check(random.Random(3), "c-1")).encode(), SRC)
    assert out.role == "checks_valid" and out.key == b"c-1"
