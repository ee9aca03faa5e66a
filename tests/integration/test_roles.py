"""Least-privilege Postgres roles (`judgeflow migrate --roles`, DESIGN decision 15) on a real Postgres: no login
role owns anything, so none can disable the raw tables' triggers; each role is refused what its process does not
need; and a projector logged in as its role projects a real pipeline, which the desk, as its role, serves."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from judgeflow import workload
from judgeflow.dashboard import find_problem, summary
from judgeflow.desk.leases import LeaseStore
from judgeflow.desk.serve import desk_pool
from projections.migrate import migrate
from projections.roles import ANALYST, DESK, OWNER, PROJECTOR
from tests.scaffold import Pipeline, fresh_schema
from tests.support import REPO, ProjectorProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DENIED = psycopg.errors.InsufficientPrivilege


def as_role(database_url: str, role: str) -> str:
    """The same server and database as `role` (a URL, as DATABASE_URL must be; the test server trusts it)."""
    parts = urlsplit(database_url)
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{role}@{host}"))


def can_create_roles(database_url: str) -> bool:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user").fetchone()
    return bool(row and row[0])


def attempt(database_url: str, role: str, schema: str, statement: str, args: Any = None) -> str:
    """Run one statement as `role` in a transaction rolled back afterwards: "ok", or the refusal's SQLSTATE."""
    with psycopg.connect(as_role(database_url, role), options=f"-c search_path={schema}") as conn:
        try:
            conn.execute(statement, args)
            return "ok"
        except psycopg.Error as exc:
            return exc.sqlstate or type(exc).__name__
        finally:
            conn.rollback()


RAW_ROW = ("INSERT INTO raw_events (topic, partition, \"offset\", value, received_at) "
           "VALUES ('t', 0, 0, 'x', now())")  # fmt: skip


@pytest.fixture
def roles_schema(database_url: str) -> Any:
    if not can_create_roles(database_url):
        pytest.skip("the test's Postgres user cannot create roles")
    with fresh_schema(database_url, "roles") as schema:
        migrate(database_url, schema, roles=True)
        yield schema


def test_no_login_role_owns_a_thing_and_the_owner_cannot_log_in(database_url: str, roles_schema: str) -> None:
    with psycopg.connect(database_url) as conn:
        owners = conn.execute(
            "SELECT DISTINCT pg_get_userbyid(c.relowner) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s UNION SELECT DISTINCT pg_get_userbyid(p.proowner) FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s "
            "UNION SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = %s",
            [roles_schema] * 3,
        ).fetchall()
        logins = dict(conn.execute("SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname LIKE 'judgeflow_%'"))
    assert owners == [(OWNER,)]
    assert logins == {OWNER: False, PROJECTOR: True, ANALYST: True, DESK: True}
    migrate(database_url, roles_schema, roles=True)  # idempotent: again, nothing changes and nothing fails


@pytest.mark.parametrize(
    ("role", "statement", "outcome"),
    [
        (PROJECTOR, RAW_ROW, "ok"),
        (PROJECTOR, "UPDATE raw_events SET value = 'y'", "42501"),
        (PROJECTOR, "DELETE FROM raw_events", "42501"),
        (PROJECTOR, "TRUNCATE raw_events", "42501"),
        (PROJECTOR, "ALTER TABLE raw_events DISABLE TRIGGER insert_only", "42501"),
        (PROJECTOR, "DROP TRIGGER insert_only ON raw_events", "42501"),
        (PROJECTOR, "UPDATE judge_outputs SET positive_signal = 'x'", "42501"),
        (PROJECTOR, "TRUNCATE checks", "42501"),
        (PROJECTOR, "UPDATE checks SET final_route = 'done'", "ok"),
        (PROJECTOR, "DELETE FROM review_items", "ok"),
        (PROJECTOR, "SELECT count(*) FROM review_leases", "42501"),
        (PROJECTOR, "CREATE TABLE sneaky (x int)", "42501"),
        (ANALYST, "SELECT count(*) FROM evaluation_runs_overview", "ok"),
        (ANALYST, "SELECT count(*) FROM review_queue_status", "ok"),
        (ANALYST, "SELECT count(*) FROM checks", "ok"),
        (ANALYST, "SELECT count(*) FROM raw_events", "42501"),
        (
            ANALYST,
            "INSERT INTO reviews (review_id, claim_id, reviewer, final_verdict, created_at) "
            "VALUES (gen_random_uuid(), 'c', 'x', 'pass', now())",
            "42501",
        ),  # fmt: skip
        (ANALYST, "UPDATE checks SET final_route = 'done'", "42501"),
        (DESK, "SELECT count(*) FROM review_items", "ok"),
        (
            DESK,
            "INSERT INTO review_leases (lease_id, claim_id, slot, reviewer, source, expires_at) "
            "VALUES (gen_random_uuid(), 'c', 1, 'ana', 'routed', now())",
            "ok",
        ),  # fmt: skip
        (DESK, "UPDATE review_leases SET closed = 'expired'", "ok"),
        (DESK, "DELETE FROM review_leases", "42501"),
        (
            DESK,
            "INSERT INTO reviews (review_id, claim_id, reviewer, final_verdict, created_at) "
            "VALUES (gen_random_uuid(), 'c', 'x', 'pass', now())",
            "42501",
        ),  # fmt: skip
        (DESK, "UPDATE review_items SET open = false", "42501"),
        (DESK, "SELECT count(*) FROM raw_events", "42501"),
        (DESK, "SELECT count(*) FROM routing_decisions", "42501"),
    ],
)
def test_each_role_is_refused_what_its_process_does_not_need(
    database_url: str, roles_schema: str, role: str, statement: str, outcome: str
) -> None:
    assert attempt(database_url, role, roles_schema, statement) == outcome


def test_the_projector_as_its_role_projects_and_the_desk_as_its_role_serves(pipeline: Pipeline) -> None:
    p = pipeline
    if not can_create_roles(p.database_url):
        pytest.skip("the test's Postgres user cannot create roles")
    done = subprocess.run(
        [sys.executable, "-m", "judgeflow.cli", "migrate", "--roles", "--schema", p.schema],
        env={"DATABASE_URL": p.database_url, "PATH": "/usr/bin:/bin"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert PROJECTOR in done.stdout and OWNER in done.stdout
    rng = random.Random(41)
    docs = [workload.claim_check(rng, f"{p.prefix}r{i}", verdict="fail", score=0.1, confidence=0.3) for i in range(20)]
    projector = ProjectorProcess(p.bootstrap, p.prefix, p.tmp / "projector-role", as_role(p.database_url, PROJECTOR),
                                 p.schema)  # fmt: skip
    with p.worker(), projector:
        p.send((p.names.checks, d["claim_id"].encode(), json.dumps(d).encode()) for d in docs)
        items: Callable[[], bool] = lambda: p.count("SELECT count(*) FROM review_items WHERE open") == 20  # noqa: E731
        p.wait_projected(projector, 120, "20 review items, projected as judgeflow_projector", also=items)

        async def serve() -> tuple[dict[str, Any], dict[str, Any] | None]:
            pool = desk_pool(as_role(p.database_url, DESK), p.schema)
            await pool.open(wait=True)
            try:
                store = LeaseStore(pool)
                return await store.stats("ana"), await store.next("ana")
            finally:
                await pool.close()

        stats, leased = asyncio.run(serve())
        assert stats["depth"] == 20 and leased is not None and leased["item"]["kind"] == "claim"
        with psycopg.connect(as_role(p.database_url, ANALYST), options=f"-c search_path={p.schema}") as conn:
            assert find_problem(conn, p.schema, "test") is None
            shown = summary(conn)  # everything the dashboard shows, read as the analysts' role
        assert sum(n for _, n in shown["throughput"]) >= 20
    assert "permission denied" not in projector.log()
