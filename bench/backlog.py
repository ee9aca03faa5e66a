"""The claim step on a backlog, the same way for every engine.

Each engine is a separate process that consumes `<prefix>judge.checks` and writes one record per claim check
to the routing topics (judgeflow, bare Faust, Quix Streams, Bytewax), or copies each check to
`routing.done` (the two passthroughs, the ceilings). A pass:

1. makes fresh topics; the output topics stamp each record with the broker's append time;
2. starts the engine and pushes one warm-up check through it (start-up and group joins are not measured);
3. pauses the engine (SIGSTOP) and writes the whole backlog with librdkafka, so the engine never races its
   input and no producer shares the machine while it runs;
4. resumes it (SIGCONT) and waits until every output is on the broker;
5. takes the time from the resume to the last output's broker append time, and the engine's CPU time
   (user + system, all its threads) over the same span.

Nothing sleeps to synchronise: the waits poll end offsets against a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import harness
from judgeflow import workload
from streams.topics import TopicNames

ENGINES = ("rdkafka_passthrough", "aiokafka_passthrough", "bytewax", "quix", "faust_bare", "judgeflow")
"""Every engine `measure` knows, in the order the bench runs them."""
MODULE = {
    "rdkafka_passthrough": "bench.passthrough",
    "aiokafka_passthrough": "bench.passthrough",
    "bytewax": "bench.peer_bytewax",
    "quix": "bench.peer",
    "faust_bare": "bench.faust_bare",
}
WARM_KEY = b"warm"


@dataclass(frozen=True)
class BacklogResult:
    engine: str
    events: int
    seconds: float
    """From the resume to the last output's broker append time."""
    cpu_s: float
    """The engine's processes' CPU time (user + system) from the resume until every output was seen."""
    outputs: int
    workers: int = 1

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds

    @property
    def cpu_us_per_event(self) -> float:
        return self.cpu_s / self.events * 1e6


def claim_checks(names: TopicNames, count: int, seed: int, start: int = 0) -> Iterator[harness.Record]:
    """`count` claim checks as the judges publish them, keyed by claim id (`start` is the first id's number),
    made lazily: 100,000 of them."""
    rng = random.Random(seed)
    for c in range(start, start + count):
        claim_id = f"claim-{seed}-{c:07d}"
        yield names.checks, claim_id.encode(), json.dumps(workload.claim_check(rng, claim_id)).encode()


def produce_fast(bootstrap: str, records: Iterable[harness.Record]) -> int:
    """Write `records` with librdkafka (idempotent, acks=all), partitioned as aiokafka and Java do (murmur2),
    and wait until the broker has them all; return how many."""
    from confluent_kafka import Producer

    failed: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "batch.size": 1 << 20,
        }
    )
    sent = 0
    for topic, key, value in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=delivered)
                break
            except BufferError:  # librdkafka's queue is full: let it deliver some first
                producer.poll(0.05)
        sent += 1
        if sent % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120.0) or failed:
        raise RuntimeError(f"the backlog was not written: {len(producer)} unsent, errors {failed[:3]}")
    return sent


def stamp_append_time(bootstrap: str, topics: Sequence[str]) -> None:
    """Make `topics` record the broker's append time, so the last output's timestamp is when it arrived."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t, incremental_configs=[entry]) for t in topics]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(timeout=30)


def last_append_time(bootstrap: str, topics: Sequence[str]) -> float:
    """The latest broker timestamp (seconds) of the last record of any partition of `topics`."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-last", "enable.auto.commit": False})
    try:
        latest = 0.0
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            for partition in meta.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
                if high <= low:
                    continue
                consumer.assign([TopicPartition(topic, partition, high - 1)])
                msg = consumer.consume(1, timeout=10)
                if not msg or msg[0].error():
                    raise RuntimeError(f"could not read the last record of {topic}[{partition}]")
                latest = max(latest, msg[0].timestamp()[1] / 1000)
        return latest
    finally:
        consumer.close()


def judge_outputs(names: TopicNames, count: int, seed: int) -> list[harness.Record]:
    """`count` judge outputs of the pipeline's own workload (its runs' outputs, repeated)."""
    from bench.pipeline import build_workload

    outputs = [r for r in build_workload(names, max(1, count // 300), 0, seed).records if r[0] == names.judge_outputs]
    return [outputs[i % len(outputs)] for i in range(count)]


def engine_processes(
    engine: str, bootstrap: str, names: TopicNames, prefix: str, workdir: Path, workers: int, source: str
) -> list[harness.Process]:
    """The engine's processes, not started."""
    if engine == "judgeflow":
        env = harness.worker_env(bootstrap, prefix, workdir, JUDGEFLOW_STORE="memory://")
        return [
            harness.Process(
                ["worker", "--loglevel", os.environ.get("BENCH_WORKER_LOGLEVEL", "warn")],
                env | {"JUDGEFLOW_DATA_DIR": str(workdir / f"{prefix}{i}")},
                workdir / f"{prefix}{i}.log",
            )
            for i in range(workers)
        ]
    if engine not in MODULE:
        raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    if workers != 1:
        raise ValueError(f"{engine} runs as one process here")
    env = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "BENCH_TOPIC_PREFIX": prefix, "BENCH_PASSTHROUGH": engine}
    env["BENCH_SOURCE"] = source.removeprefix(prefix)
    return [harness.Process([], env, workdir / f"{prefix}{engine}.log", module=MODULE[engine])]


def outputs_of(engine: str, names: TopicNames) -> list[str]:
    if engine.endswith("passthrough"):
        return [names.done]
    return [names.done, names.second_judge, names.human_review]


def warm_check(names: TopicNames) -> harness.Record:
    """The one check every pass pushes through its engine before measuring."""
    return names.checks, WARM_KEY, json.dumps(workload.claim_check(random.Random(0), "warm")).encode()


async def warm(outputs: list[str], procs: list[harness.Process], first: harness.Record, bootstrap: str) -> None:
    """Push `first` through the started engine: its start-up and group join are not measured."""
    await asyncio.to_thread(produce_fast, bootstrap, [first])
    await harness.wait_for_count(bootstrap, outputs, 1, timeout=180.0, alive=lambda: all(p.alive() for p in procs))


async def _scale_out(
    bootstrap: str, names: TopicNames, prefix: str, outputs: list[str], procs: list[harness.Process]
) -> None:
    """Start the other workers one after the other, as a deployment scales out (with all started at once,
    Faust's first rebalance sometimes never settled; cf. faust-streaming#629), wait until the group is stable
    with every worker holding claim-check partitions, and push 64 checks through. Waiting for the 64 alone
    did not do: the first worker could decide them before the others joined, and the rebalance then came
    inside the measured pass, which read again what the first had not committed (3-5% duplicates)."""
    group = harness.app_id(prefix)

    def alive() -> bool:
        return all(p.alive() for p in procs)

    for p in procs[1:]:
        p.start()
    await harness.wait_for_group(bootstrap, group, names.checks, len(procs), timeout=180.0, alive=alive)
    warm = claim_checks(names, 64, seed=10_000_019)
    await asyncio.to_thread(produce_fast, bootstrap, warm)
    await harness.wait_for_count(bootstrap, outputs, 65, timeout=180.0, alive=alive)
    await harness.wait_for_group(bootstrap, group, names.checks, len(procs), timeout=180.0, alive=alive)


async def measure(
    bootstrap: str,
    workdir: Path,
    *,
    engine: str,
    events: int,
    workers: int = 1,
    seed: int = 3,
    inputs: str = "checks",
) -> BacklogResult:
    """One pass of `engine` over a backlog of `events` claim checks (module docstring); `inputs="judge_outputs"`:
    of the pipeline's judge outputs instead (the passthroughs only: the pipeline's own ceiling)."""
    prefix = harness.new_prefix(engine[:5])
    names = TopicNames.with_prefix(prefix)
    await harness.create(bootstrap, names)
    outputs = outputs_of(engine, names)
    await asyncio.to_thread(stamp_append_time, bootstrap, outputs)
    if inputs == "judge_outputs":
        if not engine.endswith("passthrough"):
            raise ValueError("only the passthroughs read judge outputs")
        backlog: Iterable[harness.Record] = judge_outputs(names, events, seed)
        first = judge_outputs(names, 1, seed + 1)[0]
    else:
        backlog = claim_checks(names, events, seed)
        first = warm_check(names)
    procs = engine_processes(engine, bootstrap, names, prefix, workdir, workers, first[0])
    procs[0].start()
    try:
        await warm(outputs, procs[:1], first, bootstrap)
        if workers > 1:
            await _scale_out(bootstrap, names, prefix, outputs, procs)
        already = sum((await harness.end_offsets(bootstrap, outputs)).values())
        for p in procs:
            p.signal(signal.SIGSTOP)
        try:
            await asyncio.to_thread(produce_fast, bootstrap, backlog)
        finally:
            cpu_before = sum(p.cpu_seconds() for p in procs)
            resumed = time.time()
            for p in procs:
                p.signal(signal.SIGCONT)
        await harness.wait_for_count(
            bootstrap, outputs, already + events, timeout=900.0, alive=lambda: all(p.alive() for p in procs)
        )
        cpu_s = sum(p.cpu_seconds() for p in procs) - cpu_before
        total = sum((await harness.end_offsets(bootstrap, outputs)).values())
        if total - already != events:  # a duplicate would have ended the wait early and inflated the rate
            raise RuntimeError(f"{engine} wrote {total - already} outputs for {events} inputs")
        last = await asyncio.to_thread(last_append_time, bootstrap, outputs)
        return BacklogResult(engine, events, last - resumed, cpu_s, total - already, workers)
    finally:
        for p in procs:
            p.signal(signal.SIGCONT)  # a process stopped by a failed pass must be able to stop
            p.stop()
