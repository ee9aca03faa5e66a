"""The soak's pure parts: its options, its load mix, its latency bookkeeping and its verdicts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.soak import SoakOptions
from bench.soak_load import EVENTS_PER_UNIT, Ledger, Mix
from bench.soak_observe import VisibilityTracker, summarize
from bench.soak_report import rss_slope, targets, write
from judgeflow.cli import main
from schemas import parse_claim_check, parse_evaluation_run, parse_human_review, parse_judge_output
from streams.topics import TopicNames

NAMES = TopicNames.with_prefix("s.")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--minutes", "0", "--rate", "5"], "--minutes 0: from 0.5 to 1440"),
        (["--minutes", "5", "--rate", "0"], "--rate 0: from 1 to 100000 events/s"),
        (["--minutes", "1", "--rate", "5", "--faults"], "--faults needs --minutes 2 or more"),
        (["--minutes", "5", "--rate", "5", "--sample-seconds", "0.1"], "--sample-seconds 0.1: from 1 to 60"),
    ],
)
def test_options_out_of_range_get_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["soak", *args])
    assert result.exit_code == 2 and message in result.output
    with pytest.raises(ValueError, match="from|needs"):
        SoakOptions(minutes=float(args[1]), rate=float(args[3]), faults="--faults" in args,
                    sample_seconds=float(args[-1]) if "--sample-seconds" in args else 5.0).check()  # fmt: skip


def test_the_mix_is_deterministic_valid_and_as_dense_as_it_says() -> None:
    mix = Mix(NAMES, seed=5)
    units = [mix.unit(i) for i in range(3000)]
    assert [[e.value for e in u] for u in units[:50]] != [] and units[7] == Mix(NAMES, seed=5).unit(7)
    events = [e for u in units for e in u]
    assert len(events) / len(units) == pytest.approx(EVENTS_PER_UNIT, rel=0.01)
    kinds = Counter(e.kind for e in events)
    assert kinds["check"] == 3000 and kinds["run"] == 1000 and kinds["output"] == 3000 and kinds["malformed"] == 60
    parse = {"check": parse_claim_check, "second": parse_claim_check, "run": parse_evaluation_run,
             "output": parse_judge_output, "review": parse_human_review}  # fmt: skip
    for e in events:
        if e.kind == "malformed":
            with pytest.raises(Exception):  # noqa: B017 - any refusal: the worker dead-letters it
                parse_judge_output(e.value)
        else:
            parse[e.kind](e.value)


def test_the_ledger_counts_what_the_accounting_expects() -> None:
    mix, ledger = Mix(NAMES, seed=5), Ledger()
    for i in range(300):
        for e in mix.unit(i):
            ledger.acked(e)
    pub = ledger.published
    assert len(pub.runs) == 100 and len(pub.outputs) == 300 and sum(pub.invalid.values()) == 6
    assert len(pub.checks) == 300 + 60 and pub.events == sum(ledger.counts.values())


def test_a_row_is_visible_at_the_first_poll_whose_committed_offset_passed_it() -> None:
    t = VisibilityTracker("x", NAMES, "postgresql://x", "s", {"c1": 100.0, "c2": 100.5}, {})
    t._landed(NAMES.checks_valid, 0, 7, {"claim_id": "c1", "judge_id": "j"})
    t._landed(NAMES.checks_valid, 0, 9, {"claim_id": "c2", "judge_id": "j"})
    t._landed(NAMES.checks_valid, 0, 10, {"claim_id": "c1", "judge_id": "j"})  # a redelivered copy: not again
    times, offsets = t.history[(NAMES.checks_valid, 0)]
    times += [100.2, 100.9, 101.4]
    offsets += [5, 8, 12]  # next offsets: 7 is visible at 100.9, 9 at 101.4
    t._resolve()
    assert [round(v) for v in t.window.values] == [900, 900]
    assert summarize([5.0, 1.0, 3.0]) == {"n": 3, "p50": 3.0, "p99": 5.0, "max": 5.0}


def _result(minutes: float, rss: list[float], p99: float, recoveries: list[float | None]) -> dict[str, object]:
    samples = [{"t_s": 5.0 * (i + 1), "sent": 500, "target": 500, "rss_mib": {"worker": m, "projector": 100.0},
                "decision_ms": {}, "row_ms": {}} for i, m in enumerate(rss)]  # fmt: skip
    return {"options": {"minutes": minutes, "rate": 100.0, "faults": True}, "samples": samples,
            "faults": [{"fault": "worker SIGKILL", "at_s": 400.0, "recovery_s": r} for r in recoveries],
            "windows": {"decision_ms": {"0": {"n": 9, "p99": p99}, "1": {"n": 9, "p99": 900.0}},
                        "row_ms": {"0": {"n": 9, "p99": 300.0}, "1": {"n": 9, "p99": 5000.0}}},
            "accounting": {"ok": True, "table": "t"}}  # fmt: skip


def test_the_targets_judge_slope_steady_windows_recovery_and_rate(tmp_path: Path) -> None:
    flat = _result(60, [100.0 + (i % 2) * 0.1 for i in range(720)], p99=120.0, recoveries=[12.0])
    t = targets(flat)
    assert t["rss_slope_ok"] is True and abs(t["rss_slope_mib_per_hour"]["worker"]) < 1
    assert t["steady_windows"] == 1 and t["worst_steady_decision_p99_ms"] == 120.0 and t["latency_ok"]
    assert t["recovery_ok"] and t["rate_kept"]  # window 1 holds the fault: not steady, not judged
    growing = _result(60, [100.0 + i * 0.01 for i in range(720)], p99=300.0, recoveries=[45.0])
    t = targets(growing)
    assert t["rss_slope_mib_per_hour"]["worker"] == pytest.approx(7.2, rel=0.01) and t["rss_slope_ok"] is False
    assert not t["latency_ok"] and not t["recovery_ok"]
    assert targets(_result(3, [100.0] * 36, 100.0, [5.0]))["rss_slope_ok"] is None  # too short to judge
    assert rss_slope([], "worker") is None
    json_path, html_path = write(flat, tmp_path, "soak-test")
    assert json.loads(json_path.read_text())["targets"]["latency_ok"] and "Plotly.newPlot" in html_path.read_text()
