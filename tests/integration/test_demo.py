"""`judgeflow demo` as a user runs it, on the session's services; its exit
code is the accounting check (every published event seen downstream)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = pytest.mark.integration


def test_demo_accounts_for_every_event(kafka_bootstrap: str, database_url: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DATABASE_URL": database_url,
        "JUDGEFLOW_STATE_DIR": str(tmp_path),
    }
    out = subprocess.run(
        [sys.executable, "-m", "judgeflow.cli", "demo", "--runs", "6", "--claims", "60", "--timeout", "300"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "every published event is accounted for in Postgres" in out.stdout
    [report] = [line.split(": ", 1)[1] for line in out.stdout.splitlines() if line.startswith("HTML report: ")]
    assert "Plotly.newPlot" in Path(report).read_text()
