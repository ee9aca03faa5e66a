"""`judgeflow demo`: the whole pipeline on embedded services, end to end.

Starts Kafka and Postgres unless configured, migrates, runs the worker and
the projector as subprocesses, and publishes a seeded workload: evaluation
runs with three judges over a weighted three-lane rubric (evidence, flags,
adjustments, telemetry; some judges time out, some outputs are partial or
from 1.0 / 2.0 producers, some judges contradict each other), malformed
events, a nightly claim batch shaped like seed 003's example, second-judge
answers for what is routed to the second judge and human reviews for part of
the human queue. It then waits until Postgres accounts for every published
event (projected or dead-lettered), prints a summary and exits 0 only if
nothing is missing. Every service it started is stopped, also on Ctrl-C,
unless `keep` is set: then the services it started keep running (recorded as
`judgeflow services up` records them) and their data stays. The read models
are in a schema of their own per run, so it always prints the exact dashboard
command that shows them when they outlive the demo.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from judgeflow import workload
from judgeflow.calibration import compute, print_calibration
from judgeflow.dashboard import report_html
from judgeflow.dashboard import summary as dashboard_summary
from judgeflow.demo_reviews import REVIEWERS, DeskRun, review_at_desk
from judgeflow.services import local
from judgeflow.services.local import RunningServices, local_services
from projections.analytics import kappa_by_judge
from projections.calibration import reviewed_rubrics
from projections.migrate import migrate
from projections.review_figures import THROUGHPUT_TITLE, review_sections
from streams.topics import TopicNames, ensure_topics

MALFORMED = [
    b"\xff\xfe not utf-8",
    b"{truncated",
    b'{"schema_version": "2.1", "schema_version": "2.0"}',
    b'{"schema_version": "2.1", "overall_score": NaN}',
    b'{"schema_version": "9.0"}',
]
SECOND_JUDGE = "faithfulness-judge-v2"


@dataclass
class Published:
    outputs: int = 0
    runs: int = 0
    rubrics: int = 0
    checks: int = 0
    reviews: int = 0
    records: int = 0
    missing_judges: int = 0
    by_topic: Counter[str] = field(default_factory=Counter)


def run_records(names: TopicNames, runs: int, seed: int, timeout_s: float) -> tuple[list[Any], Published]:
    rng = random.Random(seed)
    pub = Published()
    rubric = workload.rubric(workload.stable_id("demo-rubric", seed))
    rid = rubric["rubric_version_id"]
    records: list[tuple[str, bytes, bytes]] = [(names.rubrics, rid.encode(), json.dumps(rubric).encode())]
    pub.rubrics = 1
    for i in range(runs):
        run_id = workload.stable_id("demo-run", seed, i)
        run = workload.evaluation_run(run_id, rubric_id=rid, timeout_s=timeout_s)
        run["started_at"] = workload.iso(workload.datetime.now(workload.UTC))
        records.append((names.runs, run_id.encode(), json.dumps(run).encode()))
        pub.runs += 1
        silent = workload.JUDGE_MODELS[i % 3] if i % 10 == 3 else None  # a judge that never answers
        pub.missing_judges += silent is not None
        base = rng.randint(40, 85)
        for j, judge in enumerate(workload.JUDGE_MODELS):
            if judge == silent:
                continue
            contradicts = i % 7 == 5 and j == 2
            doc = workload.judge_output(
                rng,
                run_id,
                judge,
                rubric_id=rid,
                submission_id=run["submission_id"],
                base_score=max(0, base - 40) if contradicts else base,
                with_flag=rng.random() < 0.2,
                with_adjustment=rng.random() < 0.2,
                status="partial" if rng.random() < 0.05 else "complete",
            )
            if (i + j) % 7 == 0:
                doc = workload.as_version_1_0(doc)
            elif (i + j) % 5 == 0:
                doc = workload.as_version_2_0(doc)
            records.append((names.judge_outputs, run_id.encode(), json.dumps(doc).encode()))
            pub.outputs += 1
    for k, raw in enumerate(MALFORMED * max(1, runs // 10)):
        records.append((names.judge_outputs, f"bad-{k}".encode(), raw))
        pub.outputs += 1
    return records, pub


NIGHT_MINUTES = 600
DRIFT_SPAN = (0.7, 0.9)
"""The part of the night (as shares of the batch, in checking order) in which the first judge turns harsh."""


def nightly_claims(names: TopicNames, claims: int, seed: int, pub: Published) -> list[Any]:
    """Seed 003's illustrative batch: 62% confident passes, 18% borderline,
    11% low-confidence fails, 9% confident fails; 1 in 100 sent with a string.
    The checks are spread over a 10-hour night in order; from the 7th to the 9th
    hour the judge fails most claims it would have passed (a drift to alert on)."""
    rng = random.Random(seed + 1)
    records = []
    for c in range(claims):
        claim_id = f"claim-{seed}-{c:05d}"
        bucket = c % 100
        if bucket < 62:
            v, s, conf = "pass", rng.uniform(0.8, 1.0), rng.uniform(0.6, 1.0)
        elif bucket < 80:
            v, s, conf = rng.choice(["pass", "fail"]), rng.uniform(0.45, 0.79), rng.uniform(0.6, 1.0)
        elif bucket < 91:
            v, s, conf = "fail", rng.uniform(0.0, 0.44), rng.uniform(0.1, 0.59)
        else:
            v, s, conf = "fail", rng.uniform(0.0, 0.44), rng.uniform(0.6, 1.0)
        if DRIFT_SPAN[0] <= c / claims < DRIFT_SPAN[1] and v == "pass" and rng.random() < 0.7:
            v, s = "fail", rng.uniform(0.2, 0.6)
        doc = workload.claim_check(rng, claim_id, verdict=v, score=s, confidence=conf)
        doc["checked_at"] = workload.iso(workload.EPOCH + timedelta(minutes=NIGHT_MINUTES * c / claims))
        if bucket == 99:
            doc["confidence"] = str(doc["confidence"])  # a producer that sends strings
        records.append((names.checks, claim_id.encode(), json.dumps(doc).encode()))
        pub.checks += 1
    return records


async def _send(bootstrap: str, records: list[Any], progress: Progress, label: str, pub: Published) -> None:
    from aiokafka import AIOKafkaProducer

    task = progress.add_task(label, total=len(records))
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5)
    await producer.start()
    try:
        for topic, key, value in records:
            await producer.send(topic, key=key, value=value)
            pub.records += 1
            pub.by_topic[topic] += 1
            progress.advance(task)
        await producer.flush()
    finally:
        await producer.stop()


async def _follow_up(
    bootstrap: str, names: TopicNames, claims: int, seed: int, progress: Progress, pub: Published, timeout: float
) -> None:
    """Answer the second-judge queue, as the second judge would (people review at the desk: `demo_reviews`)."""
    from aiokafka import AIOKafkaConsumer

    rng = random.Random(seed + 2)
    task = progress.add_task("first routing decisions", total=claims)
    consumer = AIOKafkaConsumer(
        names.done,
        names.second_judge,
        names.human_review,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        group_id=None,
    )
    await consumer.start()
    first: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(first) < claims and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for r in records:
                    d = json.loads(r.value)
                    if d.get("subject") == "claim" and len(d.get("judge_ids", [])) <= 1 and d["claim_id"] not in first:
                        first[d["claim_id"]] = d
                        progress.advance(task)
    finally:
        await consumer.stop()
    answers = []
    for claim_id, d in sorted(first.items()):
        if d["route"] == "second_judge":
            verdict = rng.choices(["pass", "fail", "unclear"], weights=[55, 40, 5])[0]
            doc = workload.claim_check(rng, claim_id, judge_id=SECOND_JUDGE, verdict=verdict)
            answers.append((names.checks, claim_id.encode(), json.dumps(doc).encode()))
    pub.checks += len(answers)
    await _send(bootstrap, answers, progress, "second judge", pub)


def _counts(conn: psycopg.Connection) -> dict[str, int]:
    row = conn.execute("""
        SELECT (SELECT count(*) FROM raw_events),
               (SELECT count(*) FROM judge_outputs WHERE coalesce(failure_reason, '') NOT LIKE 'timeout:%%'),
               (SELECT count(*) FROM judge_outputs WHERE failure_reason LIKE 'timeout:%%'),
               (SELECT count(*) FROM invalid_events WHERE contract = 'judge_output'),
               (SELECT count(*) FROM claim_checks),
               (SELECT count(*) FROM invalid_events WHERE contract = 'claim_check'),
               (SELECT count(*) FROM evaluation_runs WHERE started_at IS NOT NULL),
               (SELECT count(*) FROM reviews),
               (SELECT count(*) FROM evaluation_reconciled_scores WHERE status = 'final'),
               (SELECT count(*) FROM checks WHERE final_route IS NOT NULL)
    """).fetchone()
    keys = [
        "raw",
        "outputs",
        "stubs",
        "invalid_outputs",
        "checks",
        "invalid_checks",
        "runs",
        "reviews",
        "finals",
        "claims_routed",
    ]
    return dict(zip(keys, (int(v) for v in row or ()), strict=True))


def _accounted(c: dict[str, int], pub: Published, claims: int) -> bool:
    return (
        c["outputs"] + c["invalid_outputs"] == pub.outputs
        and c["checks"] + c["invalid_checks"] == pub.checks
        and c["runs"] == pub.runs
        and c["reviews"] == pub.reviews
        # A judge that never answers gets a stub; on a loaded machine a slow one may too
        # (wall-clock timeouts), and its late output is still projected.
        and c["raw"] == pub.records + c["stubs"]
        and c["stubs"] >= pub.missing_judges
        and c["finals"] == pub.runs
        and c["claims_routed"] == claims
    )


DRIFT_CLAIMS = 500
"""From this many claims the night has enough checks per hour (>= 30) for the drift detector."""


def _wait_for_drift_alert(conn: psycopg.Connection, timeout: float) -> None:
    """The drift alert comes a moment after the last check: the worker flushes its window counts every second
    and the window closes once the judge's later checks are in."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if conn.execute("SELECT count(*) FROM judge_alerts").fetchone() != (0,):
            return
        time.sleep(0.5)


def _judge_quality(console: Console, conn: psycopg.Connection) -> None:
    """Agreement over all judges (Krippendorff's alpha), the drift alerts raised, and calibration from the
    human reviews (`judgeflow calibrate` without the per-bin tables and the plot)."""
    t = Table(title="agreement between judges: Krippendorff's alpha, all judges", title_justify="left")
    for col in ("rubric", "of", "alpha", "95% interval", "units"):
        t.add_column(col)
    for rubric, lane, value, low, high, units in conn.execute(
        "SELECT rubric, lane_key, value, ci_low, ci_high, units FROM judge_agreement_by_rubric "
        "WHERE judges = 'all judges' AND statistic LIKE 'alpha%'"
    ):
        shown = "undefined" if value is None else f"{value:.3f}"
        t.add_row(
            rubric,
            f"lane {lane}" if lane else "claim verdicts",
            shown,
            "" if low is None else f"{low:.2f} to {high:.2f}",
            str(units),
        )
    console.print(t)
    t = Table(title="judge drift alerts (hour windows of the night)", title_justify="left")
    for col in ("judge", "statistic", "window", "value (n)", "baseline", "z"):
        t.add_column(col, no_wrap=col == "judge")
    for judge, stat, lane, start, value, n, base, sd, z in conn.execute(
        "SELECT judge, statistic, lane, window_start, value, n, baseline_mean, baseline_sd, z FROM judge_alerts "
        "ORDER BY window_start, judge, statistic, lane"
    ):
        t.add_row(
            judge,
            stat + (f" {lane}" if lane else ""),
            start.strftime("%m-%d %H:%M"),
            f"{value:.3f} ({n})",
            f"{base:.3f}±{sd:.3f}",
            f"{z:+.1f}",
        )
    console.print(t)
    for rubric, _name, _reviewed in reviewed_rubrics(conn):
        print_calibration(compute(conn, rubric), console, bins=False)


def _summary(console: Console, conn: psycopg.Connection, c: dict[str, int], pub: Published) -> None:
    t = Table(title="judgeflow demo: published vs accounted for in Postgres", title_justify="left")
    for col in ("events", "published", "projected", "dead-lettered"):
        t.add_column(col, justify="right" if col != "events" else "left")
    t.add_row("judge outputs", str(pub.outputs), str(c["outputs"]), str(c["invalid_outputs"]))
    t.add_row("timeout stubs (by judgeflow)", "", str(c["stubs"]), "")
    t.add_row("claim checks (both judges)", str(pub.checks), str(c["checks"]), str(c["invalid_checks"]))
    t.add_row("evaluation runs", str(pub.runs), str(c["runs"]), "")
    t.add_row("human reviews", str(pub.reviews), str(c["reviews"]), "")
    t.add_row("raw input records", str(pub.records + c["stubs"]), str(c["raw"]), "")
    console.print(t)
    runs = conn.execute("""SELECT count(*) FILTER (WHERE status = 'final'), count(*) FILTER (WHERE has_contradictions),
                                  count(*) FILTER (WHERE notice IS NOT NULL)
                           FROM evaluation_reconciled_scores""").fetchone()
    t = Table(title="evaluation runs", title_justify="left")
    for col in ("reconciled (final)", "with contradictions", "with a judge unavailable"):
        t.add_column(col, justify="right")
    t.add_row(*(str(v) for v in runs or ()))
    console.print(t)
    t = Table(title="routing decisions per topic", title_justify="left")
    for col in ("route", "claims", "evaluations"):
        t.add_column(col)
    for route, claims, evals in conn.execute("""SELECT route, count(*) FILTER (WHERE subject = 'claim'),
            count(*) FILTER (WHERE subject = 'evaluation') FROM routing_decisions GROUP BY route ORDER BY route"""):
        t.add_row(f"routing.{route}", str(claims), str(evals))
    console.print(t)
    t = Table(title="dead letters by code", title_justify="left")
    t.add_column("code")
    t.add_column("events", justify="right")
    for code, n in conn.execute("SELECT code, events FROM dead_letters_by_code"):
        t.add_row(code, str(n))
    console.print(t)
    t = Table(title="judges vs human review", title_justify="left")
    for col in ("judge_id", "reviewed", "overturn rate", "Cohen's kappa"):
        t.add_column(col)
    overturn = {j: float(r) for j, r, _ in conn.execute("SELECT * FROM overturn_rate_by_judge")}
    for judge, n, kappa in kappa_by_judge(conn):
        t.add_row(judge, str(n), f"{overturn.get(judge, 0):.2f}", "undefined" if kappa is None else f"{kappa:.3f}")
    console.print(t)
    _judge_quality(console, conn)


def _desk_figures(console: Console, conn: psycopg.Connection, desk: DeskRun) -> None:
    """What the review desk measured: its reviews against the pipeline, between people, and the queue left."""
    console.print(
        f"review desk: {desk.reviews} reviews by {len(REVIEWERS)} scripted reviewers over its HTTP API, "
        f"{desk.run_reviews} of them evaluation runs ({desk.overturns} overturning the pipeline's verdict, "
        f"{desk.changed_after_reveal} changed after the reveal); the queue still wants {desk.left} reviews"
    )
    for title, (columns, rows) in review_sections(conn).items():
        if title == THROUGHPUT_TITLE:
            continue  # a script's review times say nothing about people's
        t = Table(title=title, title_justify="left")
        for col in columns:
            t.add_column(col)
        for row in rows:
            t.add_row(*(str(v) for v in row))
        console.print(t)


def _spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "judgeflow.cli", *args], env=env, stdout=out, stderr=subprocess.STDOUT
        )


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for p in processes:
        if p.poll() is None:
            p.terminate()
    for p in processes:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


def judgeflow_command() -> str:
    """How to run this very judgeflow from the current shell: `judgeflow` when that is on PATH,
    else its script beside this interpreter (e.g. `.venv/bin/judgeflow` after `make demo`)."""
    script = Path(sys.executable).parent / "judgeflow"
    on_path = shutil.which("judgeflow")
    if on_path and script.exists() and Path(on_path).resolve() == script.resolve():
        return "judgeflow"
    if script.exists():
        with contextlib.suppress(ValueError):
            return shlex.quote(str(script.relative_to(Path.cwd())))
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m judgeflow.cli"


def kept_lines(
    database_url: str, schema: str, started_here: bool, command: str, state_dir: str | None, desk_env: str = ""
) -> list[str]:
    """What to print when the demo's read models outlive it: where they are, the dashboard and review desk
    commands that show them and, for services the demo started, how to stop them."""
    env = f"DATABASE_URL={shlex.quote(database_url)}"
    lines = [
        f"read models kept in schema {schema}",
        f"dashboard: {env} {command} dashboard --schema {schema}",
        f"review:    {env} {desk_env}{command} review --as you --schema {schema}   # the desk, on http://127.0.0.1:8060/",
        f"report:    {env} {command} report --schema {schema} --html report.html",
        f"calibrate: {env} {command} calibrate --rubric none --schema {schema}",
    ]
    if started_here:
        state = f"JUDGEFLOW_STATE_DIR={shlex.quote(state_dir)} " if state_dir else ""
        lines.append(f"stop:      {state}{command} services down   # the services the demo started run until then")
    return lines


@contextlib.contextmanager
def _services(work: Path, keep: bool) -> Iterator[tuple[RunningServices, bool]]:
    """The services to run on and whether the demo started any; with `keep`, what it starts is
    detached and recorded like `judgeflow services up` (so `services down` stops it)."""
    configured = bool(os.environ.get("KAFKA_BOOTSTRAP_SERVERS")) and bool(os.environ.get("DATABASE_URL"))
    if keep and not configured:
        yield local.up(), True
        return
    with local_services(work / "services") as services:
        yield services, not configured


def _announce(console: Console, services: Any) -> None:
    for name, url, secs in (
        ("kafka", services.kafka_bootstrap_servers, services.kafka_seconds),
        ("postgres", services.database_url.split("@")[-1], services.postgres_seconds),
    ):
        how = f"started in {secs:.1f}s" if secs else "configured"
        console.print(f"{name:9}{url}  ({how})")


def _start(
    console: Console, services: Any, work: Path, processes: list[subprocess.Popen[bytes]]
) -> tuple[TopicNames, str, str]:
    """Fresh topics and read models for this run (and their prefix), and a worker and a projector on them."""
    stamp = int(time.time())
    prefix, schema = f"demo{stamp}.", f"judgeflow_demo_{stamp}"  # fresh topics and read models per run
    console.print(f"topics   {prefix}*\nschema   {schema}")
    names = TopicNames.with_prefix(prefix)
    asyncio.run(ensure_topics(services.kafka_bootstrap_servers, names, partitions=4, replication=1))
    migrate(services.database_url, schema)
    env = {
        **os.environ,
        **services.env(),
        "JUDGEFLOW_TOPIC_PREFIX": prefix,
        "JUDGEFLOW_APP_ID": f"judgeflow-{prefix.rstrip('.')}",
        "JUDGEFLOW_TIMER_INTERVAL": "0.5",
        "JUDGEFLOW_DATA_DIR": str(work / "worker"),
        "JUDGEFLOW_DRIFT_FLUSH_SECONDS": "1",
    }
    processes.append(_spawn(["worker", "--loglevel", "warn"], env, work / "worker.log"))
    processes.append(_spawn(["projector", "--schema", schema], env, work / "projector.log"))
    return names, schema, prefix


def _wait_accounted(
    conn: psycopg.Connection,
    pub: Published,
    claims: int,
    processes: list[subprocess.Popen[bytes]],
    progress: Progress,
    timeout: float,
) -> tuple[dict[str, int], bool]:
    """Poll Postgres until every published event is projected or dead-lettered (or a process died, or time is up)."""
    task = progress.add_task("waiting for Postgres", total=1.0)
    deadline = time.monotonic() + timeout
    counts = _counts(conn)
    while not _accounted(counts, pub, claims) and time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            break
        time.sleep(0.5)  # the poll interval of a progress bar, not a synchronisation
        counts = _counts(conn)
        done = (counts["checks"] + counts["outputs"]) / max(1, pub.checks + pub.outputs)
        progress.update(task, completed=min(1.0, done))
    ok = _accounted(counts, pub, claims)
    progress.update(task, completed=1.0 if ok else None)
    if ok and claims >= DRIFT_CLAIMS:
        _wait_for_drift_alert(conn, min(60.0, max(1.0, deadline - time.monotonic())))
    return counts, ok


def _report(console: Console, conn: psycopg.Connection, counts: dict[str, int], pub: Published, desk: DeskRun) -> None:
    _summary(console, conn, counts, pub)
    _desk_figures(console, conn, desk)
    report = Path(os.environ.get("JUDGEFLOW_STATE_DIR", ".judgeflow")) / "demo-report.html"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(report_html(dashboard_summary(conn)))
    print(f"HTML report: {report.resolve()}", flush=True)  # one line, never wrapped


def _verdict(console: Console, ok: bool, elapsed: float, kept: list[str], work: Path) -> int:
    for line in kept:
        print(line, flush=True)  # plain lines, never wrapped: they are commands to copy
    if not kept:
        print(
            f"the demo's services and data are deleted; `{judgeflow_command()} demo --keep` (make demo KEEP=1) "
            "keeps them and prints the dashboard command",
            flush=True,
        )
    if ok:
        console.print(f"every published event is accounted for in Postgres; {elapsed:.1f}s end to end")
        return 0
    console.print(f"EVENTS UNACCOUNTED FOR after {elapsed:.1f}s (logs in {work})")
    for p in ("worker.log", "projector.log"):
        tail = (work / p).read_text(errors="replace").splitlines()[-15:] if (work / p).exists() else []
        console.print(f"--- {p}\n" + "\n".join(tail))
    return 1


def run_demo(
    runs: int = 30,
    claims: int = 1000,
    seed: int = 7,
    timeout: float = 300.0,
    judge_timeout: float = 15.0,
    keep: bool = False,
) -> int:
    console = Console()
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="judgeflow-demo-"))
    processes: list[subprocess.Popen[bytes]] = []
    kept: list[str] = []
    ok = False
    try:
        with _services(work, keep) as (services, started_here):
            _announce(console, services)
            names, schema, prefix = _start(console, services, work, processes)
            desk = DeskRun()
            bootstrap, url, search_path = (
                services.kafka_bootstrap_servers,
                services.database_url,
                f"-c search_path={schema}",
            )
            first, pub = run_records(names, runs, seed, judge_timeout)
            first += nightly_claims(names, claims, seed, pub)
            with Progress(console=console) as progress:
                asyncio.run(_send(bootstrap, first, progress, "publishing", pub))
                asyncio.run(_follow_up(bootstrap, names, claims, seed, progress, pub, timeout))
                with psycopg.connect(url, autocommit=True, options=search_path) as conn:
                    counts, ok = _wait_accounted(conn, pub, claims, processes, progress, timeout)
                    if ok:  # every routed claim is in the queue: people review half of it at the desk
                        desk = asyncio.run(review_at_desk(url, schema, bootstrap, prefix, seed))
                        pub.reviews += desk.reviews
                        pub.records += desk.reviews  # published by the desk: raw input records too
                        counts, ok = _wait_accounted(conn, pub, claims, processes, progress, timeout)
            with psycopg.connect(url, autocommit=True, options=search_path) as conn:
                _report(console, conn, counts, pub, desk)
            _stop(processes)
            if keep or not started_here or os.environ.get("DATABASE_URL"):
                state_dir = os.environ.get("JUDGEFLOW_STATE_DIR")
                desk_env = f"KAFKA_BOOTSTRAP_SERVERS={shlex.quote(bootstrap)} JUDGEFLOW_TOPIC_PREFIX={prefix} "
                kept = kept_lines(url, schema, keep and started_here, judgeflow_command(), state_dir, desk_env)
    except KeyboardInterrupt:
        console.print(
            "interrupted: stopping the worker and the projector"
            + (" (services kept: `judgeflow services down` stops them)" if keep else " and the services")
        )
        _stop(processes)
        return 130
    finally:
        _stop(processes)
    return _verdict(console, ok, time.monotonic() - t0, kept, work)
