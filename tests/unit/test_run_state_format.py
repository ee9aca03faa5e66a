"""The compact run-state format: the records a run produces are the bytes the format before it produced, the
state of a three-judge run fits in 1 KB as Faust stores it, and a worker goes on from states stored in the
old format (its changelog, after an upgrade)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from streams.runs import OLD_FORMAT_KEY, upgrade
from tests.unit.run_state_scenarios import GOLDEN, HELD_RUNS, RECORDS_GOLDEN, Player, play, steps, stored

MAX_RUN_STATE_BYTES = 1024


@pytest.fixture(scope="module")
def golden() -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(GOLDEN.read_text())
    return loaded


def test_every_record_is_the_golden_one() -> None:
    golden = json.loads(RECORDS_GOLDEN.read_text())
    script = steps()
    assert len(golden) == len(script)
    for i, (now, then) in enumerate(zip(play(Player(), script), golden, strict=True)):
        assert now["records"] == then, f"step {i}: {script[i][:3]}"


def unheld(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["key"] not in HELD_RUNS]


def test_the_state_of_a_three_judge_run_fits_in_a_kilobyte() -> None:
    sizes = {}
    for step in play(Player(), steps()):
        for key, value in step["changed"].items():
            if value is not None and "final_at" in json.loads(value):
                sizes[key] = len(value.encode())
    print(f"[measured] final run states as stored: {sizes}")
    assert len(sizes) == 4 and max(sizes.values()) <= MAX_RUN_STATE_BYTES


def test_a_state_in_the_old_format_reads_as_the_compact_one(golden: list[dict[str, Any]]) -> None:
    old: dict[str, str] = {}
    for i, (now, then) in enumerate(zip(play(Player(), steps()), golden, strict=True)):
        old.update(then["changed"])
        for key, value in now["changed"].items():
            if value is None or key in HELD_RUNS:
                continue
            assert OLD_FORMAT_KEY in json.loads(old[key])
            assert stored(upgrade(json.loads(old[key]))).decode() == value, f"step {i}, {key}"


def test_a_worker_goes_on_from_a_changelog_in_the_old_format(golden: list[dict[str, Any]]) -> None:
    """From every step: a worker whose table holds the old states does what a worker whose table holds the same
    states stored compact does next, its timer included, and writes compact states."""
    script = steps()
    compact = list(play(Player(), script))
    old_table: dict[str, bytes] = {}
    new_table: dict[str, bytes] = {}
    for first in range(1, len(script)):
        for table, changed in ((old_table, golden[first - 1]["changed"]), (new_table, compact[first - 1]["changed"])):
            table.update({k: v.encode() for k, v in changed.items() if v is not None})
            for k in [k for k, v in changed.items() if v is None]:
                table.pop(k, None)
        then = compact[first - 1]
        now = datetime.fromisoformat(then["now"])
        from_old = Player(now, then["rubric_known"], {k: v for k, v in old_table.items() if k not in HELD_RUNS},
                          then["offset"])  # fmt: skip
        from_new = Player(now, then["rubric_known"], {k: v for k, v in new_table.items() if k not in HELD_RUNS},
                          then["offset"])  # fmt: skip
        for i, (a, b) in enumerate(zip(play(from_old, script, first), play(from_new, script, first), strict=True)):
            assert unheld(a["records"]) == unheld(b["records"]), f"from step {first}, step {i + first}"
            assert not any(OLD_FORMAT_KEY in json.loads(v) for v in a["changed"].values() if v is not None)
