"""Poison traffic (reliability scenario 7, in part): thousands of malformed
events interleaved with valid ones on the same partitions. Every valid event
is processed, every invalid one is dead-lettered with a code, the worker never
restarts and no partition stalls behind a poison message."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from judgeflow import workload
from schemas import InvalidEvent
from streams.topics import TopicNames
from tests.conftest import MEASURED
from tests.support import Worker, consume_until, create_topics, produce, unique_prefix

pytestmark = pytest.mark.integration
SEED = 7007


def poison(rng: random.Random, valid: dict[str, Any]) -> tuple[bytes, str]:
    """One malformed judge output and the code it must be dead-lettered with."""
    kind = rng.randrange(9)
    if kind == 0:
        return b"\x80" + rng.randbytes(rng.randint(1, 200)), "INVALID_UTF8"
    if kind == 1:
        return json.dumps(valid)[: rng.randint(1, 400)].encode(), "INVALID_JSON"
    if kind == 2:
        return json.dumps({**valid, "overall_score": str(valid["overall_score"])}).encode(), "WRONG_TYPE"
    if kind == 3:
        return json.dumps(valid).replace('"overall_score": ', '"overall_score": NaN, "x": ', 1).encode(), \
            "NON_FINITE_NUMBER"  # fmt: skip
    if kind == 4:
        return b'{"schema_version": "2.1", "a": Infinity}', "NON_FINITE_NUMBER"
    if kind == 5:
        return json.dumps(valid)[:-1].encode() + b', "judge_model": "dup-judge"}', "DUPLICATE_KEY"
    if kind == 6:
        depth = rng.randint(5_000, 50_000)
        return b'{"schema_version": "2.1", "x": ' + b"[" * depth + b"]" * depth + b"}", "NESTING_TOO_DEEP"
    if kind == 7:
        return json.dumps({**valid, "schema_version": f"{rng.randint(3, 99)}.0"}).encode(), "UNSUPPORTED_SCHEMA_VERSION"
    return json.dumps(rng.choice([[1, 2], "text", 42, None, True])).encode(), "NOT_AN_OBJECT"


def test_poison_traffic_is_dead_lettered_and_nothing_stalls(kafka_bootstrap: str, tmp_path: Path) -> None:
    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names)
    rng = random.Random(SEED)
    n_poison, n_valid = 10_000, 400
    template = workload.judge_output(rng, workload.stable_id("run", "template"), "gpt-4o")
    rubric = workload.rubric(workload.stable_id("rubric", prefix))
    rid = rubric["rubric_version_id"]
    # Valid outputs are validated with their run's rubric, so each run and the rubric are published first.
    records: list[tuple[str, bytes, bytes]] = [(names.rubrics, rid.encode(), json.dumps(rubric).encode())]
    expected_codes: Counter[str] = Counter()
    valid_ids: set[str] = set()

    def valid(run_id: str, model: str, key: bytes) -> None:
        doc = workload.judge_output(rng, run_id, model, rubric_id=rid)
        valid_ids.add(doc["judge_run_id"])
        run = workload.evaluation_run(run_id, rubric_id=rid)
        records.extend([(names.runs, run_id.encode(), json.dumps(run).encode()),
                        (names.judge_outputs, key, json.dumps(doc).encode())])  # fmt: skip

    keys = [f"run-{k}".encode() for k in range(8)]  # few keys: poison and valid share partitions
    for i in range(n_poison + n_valid):
        key = keys[i % len(keys)]
        if i % ((n_poison + n_valid) // n_valid) == 0 and len(valid_ids) < n_valid:
            valid(workload.stable_id("run", prefix, i), rng.choice(workload.JUDGE_MODELS), key)
        else:
            raw, code = poison(rng, template)
            expected_codes[code] += 1
            records.append((names.judge_outputs, key, raw))
    # One 5 MB payload, over the 1 MB contract limit (the input topic accepts up to 8 MiB).
    huge = json.dumps({**template, "primary_weakness": "x" * 5_000_000}).encode()
    expected_codes["PAYLOAD_TOO_LARGE"] += 1
    records.insert(len(records) // 2, (names.judge_outputs, keys[0], huge))
    # The very last record of every partition is valid: a stalled partition cannot hide.
    for key in keys:
        valid(workload.stable_id("run", prefix, "last", key.decode()), "gpt-4o", key)
    produce(kafka_bootstrap, records)
    t0 = time.monotonic()
    with Worker(kafka_bootstrap, prefix, tmp_path) as worker:
        pid = worker.process.pid if worker.process else None
        got = consume_until(
            kafka_bootstrap, [names.judge_outputs_valid, names.invalid],
            lambda rs: sum(r.topic == names.invalid for r in rs) >= sum(expected_codes.values())
            and sum(r.topic == names.judge_outputs_valid for r in rs) >= len(valid_ids),
            timeout=300, worker=worker,
        )  # fmt: skip
        assert worker.alive() and worker.process and worker.process.pid == pid  # never restarted
    elapsed = time.monotonic() - t0
    processed = {json.loads(r.value)["judge_run_id"] for r in got if r.topic == names.judge_outputs_valid}
    assert processed == valid_ids
    dead = [InvalidEvent.model_validate_json(r.value) for r in got if r.topic == names.invalid]
    assert len({(d.source_partition, d.source_offset) for d in dead}) == len(dead) == sum(expected_codes.values())
    assert Counter(d.error_codes[0] for d in dead) == expected_codes
    assert "INTERNAL_ERROR" not in {c for d in dead for c in d.error_codes}
    MEASURED["poison traffic"] = (
        f"{len(dead)} malformed + {len(valid_ids)} valid judge outputs: all dead-lettered with their code / "
        f"all processed in {elapsed:.1f}s, worker never restarted"
    )
