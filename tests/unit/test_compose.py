"""docker-compose.yml agrees with the CLI and the ports the services serve.

No Docker engine runs here, so this is what can be checked without one: every
judgeflow service's command parses with the real click commands, every health
check probes the port that service serves, the long-running services restart,
and the schema is migrated before anything uses it.
"""

from __future__ import annotations

import http.server
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from judgeflow.cli import main

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
JUDGEFLOW = {name: s for name, s in SERVICES.items() if "build" in s or str(s.get("image", "")).startswith("judgeflow")}
LONG_RUNNING = {"worker", "projector", "dashboard"}
PROBE = re.compile(r"http://127\.0\.0\.1:(\d+)(/\S*?)['\"]")


def _parsed(service: dict[str, Any]) -> click.Context:
    """The service's command parsed by the real CLI (raises on an unknown command or option)."""
    name, *args = service["command"]
    assert name in main.commands, f"`judgeflow {name}` does not exist"
    with click.Context(main, info_name="judgeflow", obj={}) as parent:
        return main.commands[name].make_context(name, list(args), parent=parent)


def _probe(service: dict[str, Any]) -> tuple[int, str]:
    """(port, path) of the URL a service's health check requests."""
    match = PROBE.search(" ".join(service["healthcheck"]["test"]))
    assert match, service["healthcheck"]
    return int(match.group(1)), match.group(2)


def test_the_stack_is_complete() -> None:
    assert {"kafka", "postgres", "migrate", "worker", "projector", "dashboard"} <= set(SERVICES)
    assert set(JUDGEFLOW) == {"migrate"} | LONG_RUNNING
    assert SERVICES["kafka"]["image"].startswith("apache/kafka:")
    assert SERVICES["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft


@pytest.mark.parametrize("name", sorted(JUDGEFLOW))
def test_every_command_exists_in_the_cli(name: str) -> None:
    assert _parsed(SERVICES[name]).command.name == SERVICES[name]["command"][0]


@pytest.mark.parametrize("name", ["worker", "projector"])
def test_worker_and_projector_probe_healthz_on_their_own_metrics_port(name: str) -> None:
    port = int(SERVICES[name]["environment"]["JUDGEFLOW_METRICS_PORT"])
    assert _probe(SERVICES[name]) == (port, "/healthz")


def test_worker_and_projector_ports_differ() -> None:
    ports = [SERVICES[n]["environment"]["JUDGEFLOW_METRICS_PORT"] for n in ("worker", "projector")]
    assert len(set(ports)) == 2


def test_the_metrics_port_variable_is_the_one_judgeflow_reads() -> None:
    sources = "".join(p.read_text() for p in (ROOT / "judgeflow").rglob("*.py"))
    assert 'environ.get("JUDGEFLOW_METRICS_PORT")' in sources or '"JUDGEFLOW_METRICS_PORT"' in sources


def test_dashboard_probe_uses_its_port_option_and_listens_beyond_loopback() -> None:
    params = _parsed(SERVICES["dashboard"]).params
    assert _probe(SERVICES["dashboard"])[0] == params["port"]
    assert params["host"] == "0.0.0.0"
    assert f"{params['port']}:{params['port']}" in SERVICES["dashboard"]["ports"]


def test_long_running_services_restart_and_migrate_runs_once() -> None:
    for name in LONG_RUNNING | {"kafka", "postgres"}:
        assert SERVICES[name].get("restart") == "unless-stopped", name
    assert SERVICES["migrate"].get("restart", "no") == "no"
    assert "healthcheck" not in SERVICES["migrate"]


def test_migrate_runs_after_postgres_and_before_everything_that_uses_the_schema() -> None:
    assert SERVICES["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in LONG_RUNNING:
        assert SERVICES[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
    for name in ("worker", "projector"):
        assert SERVICES[name]["depends_on"]["kafka"]["condition"] == "service_healthy", name


class _Status(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        self.send_response(self.status)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def status_server() -> Iterator[http.server.HTTPServer]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Status)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("name", sorted(LONG_RUNNING))
def test_health_probe_passes_on_200_and_fails_on_503(name: str, status_server: http.server.HTTPServer) -> None:
    """Run the probe command itself (python is what the image provides) against a local server."""
    test = SERVICES[name]["healthcheck"]["test"]
    assert test[:2] == ["CMD", "python"], "the slim image has python, not curl"
    port = _probe(SERVICES[name])[0]
    args = [a.replace(f"127.0.0.1:{port}", f"127.0.0.1:{status_server.server_port}") for a in test[1:]]
    args[0] = sys.executable
    for status, ok in ((200, True), (503, False)):
        _Status.status = status
        assert (subprocess.run(args, capture_output=True, timeout=30).returncode == 0) is ok, status
