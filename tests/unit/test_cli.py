"""The CLI as a user runs it: a subprocess, its output and exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import REPO


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "judgeflow.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **env},
        timeout=120,
    )


def test_help_lists_commands() -> None:
    out = run("--help")
    assert out.returncode == 0
    for command in ("services", "worker", "topology", "schema"):
        assert command in out.stdout


def test_topology_names_every_topic_with_prefix() -> None:
    out = run("topology", JUDGEFLOW_TOPIC_PREFIX="acme.")
    assert out.returncode == 0
    assert "acme.judge.outputs" in out.stdout and "acme.judge.invalid" in out.stdout


def test_schema_export(tmp_path: Path) -> None:
    out = run("schema", "export", str(tmp_path / "js"))
    assert out.returncode == 0
    doc = json.loads((tmp_path / "js" / "judge_output-2.1.json").read_text())
    assert doc["properties"]["schema_version"]["const"] == "2.1"


def test_bad_bootstrap_is_one_clear_line() -> None:
    out = run("worker", KAFKA_BOOTSTRAP_SERVERS="not a host")
    assert out.returncode != 0
    assert "KAFKA_BOOTSTRAP_SERVERS" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_unreachable_kafka_is_one_clear_line() -> None:
    from judgeflow.services.ports import free_port

    out = run("worker", KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{free_port()}")
    assert out.returncode != 0 and "cannot reach Kafka" in out.stderr
    assert "Traceback" not in out.stderr
