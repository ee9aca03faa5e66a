"""Postgres down for 20 s mid-run (reliability scenario 3): the projector
backs off and retries, the stream agents keep routing, everything catches up
with nothing lost or duplicated."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import psycopg
import pytest

from judgeflow import workload
from judgeflow.services.postgres import EmbeddedPostgres
from streams.topics import TopicNames
from tests.conftest import MEASURED
from tests.support import (
    ProjectorProcess,
    Worker,
    consume_until,
    create_topics,
    postgres_workdir,
    produce,
    unique_prefix,
    wait_for,
)

pytestmark = pytest.mark.integration
OUTAGE_SECONDS = 20.0


def test_projector_survives_a_postgres_outage(kafka_bootstrap: str, tmp_path: Path) -> None:
    with postgres_workdir() as workdir:
        _outage(kafka_bootstrap, tmp_path, EmbeddedPostgres(workdir).start())


def _outage(kafka_bootstrap: str, tmp_path: Path, pg: EmbeddedPostgres) -> None:
    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names)
    rng = random.Random(33)
    claims = [(names.checks, f"o{i}".encode(), json.dumps(workload.claim_check(rng, f"o{i}")).encode())
              for i in range(600)]  # fmt: skip
    schema = "outage"

    def counts() -> tuple[int, int, int]:
        """Checks, raw events and routing decisions: the decisions come from other topics than
        the checks, so a wait on the first two alone can end before the last has caught up."""
        try:
            with psycopg.connect(pg.url, autocommit=True, options=f"-c search_path={schema}", connect_timeout=2) as c:
                row = c.execute("SELECT (SELECT count(*) FROM checks), (SELECT count(*) FROM raw_events),"
                                " (SELECT count(*) FROM routing_decisions)").fetchone()  # fmt: skip
                return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)
        except (psycopg.OperationalError, psycopg.errors.UndefinedTable):
            return (-1, -1, -1)

    try:
        # The watchdog stays out of it: a consumer position lost while a batch was dropped would show as a
        # stall here, not be healed by a consumer rebuild a minute later.
        with Worker(kafka_bootstrap, prefix, tmp_path / "w") as worker, ProjectorProcess(
            kafka_bootstrap, prefix, tmp_path / "p", pg.url, schema, JUDGEFLOW_STALL_SECONDS="600"
        ) as projector:  # fmt: skip
            produce(kafka_bootstrap, claims[:300])
            wait_for(lambda: counts() == (300, 300, 300), 120, "first half projected", projector)
            pg.stop()
            down_at = time.monotonic()
            produce(kafka_bootstrap, claims[300:])
            # The stream agents keep routing while the database is down.
            routed = consume_until(kafka_bootstrap, [names.done, names.second_judge, names.human_review],
                                   lambda rs: len(rs) >= 600, timeout=120, worker=worker)  # fmt: skip
            assert projector.alive(), projector.log()[-3000:]
            remaining = OUTAGE_SECONDS - (time.monotonic() - down_at)
            if remaining > 0:
                time.sleep(remaining)  # the fault's duration, not a synchronisation
            pg.start()
            up_at = time.monotonic()
            wait_for(lambda: counts() == (600, 600, 600), 120, "catch-up after the outage", projector)
            caught_up = time.monotonic() - up_at
            assert projector.alive() and worker.alive()
        assert len({json.loads(r.value)["event_id"] for r in routed}) == 600
        with psycopg.connect(pg.url, autocommit=True, options=f"-c search_path={schema}") as c:
            assert c.execute("SELECT count(*), count(DISTINCT claim_id) FROM claim_checks").fetchone() == (600, 600)
            assert c.execute("SELECT count(*) FROM routing_decisions").fetchone() == (600,)
        MEASURED["postgres outage"] = (
            f"{OUTAGE_SECONDS:.0f}s down mid-run: routing went on, projector retried and "
            f"caught up {caught_up:.1f}s after Postgres returned; 0 lost, 0 duplicated"
        )
    finally:
        pg.stop()
