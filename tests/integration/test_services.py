"""The services the project starts itself are real and answer real requests."""

from __future__ import annotations

import os

import psycopg
import pytest

from judgeflow.services.kafka import metadata_ready
from tests.conftest import docker_answers

pytestmark = pytest.mark.integration


def test_kafka_answers_metadata(kafka_bootstrap: str) -> None:
    assert metadata_ready(kafka_bootstrap)


def test_postgres_answers_sql(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        (version,) = conn.execute("SHOW server_version").fetchone()  # type: ignore[misc]
    assert int(version.split(".")[0]) >= 15


@pytest.mark.skipif(not docker_answers(), reason="no Docker daemon answers on this machine")
def test_testcontainers_path_starts_kafka_and_postgres() -> None:
    from testcontainers.kafka import KafkaContainer
    from testcontainers.postgres import PostgresContainer

    with KafkaContainer("apache/kafka:4.1.1").with_kraft() as kafka:
        assert metadata_ready(kafka.get_bootstrap_server())
    with PostgresContainer("postgres:17", driver=None) as pg, psycopg.connect(pg.get_connection_url()) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_services_cli_up_status_down(tmp_path: object) -> None:
    import subprocess
    import sys

    from tests.support import REPO

    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL")}
    env["JUDGEFLOW_STATE_DIR"] = str(tmp_path)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "judgeflow.cli", "services", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=180,
        )

    up = cli("up")
    assert up.returncode == 0, up.stderr
    exports = dict(
        line.removeprefix("export ").split("=", 1) for line in up.stdout.splitlines() if line.startswith("export ")
    )
    assert "started in" in up.stdout
    try:
        assert metadata_ready(exports["KAFKA_BOOTSTRAP_SERVERS"])
        with psycopg.connect(exports["DATABASE_URL"]) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        status = cli("status")
        assert status.returncode == 0 and "ready" in status.stdout
    finally:
        down = cli("down")
    assert down.returncode == 0 and "stopped" in down.stdout
    assert cli("status").returncode == 1
