"""The validation agents on a real broker: valid, old-version and malformed
events in, the validated stream and the dead-letter topic read back."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest

from judgeflow import workload
from schemas import InvalidEvent, RoutingDecision, parse_claim_check, parse_judge_output
from streams.topics import TopicNames
from tests.support import Worker, consume_until, create_topics, produce, unique_prefix

pytestmark = pytest.mark.integration

MALFORMED: list[tuple[bytes, str]] = [
    (b"\xff\xfe not utf-8", "INVALID_UTF8"),
    (b"{truncated", "INVALID_JSON"),
    (b'{"schema_version": "2.1", "schema_version": "2.1"}', "DUPLICATE_KEY"),
    (b'{"schema_version": "2.1", "overall_score": NaN}', "NON_FINITE_NUMBER"),
    (b"[1, 2, 3]", "NOT_AN_OBJECT"),
    (b'{"judge_model": "gpt-4o"}', "MISSING_SCHEMA_VERSION"),
    (b'{"schema_version": "7.0"}', "UNSUPPORTED_SCHEMA_VERSION"),
    (b"[" * 20_000 + b"]" * 20_000, "NESTING_TOO_DEEP"),
]


def test_validation_agents_route_valid_and_invalid(kafka_bootstrap: str, tmp_path: Path) -> None:
    names = TopicNames.with_prefix(unique_prefix())
    create_topics(kafka_bootstrap, names)
    rng = random.Random(2026)
    run_id = workload.stable_id("run", "pipeline")
    v21 = workload.judge_output(rng, run_id, "claude-opus-4-6", with_flag=True, with_adjustment=True)
    v20 = workload.as_version_2_0(workload.judge_output(rng, run_id, "gpt-4o"))
    v10 = workload.as_version_1_0(workload.judge_output(rng, run_id, "gemini-1.5-pro"))
    bad_score = {**workload.judge_output(rng, run_id, "gpt-4o"), "overall_score": "72"}
    key = run_id.encode()  # one key, one partition: valid events queue behind poison ones
    rubric = workload.rubric()  # outputs are validated with their run's rubric: both come first
    records = [(names.rubrics, rubric["rubric_version_id"].encode(), json.dumps(rubric).encode()),
               (names.runs, key, json.dumps(workload.evaluation_run(run_id)).encode()),
               (names.judge_outputs, key, json.dumps(v21).encode())]  # fmt: skip
    records += [(names.judge_outputs, key, raw) for raw, _ in MALFORMED]
    records += [
        (names.judge_outputs, key, json.dumps(bad_score).encode()),
        (names.judge_outputs, key, json.dumps(v20).encode()),
        (names.judge_outputs, key, json.dumps(v10).encode()),
    ]
    good_check = workload.claim_check(rng, "claim-ok")
    bad_check = {**workload.claim_check(rng, "claim-bad"), "score": "0.9"}
    records += [
        (names.checks, b"claim-ok", json.dumps(good_check).encode()),
        (names.checks, b"claim-bad", json.dumps(bad_check).encode()),
        (names.checks, b"junk", b"\x00garbage"),
    ]
    produce(kafka_bootstrap, records)

    want_invalid = len(MALFORMED) + 1 + 2
    from judgeflow.services.ports import free_port

    metrics_port = free_port()
    prefix = names.judge_outputs.removesuffix("judge.outputs")
    with Worker(kafka_bootstrap, prefix, tmp_path, JUDGEFLOW_METRICS_PORT=str(metrics_port)) as worker:
        got = consume_until(
            kafka_bootstrap,
            [names.judge_outputs_valid, names.checks_valid, names.invalid, names.human_review],
            lambda rs: (
                sum(r.topic == names.judge_outputs_valid for r in rs) >= 3
                and sum(r.topic == names.invalid for r in rs) >= want_invalid
                and sum(r.topic == names.checks_valid for r in rs) >= 1
                # the invalid check's own decision, not only the valid one's (which may come first)
                and any(
                    r.topic == names.human_review and RoutingDecision.model_validate_json(r.value).reason == "invalid"
                    for r in rs
                )
            ),
            timeout=90,
            worker=worker,
        )
        assert worker.alive(), worker.log()
        import urllib.request

        scraped = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    assert 'judgeflow_events_total{agent="reconcile_runs"}' in scraped
    assert 'judgeflow_invalid_total{code="INVALID_UTF8"} 1.0' in scraped
    assert 'judgeflow_routes_total{route="human_review",subject="claim"}' in scraped

    valid = [parse_judge_output(r.value) for r in got if r.topic == names.judge_outputs_valid]
    assert sorted(o.judge_model for o in valid) == ["claude-opus-4-6", "gemini-1.5-pro", "gpt-4o"]
    assert {o.schema_version for o in valid} == {"2.1"}
    versions = {dict(r.headers)["judgeflow-source-version"] for r in got if r.topic == names.judge_outputs_valid}
    assert versions == {b"1.0", b"2.0", b"2.1"}

    invalid = [InvalidEvent.model_validate_json(r.value) for r in got if r.topic == names.invalid]
    assert len(invalid) == want_invalid
    by_source = {(i.source_topic, i.source_offset): i for i in invalid}
    for offset, (raw, code) in enumerate(MALFORMED, start=1):
        record = by_source[(names.judge_outputs, offset)]
        assert record.error_codes == [code]
        assert base64.b64decode(record.original_b64) == raw  # the bytes as received
    assert by_source[(names.judge_outputs, len(MALFORMED) + 1)].error_codes == ["WRONG_TYPE"]
    check_codes = sorted(i.error_codes[0] for i in invalid if i.source_topic == names.checks)
    assert check_codes == ["INVALID_JSON", "WRONG_TYPE"]

    [check] = [parse_claim_check(r.value) for r in got if r.topic == names.checks_valid]
    assert check.claim_id == "claim-ok"
    humans = [RoutingDecision.model_validate_json(r.value) for r in got if r.topic == names.human_review]
    [human] = [d for d in humans if d.reason == "invalid"]
    assert (human.claim_id, human.reason, human.verdict, human.confidence) == (
        "claim-bad",
        "invalid",
        "unclear",
        0.0,
    )
