"""`judgeflow soak`: hours of steady load with faults, and what an operator would want to know about them.

Its own broker and Postgres (so it can restart them), a worker and a projector under a restarting supervisor
(as deployments run them), topics created and warmed first; then the real mix (`bench.soak_load`) at a steady
rate for the given minutes. Every `sample_seconds` one sample: events sent against the target, send -> decision
and send -> row (p50 / p99 / max of that interval), worker and projection lag, RSS and CPU of the worker,
projector, broker and Postgres. With faults, spread over the run: a worker SIGKILL, a projector SIGKILL, a
broker restart and a Postgres restart, each with its recovery time (until both processes are ready again). At
the end every published event is accounted for (`bench.accounting`) or the run fails naming what is missing.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from aiokafka import AIOKafkaConsumer

from bench import harness
from bench.accounting import TopicChecker, check_database, describe, summary
from bench.soak_load import EVENTS_PER_UNIT, Event, Ledger, Mix
from bench.soak_observe import DecisionTracker, Resources, VisibilityTracker, Window, ready, scrape_sum, summarize
from judgeflow.services.kafka import KafkaBroker
from judgeflow.services.ports import free_port
from judgeflow.services.postgres import EmbeddedPostgres
from projections.migrate import migrate
from streams.topics import TopicNames

FAULTS = ("worker SIGKILL", "projector SIGKILL", "broker restart", "Postgres restart")
SESSION_TIMEOUT_S = 10
"""JUDGEFLOW_SESSION_TIMEOUT for the soak's worker, as in the reliability suite: with the default 60 s a SIGKILLed
worker's partitions wait a minute for the group to notice, longer than the 30 s recovery target."""


@dataclass(frozen=True)
class SoakOptions:
    minutes: float
    rate: float
    faults: bool = False
    seed: int = 3
    sample_seconds: float = 5.0
    drain_minutes: float = 15.0
    """After the load: how long Postgres may take to hold every acknowledged event before what is still
    missing is counted as lost."""
    workdir: Path = Path(".judgeflow/soak")
    journal: Path | None = None
    """Each sample and each fault appended here as one JSON line as it happens: a run stopped early, or one
    that never drains its backlog, still leaves its time series."""

    def check(self) -> None:
        """One line per bad option (`judgeflow soak` prints it and exits 2)."""
        if not 0.5 <= self.minutes <= 24 * 60:
            raise ValueError(f"--minutes {self.minutes:g}: from 0.5 to 1440")
        if not 1 <= self.rate <= 100_000:
            raise ValueError(f"--rate {self.rate:g}: from 1 to 100000 events/s")
        if not 1 <= self.sample_seconds <= 60:
            raise ValueError(f"--sample-seconds {self.sample_seconds:g}: from 1 to 60")
        if not 0.5 <= self.drain_minutes <= 120:
            raise ValueError(f"--drain-minutes {self.drain_minutes:g}: from 0.5 to 120")
        if self.faults and self.minutes < 2:
            raise ValueError("--faults needs --minutes 2 or more (four faults, each given time to recover)")


class Supervised:
    """A judgeflow process restarted whenever it exits, as `restart: always` would; the exits are counted."""

    def __init__(self, process: harness.Process) -> None:
        self.process = process
        self.exits: list[int | None] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> Supervised:
        self.process.start()
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            popen = self.process.popen
            if popen is not None and popen.poll() is not None:
                self.exits.append(popen.returncode)
                self.process.start()

    @property
    def pid(self) -> int | None:
        popen = self.process.popen
        return popen.pid if popen is not None and popen.poll() is None else None

    def kill(self) -> None:
        if self.process.popen is not None:
            self.process.popen.send_signal(signal.SIGKILL)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.process.stop()


@dataclass
class Run:
    """Everything the soak holds while it runs (and writes out at the end)."""

    options: SoakOptions
    prefix: str
    names: TopicNames
    schema: str
    broker: KafkaBroker
    pg: EmbeddedPostgres
    mix: Mix
    ports: dict[str, int]
    ledger: Ledger = field(default_factory=Ledger)
    samples: list[dict[str, Any]] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    claim_sent: dict[str, float] = field(default_factory=dict)
    """A claim's first check: when it was sent (until its first decision is seen)."""
    run_sent: dict[str, float] = field(default_factory=dict)
    """A run's last judge output: when it was sent (until the run's decision is seen)."""
    check_sent: dict[str, float] = field(default_factory=dict)
    output_sent: dict[str, float] = field(default_factory=dict)
    """When each claim's first check and each judge output was sent (until its row is seen)."""
    procs: dict[str, Supervised] = field(default_factory=dict)
    windows: dict[str, Window] = field(default_factory=dict)
    """The latency trackers' windows: every latency by five minutes, for the targets."""
    sent: int = 0
    unit: int = 0
    started: float = 0.0


def _start_processes(run: Run) -> None:
    workdir = run.options.workdir
    env = harness.worker_env(
        run.broker.bootstrap,
        run.prefix,
        workdir,
        DATABASE_URL=run.pg.url,
        JUDGEFLOW_STORE="rocksdb://",  # as production runs it, with the default state retention (7 days)
        JUDGEFLOW_STATE_RETENTION=str(7 * 24 * 3600),
        JUDGEFLOW_STALL_SECONDS="30",
        JUDGEFLOW_STALL_RECOVERY_SECONDS="30",
        JUDGEFLOW_SESSION_TIMEOUT=str(SESSION_TIMEOUT_S),
    )
    run.procs["worker"] = Supervised(
        harness.Process(
            ["worker", "--loglevel", "warn"],
            env | {"JUDGEFLOW_METRICS_PORT": str(run.ports["worker"])},
            workdir / "worker.log",
        )
    ).start()
    run.procs["projector"] = Supervised(
        harness.Process(
            ["projector", "--schema", run.schema],
            env | {"JUDGEFLOW_METRICS_PORT": str(run.ports["projector"])},
            workdir / "projector.log",
        )
    ).start()


async def _send(run: Run, producer: Any, events: list[Event], retry: list[Event]) -> None:
    """Hand events to the producer; record each one's send time, and count it published once acknowledged (a
    send the broker does not acknowledge is sent again, as a producer would)."""
    for event in events:
        at = time.time()
        if event.kind == "check":
            run.claim_sent.setdefault(event.ident, at)
            run.check_sent.setdefault(event.ident, at)
        elif event.kind == "output":
            run.run_sent[event.ident] = at
            run.output_sent.setdefault(json.loads(event.value)["judge_run_id"], at)
        future = await producer.send(event.topic, key=event.key, value=event.value)
        future.add_done_callback(lambda f, e=event: _acked(run, e, f, retry))
        run.sent += 1


def _acked(run: Run, event: Event, future: asyncio.Future[Any], retry: list[Event]) -> None:
    if future.cancelled() or future.exception() is not None:
        retry.append(event)
    else:
        run.ledger.acked(event)


async def _load(run: Run, until: float, stop: asyncio.Event) -> None:
    """The steady load: units at the rate, ticking every 20 ms; behind, it catches up as fast as it can (and
    the samples say the rate was not kept)."""
    producer = harness.producer(run.broker.bootstrap, request_timeout_ms=60_000)
    await producer.start()
    retry: list[Event] = []
    units_per_s = run.options.rate / EVENTS_PER_UNIT
    start, base = time.monotonic(), run.unit
    try:
        while time.monotonic() < until and not stop.is_set():
            due = base + int((time.monotonic() - start) * units_per_s)
            if retry:
                again, retry[:] = list(retry), []
                await _send(run, producer, again, retry)
            while run.unit < due and time.monotonic() < until:
                await _send(run, producer, run.mix.unit(run.unit), retry)
                run.unit += 1
            await asyncio.sleep(0.02)  # the pacing tick
        await producer.flush()
        while retry:  # everything the broker did not acknowledge, until it does
            again, retry[:] = list(retry), []
            await _send(run, producer, again, retry)
            await producer.flush()
    finally:
        await producer.stop()


async def _fault(run: Run, kind: str) -> None:
    t0 = time.monotonic()
    at = t0 - run.started
    if kind == "worker SIGKILL":
        run.procs["worker"].kill()
    elif kind == "projector SIGKILL":
        run.procs["projector"].kill()
    elif kind == "broker restart":
        await asyncio.to_thread(run.broker.restart)
    else:
        await asyncio.to_thread(run.pg.stop)
        await asyncio.to_thread(run.pg.start)
    recovered = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if all(await asyncio.gather(*(asyncio.to_thread(ready, p) for p in run.ports.values()))):
            recovered = time.monotonic() - t0
            break
        await asyncio.sleep(0.5)  # an orchestrator's probe interval
    fault = {"fault": kind, "at_s": round(at, 1), "recovery_s": None if recovered is None else round(recovered, 1)}
    run.faults.append(fault)
    _journal(run, fault)


async def _faults(run: Run, until: float, stop: asyncio.Event) -> None:
    span = until - time.monotonic()
    for k, kind in enumerate(FAULTS):
        at = until - span + span * (k + 1) / (len(FAULTS) + 1)
        while time.monotonic() < at and not stop.is_set():
            await asyncio.sleep(0.5)  # waiting for the fault's moment
        if stop.is_set():
            return
        await _fault(run, kind)


def _sample(
    run: Run, decisions: DecisionTracker, rows: VisibilityTracker, res: Resources, last: dict[str, Any]
) -> None:
    now = time.monotonic()
    elapsed = now - run.started
    dt = now - last["t"]
    cpu: dict[str, float | None] = {}
    rss: dict[str, float | None] = {}
    pids = {
        "worker": run.procs["worker"].pid,
        "projector": run.procs["projector"].pid,
        "broker": run.broker.process.pid if run.broker.process else None,
        "postgres": run.pg.process.pid if run.pg.process else None,
    }
    res.snapshot()
    for name, pid in pids.items():
        got = res.of_tree(pid)
        rss[name] = None if got is None else round(got[0], 1)
        prev = last["cpu"].get((name, pid))
        # A process tree's CPU can go down (a Postgres backend exited, a process restarted): no figure then.
        used = None if got is None or prev is None else got[1] - prev
        cpu[name] = None if used is None or used < 0 else round(100 * used / dt, 1)
        if got is not None:
            last["cpu"][(name, pid)] = got[1]
    sample = {
        "t_s": round(elapsed, 1),
        "sent": run.sent - last["sent"],
        "target": round(run.options.rate * max(0.0, min(now, last["until"]) - last["t"])),
        "decision_ms": decisions.window.summary(),
        "row_ms": rows.window.summary(),
        "worker_lag": scrape_sum(run.ports["worker"], "judgeflow_consumer_lag"),
        "projection_lag": scrape_sum(run.ports["projector"], "judgeflow_projection_lag"),
        "rss_mib": rss,
        "cpu_percent": cpu,
    }
    decisions.window.values, rows.window.values = [], []
    last.update(t=now, sent=run.sent)
    run.samples.append(sample)
    _journal(run, {"sample": sample})


def _journal(run: Run, entry: dict[str, Any]) -> None:
    if run.options.journal is not None:
        with run.options.journal.open("a") as f:
            f.write(json.dumps(entry) + "\n")


async def _sampler(
    run: Run,
    decisions: DecisionTracker,
    rows: VisibilityTracker,
    stop: asyncio.Event,
    progress: Callable[[dict[str, Any]], None],
) -> None:
    res = Resources()
    last: dict[str, Any] = {
        "t": time.monotonic(),
        "sent": run.sent,
        "cpu": {},
        "until": run.started + run.options.minutes * 60,
    }
    while not stop.is_set():
        await asyncio.sleep(run.options.sample_seconds)  # the sampling interval
        await asyncio.to_thread(_sample, run, decisions, rows, res, last)
        progress(run.samples[-1])


async def _counts(run: Run) -> dict[str, int]:
    async with await psycopg.AsyncConnection.connect(
        run.pg.url, autocommit=True, options=f"-c search_path={run.schema}", connect_timeout=5
    ) as conn:
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM claim_checks), (SELECT count(*) FROM judge_outputs), "
            "(SELECT count(*) FROM invalid_events), (SELECT count(*) FROM evaluation_reconciled_scores "
            "WHERE finalized_at IS NOT NULL), (SELECT count(*) FROM routing_decisions WHERE subject = 'claim' "
            "AND cardinality(judge_ids) = 1)"
        )
        row = await cur.fetchone()
    assert row is not None
    return dict(
        zip(("claim_checks", "judge_outputs", "invalid_events", "final_runs", "first_routes"), row, strict=True)
    )


def _expected(run: Run) -> dict[str, int]:
    pub = run.ledger.published
    return {
        "claim_checks": len(pub.checks),
        "judge_outputs": len(pub.outputs),
        "invalid_events": sum(pub.invalid.values()),
        "final_runs": len(pub.runs),
        "first_routes": len({c for c, _ in pub.checks}),
    }


async def _settled(run: Run, timeout: float) -> dict[str, int]:
    """Wait until Postgres holds every acknowledged event (or the timeout); return what it holds."""
    deadline = time.monotonic() + timeout
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        try:
            counts = await _counts(run)
        except psycopg.Error:
            counts = {}
        if counts and all(counts[k] >= v for k, v in _expected(run).items()):
            return counts
        await asyncio.sleep(1.0)  # polling Postgres for the tail of the load
    return counts


async def _read_decisions(run: Run) -> TopicChecker:
    """Every record of the decision topics (and judge.outputs, for timeout stubs), fed to the checker as read."""
    names = run.names
    topics = [names.reconciled, names.done, names.second_judge, names.human_review, names.judge_outputs]
    ends = await harness.end_offsets(run.broker.bootstrap, topics)
    checker = TopicChecker(names)
    consumer = AIOKafkaConsumer(
        *topics,
        bootstrap_servers=run.broker.bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        positions: dict[tuple[str, int], int] = {}
        while any(positions.get(tp, 0) < end for tp, end in ends.items()):
            batch = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            for tp, records in batch.items():
                for r in records:
                    checker.add(r.topic, r.value)
                if records:
                    positions[(tp.topic, tp.partition)] = records[-1].offset + 1
    finally:
        await consumer.stop()
    return checker


async def _account(run: Run) -> dict[str, Any]:
    counts = await _settled(run, timeout=run.options.drain_minutes * 60)
    expected = _expected(run)
    if not all(counts.get(k, -1) >= v for k, v in expected.items()):
        _journal(run, {"drained": False, "expected": expected, "found": counts})
    topics = (await _read_decisions(run)).result()
    with psycopg.connect(run.pg.url, autocommit=True, options=f"-c search_path={run.schema}") as conn:
        tables = check_database(conn, run.names, run.ledger.published)
    verdict = summary(tables, topics)
    return {
        "expected": _expected(run),
        "found": counts,
        **verdict,
        "table": describe(tables, topics),
        "ok": verdict["lost"] == verdict["duplicated"] == verdict["unexpected"] == verdict["double_decisions"] == 0,
    }


async def _timed(run: Run, progress: Callable[[dict[str, Any]], None]) -> None:
    """The measured phase: load, trackers, sampler and faults together, for the given minutes."""
    stop = asyncio.Event()
    decisions = DecisionTracker(run.broker.bootstrap, run.names, run.claim_sent, run.run_sent)
    rows = VisibilityTracker(run.broker.bootstrap, run.names, run.pg.url, run.schema, run.check_sent, run.output_sent)
    run.started = time.monotonic()
    decisions.window.origin = rows.window.origin = run.started
    run.windows = {"decision_ms": decisions.window, "row_ms": rows.window}
    until = run.started + run.options.minutes * 60
    watchers = [asyncio.create_task(t.run(stop)) for t in (decisions, rows)]
    watchers.append(asyncio.create_task(_sampler(run, decisions, rows, stop, progress)))
    faults = asyncio.create_task(_faults(run, until, stop)) if run.options.faults else None
    try:
        await _load(run, until, stop)
        if faults is not None:
            await faults
    finally:
        stop.set()
        await asyncio.gather(*watchers, return_exceptions=True)


async def _warm(run: Run, units: int) -> None:
    """The rubric and `units` units through the whole pipeline before anything is measured."""
    producer = harness.producer(run.broker.bootstrap)
    await producer.start()
    retry: list[Event] = []
    try:
        await _send(run, producer, [run.mix.rubric_event()], retry)
        for _ in range(units):
            await _send(run, producer, run.mix.unit(run.unit), retry)
            run.unit += 1
        await producer.flush()
    finally:
        await producer.stop()
    if retry:
        raise RuntimeError(f"warm-up: the broker refused {len(retry)} event(s)")
    counts = await _settled(run, timeout=300)
    if not all(counts.get(k, -1) >= v for k, v in _expected(run).items()):
        raise RuntimeError(f"warm-up: not projected after 300 s: {counts} of {_expected(run)}")
    run.claim_sent.clear()
    run.run_sent.clear()
    run.check_sent.clear()
    run.output_sent.clear()


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM ends the soak as Ctrl-C does, through its cleanup: the broker, Postgres, worker and projector
    run in sessions of their own and would otherwise outlive it."""
    raise SystemExit(128 + signum)


def run_soak(options: SoakOptions, progress: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Run the soak; return its results (`bench.soak_report` writes and judges them)."""
    options.check()
    workdir = options.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    broker = KafkaBroker(workdir / "kafka").start()
    pg = EmbeddedPostgres(workdir / "postgres").start()
    prefix = harness.new_prefix("soak")
    names = TopicNames.with_prefix(prefix)
    run = Run(
        options,
        prefix,
        names,
        prefix.rstrip(".").replace("-", "_"),
        broker,
        pg,
        Mix(names, options.seed),
        {"worker": free_port(), "projector": free_port()},
    )
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)  # a `kill` stops the services too
    try:
        asyncio.run(harness.create(broker.bootstrap, names))
        migrate(pg.url, run.schema)
        _start_processes(run)
        asyncio.run(_warm(run, units=max(50, int(options.rate))))
        asyncio.run(_timed(run, progress))
        accounting = asyncio.run(_account(run))
    finally:
        signal.signal(signal.SIGTERM, previous)
        for proc in run.procs.values():
            proc.stop()
        pg.stop()
        broker.stop()
    restarts = {name: proc.exits for name, proc in run.procs.items()}
    windows = {name: {str(k): summarize(list(v)) for k, v in w.buckets.items()} for name, w in run.windows.items()}
    return {
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(options).items()},
        "samples": run.samples,
        "windows": windows,
        "faults": run.faults,
        "exits": restarts,
        "published": run.ledger.counts,
        "accounting": accounting,
    }
