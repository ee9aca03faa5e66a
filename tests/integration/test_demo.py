"""`judgeflow demo` as a user runs it, on the session's services; its exit
code is the accounting check (every published event seen downstream)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO

pytestmark = pytest.mark.integration


def _demo(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([sys.executable, "-m", "judgeflow.cli", "demo", *args], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "every published event is accounted for in Postgres" in out.stdout
    return out


def _line(stdout: str, prefix: str) -> str:
    [line] = [line.split(prefix, 1)[1].strip() for line in stdout.splitlines() if line.startswith(prefix)]
    return line


def test_demo_accounts_for_every_event(kafka_bootstrap: str, database_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "DATABASE_URL": database_url,
           "JUDGEFLOW_STATE_DIR": str(tmp_path)}  # fmt: skip
    out = _demo(env, "--runs", "6", "--claims", "60", "--timeout", "300")
    assert "Plotly.newPlot" in Path(_line(out.stdout, "HTML report: ")).read_text()
    # On a configured database the read models stay, in a schema of their own: the demo names it
    # in the dashboard command it prints.
    schema = _line(out.stdout, "schema ")
    assert _line(out.stdout, "dashboard: ").endswith(f" dashboard --schema {schema}")
    assert "services down" not in out.stdout  # it started no service


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _summary_when_up(url: str, server: subprocess.Popen[bytes]) -> tuple[int, Any]:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())
        except OSError:
            assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
            assert time.monotonic() < deadline, "dashboard did not start"
            time.sleep(0.2)


def test_demo_keep_leaves_its_data_and_the_printed_dashboard_command_shows_it(kafka_bootstrap: str,
                                                                              tmp_path: Path) -> None:  # fmt: skip
    """Without DATABASE_URL the demo starts its own Postgres; with --keep that Postgres and the data
    outlive it, and the `dashboard:` line it prints, run as printed, serves the demo's runs and claims."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap, JUDGEFLOW_STATE_DIR=str(tmp_path / "state"))
    down = [sys.executable, "-m", "judgeflow.cli", "services", "down"]
    try:
        out = _demo(env, "--keep", "--runs", "4", "--claims", "40", "--timeout", "300")
        schema = _line(out.stdout, "schema ")
        words = shlex.split(_line(out.stdout, "dashboard: "))
        assigned = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
        command = [w for w in words if w not in {f"{k}={v}" for k, v in assigned.items()}]
        assert set(assigned) == {"DATABASE_URL"} and command[-2:] == ["--schema", schema]
        stop = _line(out.stdout, "stop: ").split("#")[0].strip()
        assert stop.endswith("services down") and str(tmp_path / "state") in stop
        port = _free_port()  # PYTHONPATH: the printed script may be another checkout's editable install
        server = subprocess.Popen([*command, "--port", str(port)], env={**env, **assigned, "PYTHONPATH": str(REPO)},
                                  cwd=REPO,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            status, body = _summary_when_up(f"http://127.0.0.1:{port}/api/summary", server)
        finally:
            server.terminate()
            server.wait(10)
        assert status == 200, body
        assert body["data"]["evaluations"]["total"] == 4
        assert sum(body["data"]["queues"].values()) == 40
    finally:
        stopped = subprocess.run(down, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
