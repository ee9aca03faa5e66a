"""The stream topology, in one place: every agent, what it reads, keeps and writes.

`AGENTS`, `TIMERS` and `TASKS` are the declaration `judgeflow topology`
prints; `build_app` wires each one and refuses to send anywhere it did not
declare. Agents are thin: decode a record, call a pure function
(`streams.edge`, `streams.runs`, `streams.claims`), store the state it
returns, send the records it returns.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import faust

from judgeflow import metrics
from judgeflow.config import Settings
from schemas import ContractError, JudgeOutput, parse_evaluation_run, parse_rubric
from schemas.errors import ErrorDetail
from streams import claims, runs
from streams.durable_commit import DurableApp
from streams.edge import (
    H_SOURCE,
    Outgoing,
    SourceRef,
    dead_letter,
    screen_claim_check,
    screen_judge_output,
)
from streams.rubric_cache import RubricCache
from streams.topics import TopicNames

log = logging.getLogger("judgeflow.streams")
FULL_SCAN_SECONDS = 60.0
ROCKSDB_OPTIONS = {"write_buffer_size": 8 << 20, "max_write_buffer_number": 2, "block_cache_size": 32 << 20,
                   "block_cache_compressed_size": 8 << 20}  # fmt: skip


@dataclass(frozen=True)
class AgentSpec:
    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    keeps: tuple[str, ...] = ()
    does: str = ""
    kind: str = "Agent"


AGENTS: tuple[AgentSpec, ...] = (
    AgentSpec("validate_judge_outputs", reads=("judge_outputs",), writes=("judge_outputs_valid", "invalid"),
              does="validate against the contract, upcast to 2.1, attach warnings; dead-letter the rest"),
    AgentSpec("validate_claim_checks", reads=("checks",), writes=("checks_valid", "invalid", "human_review"),
              does="validate claim checks; an invalid one is dead-lettered and queued for humans as unclear"),
    AgentSpec("validate_rubrics", reads=("rubrics",), writes=("invalid",),
              does="dead-letter invalid rubric versions (valid ones feed every worker's rubric cache)"),
    AgentSpec("reconcile_runs", reads=("judge_outputs_valid", "runs", "reconcile_control"),
              keeps=("run_state",), writes=("reconciled", "done", "human_review", "invalid"),
              does="hold outputs until run and rubric are known; provisional revision per judge, "
              "final when all expected judges are in; route the final evaluation"),
    AgentSpec("route_claims", reads=("checks_valid", "claims_control"), keeps=("claim_state",),
              writes=("done", "second_judge", "human_review"),
              does="route the first verdict by the rubric's policy; aggregate later judges' verdicts"),
)  # fmt: skip
TIMERS: tuple[AgentSpec, ...] = (
    AgentSpec("judge_timeouts", reads=(), keeps=("run_state",), writes=("judge_outputs", "reconcile_control"),
              kind="Timer", does="failed stub per judge past the run's timeout (owned partitions only); "
              "resume runs whose rubric arrived; log stale runs"),
    AgentSpec("claim_resumes", reads=(), keeps=("claim_state",), writes=("claims_control",), kind="Timer",
              does="resume claims whose rubric arrived"),
)  # fmt: skip
TASKS: tuple[AgentSpec, ...] = (
    AgentSpec("rubric_cache", reads=("rubrics",), writes=(), kind="Task",
              does="every worker reads all of judge.rubrics into memory (a global table)"),
)  # fmt: skip


def describe(names: TopicNames) -> str:
    """Kafka-Streams-style text description of the topology."""
    lines = ["Topology"]
    for spec in (*AGENTS, *TIMERS, *TASKS):
        lines.append(f"  {spec.kind}: {spec.name}")
        if spec.reads:
            lines.append(f"    reads:  {', '.join(getattr(names, r) for r in spec.reads)}")
        if spec.keeps:
            lines.append(f"    keeps:  {', '.join(spec.keeps)} (table, changelog-backed)")
        if spec.writes:
            lines.append(f"    writes: {', '.join(getattr(names, r) for r in spec.writes)}")
        if spec.does:
            lines.append(f"    does:   {spec.does}")
    return "\n".join(lines)


def _credentials(settings: Settings) -> Any:
    sec = settings.kafka_security
    if sec.security_protocol == "PLAINTEXT":
        return None
    ssl_context = sec.aiokafka_kwargs().get("ssl_context")
    if sec.sasl_mechanism:
        return faust.SASLCredentials(
            username=sec.sasl_username, password=sec.sasl_password,
            mechanism=sec.sasl_mechanism, ssl_context=ssl_context,
        )  # fmt: skip
    return faust.SSLCredentials(ssl_context)


def _now() -> datetime:
    return datetime.now(UTC)


Handler = Callable[[Any, bytes, SourceRef], list[Outgoing]]


def build_app(settings: Settings, *, stale_after_seconds: float = 300.0) -> faust.App:
    names = TopicNames.with_prefix(settings.topic_prefix)
    app = DurableApp(
        settings.app_id,
        broker=settings.broker_url,
        broker_credentials=_credentials(settings),
        store=settings.store,
        datadir=str(settings.data_dir),
        processing_guarantee="at_least_once",
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        web_enabled=settings.web_enabled,
        web_host=settings.web_host,
        web_port=settings.web_port,
        consumer_auto_offset_reset="earliest",
        # How long the group waits for a silent (crashed) worker before its
        # partitions move to the others.
        broker_session_timeout=settings.session_timeout_seconds,
    )
    app.stream_topics = frozenset(getattr(names, role) for spec in AGENTS for role in spec.reads)
    topics = {
        role: app.topic(
            name,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=settings.partitions,
        )  # fmt: skip
        for role, name in names.all().items()
    }
    # Keys are str (raw UTF-8 in the changelog), values JSON documents of the state models.
    # Faust's RocksDB defaults allow 3 x 64 MiB write buffers and a 2 GiB block
    # cache per table, so a worker's RSS grew with every key it saw; these bound it.
    rocksdb = ROCKSDB_OPTIONS if settings.store.startswith("rocksdb") else None
    run_table = app.Table("run_state", default=None, partitions=settings.partitions, key_type=str, options=rocksdb)
    claim_table = app.Table("claim_state", default=None, partitions=settings.partitions, key_type=str,
                            options=rocksdb)  # fmt: skip
    cache = RubricCache(settings.kafka_bootstrap_servers, names.rubrics,
                        **settings.kafka_security.aiokafka_kwargs())  # fmt: skip

    async def publish(spec: AgentSpec, records: list[Outgoing]) -> None:
        for record in records:
            if record.role not in spec.writes:
                raise RuntimeError(f"{spec.name} may not write {record.role}")
            await topics[record.role].send(key=record.key, value=record.value, headers=record.headers)
            _count(record)

    def _count(record: Outgoing) -> None:
        if record.role == "invalid":
            codes = dict(record.headers).get("judgeflow-error-codes", b"").decode().split(",")
            for code in filter(None, codes):
                metrics.INVALID.labels(code).inc()
        elif record.role in ("done", "second_judge", "human_review"):
            subject = "evaluation" if b'"subject":"evaluation"' in record.value else "claim"
            metrics.ROUTES.labels(record.role, subject).inc()

    def agent(spec: AgentSpec, handler: Handler, contract: str, *, needs_rubrics: bool = False) -> None:
        channel = topics[spec.reads[0]] if len(spec.reads) == 1 else app.topic(
            *(getattr(names, r) for r in spec.reads), key_type=bytes, value_type=bytes,
            key_serializer="raw", value_serializer="raw",
        )  # fmt: skip

        async def process(stream: faust.StreamT) -> None:
            if needs_rubrics:
                await cache.ready.wait()
            async for event in stream.events():
                msg = event.message
                src = SourceRef(msg.topic, msg.partition, msg.offset, msg.key)
                raw: bytes = event.value if isinstance(event.value, bytes) else bytes(event.value or b"")
                try:
                    out = handler(msg, raw, src)
                except Exception as exc:  # a bug must not stall the partition
                    log.exception("%s failed on %s", spec.name, src.coordinates())
                    err = ContractError([ErrorDetail("INTERNAL_ERROR", (), repr(exc)[:500])])
                    out = [dead_letter(raw, src, contract, err)]
                await publish(spec, out)
                metrics.EVENTS.labels(spec.name).inc()

        process.__name__ = spec.name
        app.agent(channel, name=spec.name)(process)

    def validate_judge_outputs(msg: Any, raw: bytes, src: SourceRef) -> list[Outgoing]:
        return screen_judge_output(raw, src, max_bytes=settings.max_payload_bytes)

    def validate_claim_checks(msg: Any, raw: bytes, src: SourceRef) -> list[Outgoing]:
        return screen_claim_check(raw, src, max_bytes=settings.max_payload_bytes)

    def validate_rubrics(msg: Any, raw: bytes, src: SourceRef) -> list[Outgoing]:
        if msg.value is None:
            return []  # a tombstone retires a rubric version
        try:
            rubric = parse_rubric(raw)
        except ContractError as err:
            return [dead_letter(raw, src, "rubric", err)]
        if src.key is not None and src.key.decode(errors="replace") != rubric.rubric_version_id:
            return [dead_letter(raw, src, "rubric", ContractError.single(
                "KEY_MISMATCH", "key must be the rubric_version_id"))]  # fmt: skip
        return []

    def reconcile_runs(msg: Any, raw: bytes, src: SourceRef) -> list[Outgoing]:
        now = _now()
        if msg.topic == names.runs:
            try:
                run = parse_evaluation_run(raw)
            except ContractError as err:
                return [dead_letter(raw, src, "evaluation_run", err)]
            if src.key is not None and src.key.decode(errors="replace") != run.evaluation_run_id:
                return [dead_letter(raw, src, "evaluation_run", ContractError.single(
                    "KEY_MISMATCH", "key must be the evaluation_run_id"))]  # fmt: skip
            key = run.evaluation_run_id
        else:
            key = (src.key or b"").decode()
        doc = run_table.get(key)
        state = runs.RunState.model_validate(doc) if doc else runs.RunState.new(key, src.partition, now)
        if msg.topic == names.runs:
            state, out = runs.on_run(state, run, cache.get, now)
        elif msg.topic == names.judge_outputs_valid:
            output = JudgeOutput.model_validate_json(raw)  # validated upstream
            headers = dict(msg.headers or [])
            source = (headers.get(H_SOURCE) or b"").decode()
            state, out = runs.on_output(state, output, source, cache.get, now)
        else:
            state, out = runs.on_resume(state, cache.get, now)
        run_table[key] = state.model_dump(mode="json")
        (open_runs.discard if state.final else open_runs.add)(key)
        return out

    def route_claims(msg: Any, raw: bytes, src: SourceRef) -> list[Outgoing]:
        now = _now()
        key = (src.key or b"").decode()
        doc = claim_table.get(key)
        state = claims.ClaimState.model_validate(doc) if doc else claims.ClaimState(
            claim_id=key, partition=src.partition)  # fmt: skip
        if msg.topic == names.checks_valid:
            from schemas import ClaimCheck

            state, out = claims.on_check(state, ClaimCheck.model_validate_json(raw), cache.get, now)
        else:
            state, out = claims.on_resume(state, cache.get, now)
        claim_table[key] = state.model_dump(mode="json")
        (waiting_claims.add if state.waiting_for == "rubric" else waiting_claims.discard)(key)
        return out

    agent(AGENTS[0], validate_judge_outputs, "judge_output")
    agent(AGENTS[1], validate_claim_checks, "claim_check")
    agent(AGENTS[2], validate_rubrics, "rubric")
    agent(AGENTS[3], reconcile_runs, "judge_output", needs_rubrics=True)
    agent(AGENTS[4], route_claims, "claim_check", needs_rubrics=True)

    @app.task
    async def rubric_cache() -> None:
        await cache.run()

    def owned(topic: str) -> set[int]:
        return {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topic}

    stubs_sent: set[str] = set()
    resumes_sent: set[tuple[str, int]] = set()
    stale_reported: set[str] = set()
    # The timers visit only keys that can need them: runs not final, claims held
    # for a rubric. The agents keep these indexes up to date; a full table scan
    # refills them when this worker's partitions change (recovered state) and
    # once a minute. Scanning every key on every tick cost O(keys) per second,
    # which with RocksDB slowed the whole worker down fivefold.
    open_runs: set[str] = set()
    waiting_claims: set[str] = set()
    scans: dict[str, tuple[frozenset[int], float]] = {}

    def rescan(name: str, table: Any, mine: set[int], index: set[str], keep: Callable[[dict], bool]) -> None:
        last = scans.get(name)
        now = time.monotonic()
        if last is not None and last[0] == frozenset(mine) and now - last[1] < FULL_SCAN_SECONDS:
            return
        scans[name] = (frozenset(mine), now)
        index.update(key for key, doc in list(table.items()) if doc and keep(doc))

    async def sweep_runs() -> None:
        now = _now()
        mine = owned(names.judge_outputs_valid)
        rescan("runs", run_table, mine, open_runs, lambda doc: not doc.get("final"))
        for key in list(open_runs):
            doc = run_table.get(key)
            if not doc or doc.get("final"):
                open_runs.discard(key)
                continue
            if doc.get("partition") not in mine:
                continue
            rubric_arrived = doc.get("waiting_for") == "rubric" and cache.get(doc.get("rubric_version_id") or "")
            if rubric_arrived and (key, cache.version) not in resumes_sent:
                resumes_sent.add((key, cache.version))
                await publish(TIMERS[0], [Outgoing("reconcile_control", key.encode(), b'{"kind":"resume"}')])
            if doc.get("waiting_for") == "run" and key not in stale_reported:
                age = (now - datetime.fromisoformat(doc["first_seen_at"])).total_seconds()
                if age > stale_after_seconds:
                    stale_reported.add(key)
                    log.warning("stale run %s: outputs held %.0fs without an evaluation.runs event", key, age)
            if runs.missing_judges_after_deadline(doc, now):
                state = runs.RunState.model_validate(doc)
                if not state.accepted and not state.held and key not in stale_reported:
                    stale_reported.add(key)
                    log.warning("stale run %s: no judge answered before the timeout", key)
                for stub in runs.timeout_stubs(state, now):
                    if stub.judge_run_id in stubs_sent:
                        continue
                    stubs_sent.add(stub.judge_run_id)
                    await publish(TIMERS[0], [Outgoing("judge_outputs", key.encode(),
                                                       stub.model_dump_json().encode())])  # fmt: skip

    async def sweep_claims() -> None:
        mine = owned(names.checks_valid)
        rescan("claims", claim_table, mine, waiting_claims, lambda doc: doc.get("waiting_for") == "rubric")
        for key in list(waiting_claims):
            doc = claim_table.get(key)
            if not doc or doc.get("waiting_for") != "rubric":
                waiting_claims.discard(key)
                continue
            if doc.get("partition") not in mine:
                continue
            if cache.get(doc.get("rubric_version_id") or "") and (key, cache.version) not in resumes_sent:
                resumes_sent.add((key, cache.version))
                await publish(TIMERS[1], [Outgoing("claims_control", key.encode(), json.dumps(
                    {"kind": "resume"}).encode())])  # fmt: skip

    def timer(spec: AgentSpec, fn: Callable[[], Awaitable[None]]) -> None:
        async def tick() -> None:
            if not cache.ready.is_set():
                return
            try:
                await fn()
            except Exception:
                log.exception("timer %s failed; retrying next tick", spec.name)

        tick.__name__ = spec.name
        app.timer(settings.timer_interval_seconds, name=spec.name)(tick)

    timer(TIMERS[0], sweep_runs)
    timer(TIMERS[1], sweep_claims)

    @app.timer(5.0, name="consumer_lag")
    async def consumer_lag() -> None:
        consumer = app.consumer
        for tp in app.assignor.assigned_actives():
            highwater = consumer.highwater(tp)
            position = await consumer.position(tp)
            if highwater is not None and position is not None:
                metrics.CONSUMER_LAG.labels(tp.topic, str(tp.partition)).set(max(0, highwater - position))

    @app.task
    async def metrics_endpoint() -> None:
        metrics.serve_from_env(settings.web_host)

    return app
