"""`judgeflow demo`: the pipeline end to end on embedded services.

Starts Kafka and Postgres unless configured, creates the topics, runs the
worker as a subprocess, publishes a seeded workload (judge outputs of every
schema version, malformed events, claim checks), waits until every event is
accounted for on the output topics and prints a summary. Exits non-zero if
any published event is unaccounted for.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from judgeflow import workload
from judgeflow.services.local import local_services
from schemas import InvalidEvent
from streams.topics import TopicNames, ensure_topics

MALFORMED = [
    b"\xff\xfe not utf-8",
    b"{truncated",
    b'{"schema_version": "2.1", "schema_version": "2.0"}',
    b'{"schema_version": "2.1", "overall_score": NaN}',
    b'{"schema_version": "9.0"}',
]


@dataclass
class Workload:
    records: list[tuple[str, bytes, bytes]] = field(default_factory=list)
    expected_valid_outputs: int = 0
    expected_valid_checks: int = 0
    expected_invalid: int = 0


def build_workload(names: TopicNames, runs: int, claims: int, seed: int) -> Workload:
    rng = random.Random(seed)
    w = Workload()
    for i in range(runs):
        run_id = workload.stable_id("demo-run", seed, i)
        for j, judge in enumerate(workload.JUDGE_MODELS):
            doc = workload.judge_output(
                rng,
                run_id,
                judge,
                with_flag=rng.random() < 0.2,
                with_adjustment=rng.random() < 0.2,
                status="partial" if rng.random() < 0.05 else "complete",
            )
            if (i + j) % 7 == 0:
                doc = workload.as_version_1_0(doc)
            elif (i + j) % 5 == 0:
                doc = workload.as_version_2_0(doc)
            w.records.append((names.judge_outputs, run_id.encode(), json.dumps(doc).encode()))
            w.expected_valid_outputs += 1
    for k, raw in enumerate(MALFORMED * max(1, runs // 10)):
        w.records.append((names.judge_outputs, f"bad-{k}".encode(), raw))
        w.expected_invalid += 1
    for c in range(claims):
        claim_id = f"claim-{seed}-{c:05d}"
        check = workload.claim_check(rng, claim_id)
        if c % 97 == 0:
            check["confidence"] = str(check["confidence"])  # a producer that sends strings
            w.expected_invalid += 1
        else:
            w.expected_valid_checks += 1
        w.records.append((names.checks, claim_id.encode(), json.dumps(check).encode()))
    return w


async def _publish(bootstrap: str, w: Workload, progress: Progress) -> None:
    from aiokafka import AIOKafkaProducer

    task = progress.add_task("publishing", total=len(w.records))
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5)
    await producer.start()
    try:
        for topic, key, value in w.records:
            await producer.send(topic, key=key, value=value)
            progress.advance(task)
        await producer.flush()
    finally:
        await producer.stop()


async def _await_outputs(
    bootstrap: str, names: TopicNames, w: Workload, progress: Progress, timeout: float
) -> Counter[str]:
    from aiokafka import AIOKafkaConsumer

    want = w.expected_valid_outputs + w.expected_valid_checks + w.expected_invalid
    task = progress.add_task("waiting for the pipeline", total=want)
    consumer = AIOKafkaConsumer(
        names.judge_outputs_valid,
        names.checks_valid,
        names.invalid,
        names.human_review,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        group_id=None,
    )
    await consumer.start()
    seen: Counter[str] = Counter()
    deadline = time.monotonic() + timeout
    try:
        while sum(seen[t] for t in (names.judge_outputs_valid, names.checks_valid, names.invalid)) < want:
            if time.monotonic() > deadline:
                break
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                seen[tp.topic] += len(records)
                if tp.topic == names.invalid:
                    for r in records:
                        for code in InvalidEvent.model_validate_json(r.value).error_codes:
                            seen[f"code:{code}"] += 1
                if tp.topic != names.human_review:
                    progress.advance(task, len(records))
    finally:
        await consumer.stop()
    return seen


def run_demo(runs: int = 30, claims: int = 300, seed: int = 7, timeout: float = 180.0) -> int:
    console = Console()
    t0 = time.monotonic()
    with local_services() as services:
        console.print(
            f"kafka    {services.kafka_bootstrap_servers}"
            + (f"  (started in {services.kafka_seconds:.1f}s)" if services.kafka_seconds else "")
        )
        console.print(
            f"postgres {services.database_url.split('@')[-1]}"
            + (f"  (started in {services.postgres_seconds:.1f}s)" if services.postgres_seconds else "")
        )
        prefix = f"demo{int(time.time())}."
        names = TopicNames.with_prefix(prefix)
        asyncio.run(ensure_topics(services.kafka_bootstrap_servers, names, partitions=4, replication=1))
        w = build_workload(names, runs, claims, seed)
        env = {
            **os.environ,
            **services.env(),
            "JUDGEFLOW_TOPIC_PREFIX": prefix,
            "JUDGEFLOW_APP_ID": f"judgeflow-{prefix.rstrip('.')}",
            "JUDGEFLOW_DATA_DIR": tempfile.mkdtemp(prefix="judgeflow-demo-"),
        }
        log = Path(env["JUDGEFLOW_DATA_DIR"]) / "worker.log"
        with open(log, "wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "judgeflow.cli", "worker", "--loglevel", "warn"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            with Progress(console=console) as progress:
                asyncio.run(_publish(services.kafka_bootstrap_servers, w, progress))
                seen = asyncio.run(_await_outputs(services.kafka_bootstrap_servers, names, w, progress, timeout))
        finally:
            worker.terminate()
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
    table = Table(title="judgeflow demo")
    table.add_column("what")
    table.add_column("expected", justify="right")
    table.add_column("seen", justify="right")
    rows = [
        ("valid judge outputs", w.expected_valid_outputs, seen[names.judge_outputs_valid]),
        ("valid claim checks", w.expected_valid_checks, seen[names.checks_valid]),
        ("dead-lettered", w.expected_invalid, seen[names.invalid]),
    ]
    for label, expected, got in rows:
        table.add_row(label, str(expected), str(got))
    table.add_row("invalid checks queued for humans", "", str(seen[names.human_review]))
    for key, count in sorted(seen.items()):
        if key.startswith("code:"):
            table.add_row(f"  {key[5:]}", "", str(count))
    console.print(table)
    ok = all(expected == got for _, expected, got in rows)
    console.print(
        f"{'every event accounted for' if ok else 'EVENTS UNACCOUNTED FOR'}; {time.monotonic() - t0:.1f}s end to end"
    )
    return 0 if ok else 1
