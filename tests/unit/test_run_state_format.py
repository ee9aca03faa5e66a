"""The compact run-state format: the records a run produces are the bytes the format before it produced, the
state of a three-judge run fits in 1 KB as Faust stores it, and a worker goes on from states stored in the
old format (its changelog, after an upgrade)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from streams.runs import OLD_FORMAT_KEY, upgrade
from tests.unit.run_state_scenarios import GOLDEN, Player, play, steps, stored

MAX_RUN_STATE_BYTES = 1024


@pytest.fixture(scope="module")
def golden() -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(GOLDEN.read_text())
    return loaded


def test_every_record_is_byte_identical_to_the_old_format(golden: list[dict[str, Any]]) -> None:
    script = steps()
    assert len(golden) == len(script)
    for i, (now, then) in enumerate(zip(play(Player(), script), golden, strict=True)):
        assert now["records"] == then["records"], f"step {i}: {script[i][:3]}"


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
            if value is None:
                continue
            assert OLD_FORMAT_KEY in json.loads(old[key])
            assert stored(upgrade(json.loads(old[key]))).decode() == value, f"step {i}, {key}"


def test_a_worker_goes_on_from_a_changelog_in_the_old_format(golden: list[dict[str, Any]]) -> None:
    """From every step: a worker whose table holds the old states produces what the old worker did next,
    its timer included, and writes compact states."""
    script = steps()
    table: dict[str, bytes] = {}
    for first in range(1, len(script)):
        table.update({k: v.encode() for k, v in golden[first - 1]["changed"].items() if v is not None})
        for k in [k for k, v in golden[first - 1]["changed"].items() if v is None]:
            table.pop(k)
        then = golden[first - 1]
        player = Player(datetime.fromisoformat(then["now"]), then["rubric_known"], dict(table), then["offset"])
        for i, step in enumerate(play(player, script, first), start=first):
            assert step["records"] == golden[i]["records"], f"from step {first}, step {i}: {script[i][:3]}"
            assert not any(OLD_FORMAT_KEY in json.loads(v) for v in step["changed"].values() if v is not None)
