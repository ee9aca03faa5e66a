"""The dashboard's and the report's plain-text pieces, without a database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

from judgeflow.dashboard import (
    EVALUATION_RUN_COLUMNS,
    READ_MODELS,
    describe_database,
    evaluation_run_cells,
    schema_problem,
)
from tests.support import REPO


def test_a_final_run_shows_revision_notice_contradictions_and_route() -> None:
    run = {"evaluation_run_id": "r1", "status": "final", "revision": 4, "judges_in": "2/3", "score": 71.0,
           "contradictions": ["correctness (spread 41)", "process (spread 33)"], "notice": "1 judge unavailable",
           "route": "human_review", "route_reason": "contradictions"}  # fmt: skip
    cells = evaluation_run_cells(run)
    assert len(cells) == len(EVALUATION_RUN_COLUMNS)
    assert cells == ("r1", "final (rev 4)", "2/3", "71", "correctness (spread 41), process (spread 33)",
                     "1 judge unavailable", "human_review (contradictions)")  # fmt: skip


def test_a_run_without_a_revision_or_route_says_so() -> None:
    run = {"evaluation_run_id": "r2", "status": "running", "revision": None, "judges_in": None, "score": None,
           "contradictions": [], "notice": None, "route": None, "route_reason": None}  # fmt: skip
    assert evaluation_run_cells(run) == ("r2", "running", "—", "—", "none", "—", "—")


def test_a_missing_schema_names_the_migrate_command_and_the_schemas_that_hold_read_models() -> None:
    problem = schema_problem("judgeflow", "h:5432/db", list(READ_MODELS), False, ["judgeflow_demo_1"])
    assert problem is not None
    assert 'schema "judgeflow" does not exist in h:5432/db' in problem.problem
    assert problem.fixes[0].startswith("judgeflow migrate   #")  # the default schema needs no option
    assert problem.fixes[1].startswith("judgeflow dashboard --schema judgeflow_demo_1   #")
    other = schema_problem("mine", "h:5432/db", list(READ_MODELS), True, [], command="report")
    assert other is not None and "holds none of judgeflow's read models" in other.problem
    assert other.fixes == ("judgeflow migrate --schema mine   # then `judgeflow projector` fills it from Kafka",)
    assert other.as_text().splitlines()[1] == f"  fix: {other.fixes[0]}"


def test_an_old_schema_is_told_to_migrate_and_a_complete_one_has_no_problem() -> None:
    old = schema_problem("judgeflow", "h:5432/db", ["evaluation_runs_overview"], True, ["x"])
    assert old is not None and "lacks evaluation_runs_overview" in old.problem
    assert old.fixes == ("judgeflow migrate",)
    assert schema_problem("judgeflow", "h:5432/db", [], True, []) is None


def test_the_database_is_described_without_its_password() -> None:
    assert describe_database("postgresql://u:secret@db.example:6543/reads") == "db.example:6543/reads"


def _dead_database_url() -> str:
    from judgeflow.services.ports import free_port

    return f"postgresql://postgres:pw@127.0.0.1:{free_port()}/postgres"


def test_the_dashboard_api_answers_503_with_the_fix_when_postgres_is_unreachable() -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from judgeflow.dashboard import make_app

    async def get() -> tuple[int, dict[str, Any], int]:
        async with TestClient(TestServer(make_app(_dead_database_url(), "judgeflow"))) as client:
            api = await client.get("/api/summary")
            page = await client.get("/")
            return api.status, await api.json(), page.status

    status, body, page = asyncio.run(get())
    assert (status, page) == (503, 200)
    assert body["problem"].startswith("cannot reach Postgres at 127.0.0.1:") and "pw" not in body["problem"]
    assert any("judgeflow services up" in f for f in body["fixes"])


def test_report_on_an_unreachable_database_is_one_clear_error() -> None:
    out = subprocess.run([sys.executable, "-m", "judgeflow.cli", "report"], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "DATABASE_URL": _dead_database_url()}, timeout=60)  # fmt: skip
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "cannot reach Postgres at 127.0.0.1:" in out.stderr and "fix: set DATABASE_URL" in out.stderr
