"""`produce`, `tail` and the producer client against the real broker, run as a user would."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from judgeflow import workload
from judgeflow.producer import JudgeflowProducer, SyncProducer
from schemas import ContractError
from streams.topics import TopicNames
from tests.support import REPO, consume_until, create_topics, unique_prefix

pytestmark = pytest.mark.integration


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "judgeflow.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **env}, timeout=120)  # fmt: skip


def test_produce_validates_lines_and_tail_reads_them_back(kafka_bootstrap: str, tmp_path: Path) -> None:
    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names)
    rng = random.Random(1)
    good = workload.judge_output(rng, workload.stable_id("run", prefix), "gpt-4o")
    lines = [json.dumps(good), "{not json", json.dumps({**good, "overall_score": "72"}), ""]
    f = tmp_path / "outputs.jsonl"
    f.write_text("\n".join(lines) + "\n")
    env = {"KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "JUDGEFLOW_TOPIC_PREFIX": prefix}
    out = cli("produce", str(f), "--topic", "judge.outputs", **env)
    assert out.returncode == 1
    assert f"{f}:2: INVALID_JSON" in out.stderr and f"{f}:3: WRONG_TYPE at overall_score" in out.stderr
    assert "sent 1 event(s)" in out.stdout
    raw = cli("produce", str(f), "--topic", "judge.outputs", "--raw", **env)
    assert raw.returncode == 0 and "sent 3 event(s)" in raw.stdout
    tailed = cli("tail", "judge.outputs", "--json", "--limit", "4", **env)
    assert tailed.returncode == 0, tailed.stderr
    records = [json.loads(line) for line in tailed.stdout.splitlines()]
    assert len(records) == 4
    [validated] = [r for r in records if r["key"] == good["evaluation_run_id"]]  # --raw lines carry no key
    assert validated["value"]["judge_run_id"] == good["judge_run_id"]


def test_producer_client_validates_keys_and_publishes(kafka_bootstrap: str) -> None:
    import asyncio

    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names)
    rng = random.Random(2)
    run_id = workload.stable_id("run", prefix)

    async def send_async() -> None:
        async with JudgeflowProducer(kafka_bootstrap, topic_prefix=prefix) as producer:
            await producer.send_run(workload.evaluation_run(run_id))
            await producer.send_judge_output(workload.judge_output(rng, run_id, "gpt-4o"))
            with pytest.raises(ContractError):
                await producer.send_judge_output({"schema_version": "2.1"})

    asyncio.run(send_async())
    with SyncProducer(kafka_bootstrap, topic_prefix=prefix) as producer:
        producer.send_claim_check(workload.claim_check(rng, "claim-sync"))
        with pytest.raises(ContractError):
            producer.send_claim_check({**workload.claim_check(rng, "claim-bad"), "verdict": "true"})
    got = consume_until(kafka_bootstrap, [names.runs, names.judge_outputs, names.checks], lambda rs: len(rs) >= 3)
    assert sorted((r.topic, r.key) for r in got) == sorted(
        [(names.runs, run_id.encode()), (names.judge_outputs, run_id.encode()), (names.checks, b"claim-sync")]
    )
    assert all(dict(r.headers)["judgeflow-producer"] == b"judgeflow-python" for r in got)
