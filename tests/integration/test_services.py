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


def test_services_up_secure_prints_each_principal_and_no_password(tmp_path: object) -> None:
    """What a user runs first on the secured path: the exports and one line per principal, passwords only in
    files their owner reads; the broker refuses plaintext and takes each principal's settings as printed."""
    import stat
    import subprocess
    import sys
    from pathlib import Path

    from judgeflow.acl import needs_of
    from judgeflow.config import load_settings
    from judgeflow.kafka_access import AccessRefused, check_access
    from tests.support import REPO

    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL")}
    env["JUDGEFLOW_STATE_DIR"] = str(tmp_path)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "judgeflow.cli", "services", *args], capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=180)  # fmt: skip

    up = cli("up", "--secure")
    assert up.returncode == 0, up.stderr
    try:
        lines = up.stdout.splitlines()
        exports = dict(line.removeprefix("export ").split("=", 1) for line in lines if line.startswith("export "))
        assert exports["KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL" and "SASL_SSL, SCRAM-SHA-512, ACLs" in lines[0]
        principals = {line.split()[1]: dict(kv.split("=", 1) for kv in line.split()[2:])
                      for line in lines if line.startswith("# ")}  # fmt: skip
        assert set(principals) == {"worker", "projector", "judge", "desk", "analyst"}
        for role, own in principals.items():
            secret_file = Path(own["KAFKA_SASL_PASSWORD_FILE"])
            assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
            assert secret_file.read_text().strip() not in up.stdout + up.stderr
            settings = load_settings({**exports, **own})
            needs = needs_of(role, settings.app_id, settings.topic_prefix)
            assert check_access(settings.kafka_bootstrap_servers, settings.kafka_security, needs), role
        plain = load_settings({"KAFKA_BOOTSTRAP_SERVERS": exports["KAFKA_BOOTSTRAP_SERVERS"]})
        with pytest.raises(AccessRefused, match="expects TLS"):
            check_access(plain.kafka_bootstrap_servers, plain.kafka_security, needs_of("analyst", "judgeflow", ""))
        status = cli("status")
        assert status.returncode == 0 and "ready" in status.stdout, status.stdout
        assert cli("up").returncode == 1  # not silently the other kind
    finally:
        down = cli("down")
    assert down.returncode == 0 and "stopped" in down.stdout
