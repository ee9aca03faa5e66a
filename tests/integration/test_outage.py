"""Broker and Postgres gone under a caught-up worker and projector, on services of the test's own.

Gone for good: health turns 503 within the stall deadline naming what is unreachable and since when,
readiness at once, each process exits with status 4 after JUDGEFLOW_OUTAGE_EXIT_SECONDS, and the log stays
small. Back within the window: both resume where they were, with nothing lost and nothing projected twice.

Time is compressed tenfold: a 60 s outage with one repeat line per 6 s (JUDGEFLOW_LOG_REPEAT_SECONDS) writes
the lines a 10-minute outage writes at the default 60 s, so the issue's 200-line budget for ten minutes is
checked in one minute."""

from __future__ import annotations

import json
import random
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import pytest

from judgeflow import workload
from judgeflow.services.kafka import KafkaBroker
from judgeflow.services.ports import free_port
from judgeflow.services.postgres import EmbeddedPostgres
from streams.topics import TopicNames
from tests.conftest import MEASURED
from tests.support import ProjectorProcess, Worker, create_topics, postgres_workdir, produce, unique_prefix, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

OUTAGE_EXIT_SECONDS = 60
STALL_SECONDS = 8
LINE_BUDGET = 200


def health(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError as exc:
        return 0, {"reason": str(exc)}


def lines(process: Worker) -> int:
    return len(process.log().splitlines())


class Services:
    """A broker and a Postgres of this test's own, and a worker and a projector on them with health ports."""

    def __init__(self, tmp: Path, workdir: Path) -> None:
        self.broker = KafkaBroker(tmp / "kafka").start()
        self.pg = EmbeddedPostgres(workdir).start()
        self.prefix = unique_prefix()
        self.names = TopicNames.with_prefix(self.prefix)
        create_topics(self.broker.bootstrap, self.names)
        self.ports = {"worker": free_port(), "projector": free_port()}
        env = {"JUDGEFLOW_STALL_SECONDS": str(STALL_SECONDS), "JUDGEFLOW_STALL_RECOVERY_SECONDS": str(STALL_SECONDS),
               "JUDGEFLOW_OUTAGE_EXIT_SECONDS": str(OUTAGE_EXIT_SECONDS),
               "JUDGEFLOW_LOG_REPEAT_SECONDS": "6"}  # fmt: skip
        self.worker = Worker(self.broker.bootstrap, self.prefix, tmp / "w",
                             JUDGEFLOW_METRICS_PORT=str(self.ports["worker"]), **env)  # fmt: skip
        self.worker.command = ("worker", "--loglevel", "info")  # the CLI's default, as deployments run it
        self.projector = ProjectorProcess(self.broker.bootstrap, self.prefix, tmp / "p", self.pg.url, "outage",
                                          JUDGEFLOW_METRICS_PORT=str(self.ports["projector"]), **env)  # fmt: skip
        self.rng = random.Random(33)
        self.sent = 0

    def send_claims(self, n: int) -> None:
        start, self.sent = self.sent, self.sent + n
        produce(self.broker.bootstrap, [
            (self.names.checks, f"o{i}".encode(), json.dumps(workload.claim_check(self.rng, f"o{i}")).encode())
            for i in range(start, self.sent)])  # fmt: skip

    def counts(self) -> tuple[int, int, int]:
        try:
            with psycopg.connect(self.pg.url, autocommit=True, options="-c search_path=outage", connect_timeout=2) as c:
                row = c.execute("SELECT (SELECT count(*) FROM checks), (SELECT count(*) FROM raw_events),"
                                " (SELECT count(*) FROM routing_decisions)").fetchone()  # fmt: skip
                return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)
        except (psycopg.OperationalError, psycopg.errors.UndefinedTable):
            return (-1, -1, -1)

    def caught_up(self) -> None:
        n = self.sent
        wait_for(lambda: self.counts() == (n, n, n), 120, f"{n} claims projected", self.projector)
        for name in self.ports:
            wait_for(lambda name=name: health(self.ports[name], "/healthz")[0] == 200, 60, f"{name} live")  # type: ignore[misc]

    def close(self) -> None:
        for p in (self.worker, self.projector):
            p.stop()
        self.pg.stop()
        self.broker.stop()


@pytest.fixture
def services(tmp_path: Path) -> Any:
    with postgres_workdir() as workdir:
        s = Services(tmp_path, workdir)
        try:
            yield s
        finally:
            s.close()


def test_gone_for_good_health_says_why_then_each_process_exits_4_with_a_short_log(services: Services) -> None:
    s = services
    s.worker.start()
    s.projector.start()
    s.send_claims(200)
    s.caught_up()
    before = {"worker": lines(s.worker), "projector": lines(s.projector)}
    s.broker.stop()
    s.pg.stop()
    down_at = time.monotonic()
    seen: dict[str, dict[str, Any]] = {"worker": {}, "projector": {}}
    processes = {"worker": s.worker, "projector": s.projector}
    while any(p.alive() for p in processes.values()):
        elapsed = time.monotonic() - down_at
        assert elapsed < OUTAGE_EXIT_SECONDS + 60, f"still running {elapsed:.0f}s into the outage"
        for name, proc in processes.items():
            if not proc.alive():
                continue
            ready, _ = health(s.ports[name], "/readyz")
            live, body = health(s.ports[name], "/healthz")
            if ready == 503:
                seen[name].setdefault("not ready", elapsed)
            if live == 503:
                seen[name].setdefault("not live", elapsed)
                seen[name].setdefault("reason", body.get("reason", ""))
        time.sleep(0.5)  # the polling interval of an orchestrator's probe, not a synchronisation
    exited = time.monotonic() - down_at
    written = {n: lines(p) - before[n] for n, p in processes.items()}
    MEASURED["outage, gone for good"] = json.dumps({**seen, "exited after": round(exited, 1), "lines": written})
    for name, proc in processes.items():
        assert proc.process is not None and proc.process.returncode == 4, (name, proc.log()[-3000:])
        assert seen[name]["not ready"] < STALL_SECONDS, (name, seen)
        assert seen[name]["not live"] < STALL_SECONDS + 10, (name, seen)
        assert f"broker {s.broker.bootstrap} unreachable for" in seen[name]["reason"], (name, seen)
        assert "UTC)" in seen[name]["reason"]
        assert written[name] <= LINE_BUDGET, (name, written, proc.log()[-6000:])
        assert "exiting" in proc.log() and "JUDGEFLOW_OUTAGE_EXIT_SECONDS=60" in proc.log()
    assert f"Postgres 127.0.0.1:{s.pg.port}/postgres unreachable for" in seen["projector"]["reason"]
    assert exited >= OUTAGE_EXIT_SECONDS


def test_back_within_the_window_both_resume_with_nothing_lost_or_projected_twice(services: Services) -> None:
    s = services
    s.worker.start()
    s.projector.start()
    s.send_claims(200)
    s.caught_up()
    s.broker.stop()
    s.pg.stop()
    down_at = time.monotonic()
    wait_for(lambda: health(s.ports["projector"], "/healthz")[0] == 503, STALL_SECONDS + 15, "projector not live")
    wait_for(lambda: health(s.ports["worker"], "/healthz")[0] == 503, STALL_SECONDS + 15, "worker not live")
    s.broker.start()
    s.pg.start()
    assert time.monotonic() - down_at < OUTAGE_EXIT_SECONDS
    s.send_claims(200)
    s.caught_up()  # the same processes: neither exited
    assert s.worker.alive() and s.projector.alive()
    assert s.counts() == (400, 400, 400)
    for proc in (s.worker, s.projector):
        assert "reachable again after" in proc.log(), proc.log()[-3000:]
