"""Three minutes of `judgeflow soak --faults` (the reliability suite's soak): the real mix at a steady rate while a
worker and a projector are SIGKILLed and the broker and Postgres restart, under a restarting supervisor, and
at the end every published event accounted for. Run as a user runs it, from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import RELIABILITY
from tests.support import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

RATE = 300


def test_three_minutes_with_every_fault_lose_nothing(tmp_path: Path) -> None:
    out = tmp_path / "results"
    args = ["--minutes", "3", "--rate", str(RATE), "--faults", "--drain-minutes", "5"]
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "judgeflow.cli",
                "soak",
                *args,
                "--out",
                str(out),
                "--workdir",
                str(tmp_path / "work"),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=840,
        )
    except subprocess.TimeoutExpired:
        journal = "".join(path.read_text()[-3000:] for path in out.glob("soak-*.jsonl"))
        pytest.fail(f"the soak did not end within 14 minutes; its journal ends with:\n{journal}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [results] = out.glob("soak-*.json")
    assert len(list(out.glob("soak-*.html"))) == 1
    result = json.loads(results.read_text())
    acc, targets = result["accounting"], result["targets"]
    assert acc["ok"] and acc["lost"] == acc["duplicated"] == acc["double_decisions"] == 0, acc["table"]
    assert [f["fault"] for f in result["faults"]] == [
        "worker SIGKILL",
        "projector SIGKILL",
        "broker restart",
        "Postgres restart",
    ]
    assert all(f["recovery_s"] is not None for f in result["faults"]), result["faults"]
    assert result["exits"]["worker"] and result["exits"]["projector"]  # each SIGKILLed once, restarted
    # A broker restart holds the load generator up for seconds: the results say whether the rate was kept
    # (`rate_kept`, `samples_below_rate`); most of the load must have been applied either way.
    assert len(result["samples"]) >= 30 and targets["rate_achieved"] >= 0.8 * RATE, targets
    assert targets["rate_kept"] == (
        sum(s["sent"] for s in result["samples"]) >= 0.97 * sum(s["target"] for s in result["samples"])
    )
    RELIABILITY["soak: three minutes with faults"] = {
        "scenario": "soak: three minutes with faults",
        "events_published": sum(result["published"].values()),
        "faults": "; ".join(f"{f['fault']} (recovered {f['recovery_s']} s)" for f in result["faults"]),
        "lost": acc["lost"],
        "duplicated": acc["duplicated"],
        "unexpected": acc["unexpected"],
        "redelivered": acc["redelivered"],
        "double_decisions": acc["double_decisions"],
    }
