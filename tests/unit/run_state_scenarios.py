"""Scripted runs through `RunStage`, with the state stored the way the worker's table stores it.

`play` drives the stage through every path that keeps run state (in order, out of order, held for the run and
for the rubric, timeouts, alerts, late and redelivered inputs, expiry) and returns, per step, the records it
produced and the state as stored. `run_state.golden.json` holds that for the state format before the compact
one: the records a run produces must stay byte-identical, and a worker must go on from states stored in the
old format. Regenerate it only on purpose: `python -m tests.unit.run_state_scenarios`.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from faust.serializers import codecs

from judgeflow import workload
from schemas import RubricVersion, parse_rubric
from streams.envelope import Outgoing, SourceRef
from streams.runs import RunStage
from streams.stage import Inbound, State

GOLDEN = Path(__file__).parent / "run_state.golden.json"
"""Records and states of the format before the compact one (the upgrade is tested against it)."""
RECORDS_GOLDEN = Path(__file__).parent / "run_state.records.golden.json"
"""The records of the scripted runs as the stage produces them now: changed only on purpose."""
RUBRIC = parse_rubric(workload.rubric())
START = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)
RETENTION = timedelta(hours=1)
IN_ORDER = workload.stable_id("run", "golden", "in-order")
HELD = workload.stable_id("run", "golden", "held")
TIMEOUT = workload.stable_id("run", "golden", "timeout")
FLAGGED = workload.stable_id("run", "golden", "flagged")
HELD_RUNS = frozenset({HELD, FLAGGED})
"""Runs whose outputs arrived before their run or rubric. Since decision 13 a held output is published as valid
only once its rubric validated it (released through the re-keyed topic), so the golden file, written before,
holds their records and states as they were then: compared for the other runs only."""
Step = tuple[Any, ...]


def stored(state: State) -> bytes:
    """The value Faust writes to the table's changelog for `state` (a table without a value type: json)."""
    return bytes(codecs.dumps("json", state))


def _outputs(run_id: str, seed: int, **kwargs: Any) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [workload.judge_output(rng, run_id, m, **kwargs) for m in workload.JUDGE_MODELS]


def _flagged() -> list[dict[str, Any]]:
    """A partial judge with a deduction, a critical auto-disqualifying flag, and a failed judge."""
    rng = random.Random(7)
    first = workload.judge_output(rng, FLAGGED, workload.JUDGE_MODELS[0], with_adjustment=True, with_flag=True)
    first["flags"][0].update(severity="critical", auto_disqualify=True)
    partial = workload.judge_output(rng, FLAGGED, workload.JUDGE_MODELS[1], status="partial")
    failed = workload.judge_output(rng, FLAGGED, workload.JUDGE_MODELS[2])
    failed.update(status="failed", failure_reason="judge crashed", lane_scores=[], completed_lane_keys=[],
                  overall_score=0, integrity_adjusted_score=0, judge_completed_at=None)  # fmt: skip
    return [first, partial, failed]


def steps() -> list[Step]:
    """("feed", role, key, doc) | ("tick", seconds) | ("sweep",) | ("rubric", known)."""
    a = _outputs(IN_ORDER, 4)
    h = _outputs(HELD, 5, with_adjustment=True, evidence_per_dimension=1)
    t = _outputs(TIMEOUT, 6, with_flag=True)
    f = _flagged()
    wrong_lane = {**h[2], "lane_scores": [{**h[2]["lane_scores"][0], "lane_key": "vibes"}],
                  "completed_lane_keys": ["vibes"]}  # fmt: skip
    return [
        # in order; then every input again
        ("feed", "runs", IN_ORDER, workload.evaluation_run(IN_ORDER)),
        *[("feed", "judge_outputs", IN_ORDER, doc) for doc in a[:2]],
        ("tick", 0.123457),
        ("feed", "judge_outputs", IN_ORDER, a[2]),
        *[("feed", "judge_outputs", IN_ORDER, doc) for doc in a],
        ("feed", "runs", IN_ORDER, workload.evaluation_run(IN_ORDER)),
        # outputs before their run, the run before its rubric; alerts; the rubric comes, a resume releases them
        ("rubric", False),
        ("feed", "judge_outputs", HELD, h[0]),
        ("tick", 1.5),
        ("feed", "judge_outputs", HELD, h[1]),
        ("feed", "judge_outputs", HELD, wrong_lane),
        ("feed", "runs", HELD, workload.evaluation_run(HELD, timeout_s=20)),
        ("sweep",),
        ("tick", 400.000001),
        ("sweep",),
        ("feed", "reconcile_control", HELD, {"kind": "alert", "alert": "held_too_long"}),
        ("rubric", True),
        ("sweep",),
        ("feed", "reconcile_control", HELD, {"kind": "resume"}),
        ("feed", "judge_outputs", HELD, h[0]),
        ("tick", 2),
        ("feed", "judge_outputs", HELD, h[2]),
        ("feed", "reconcile_control", HELD, {"kind": "alert", "alert": "run_overdue"}),
        ("feed", "runs", HELD, workload.evaluation_run(HELD, timeout_s=20)),
        # a judge times out: a failed stub, final with a notice; its real output comes late
        ("feed", "runs", TIMEOUT, workload.evaluation_run(TIMEOUT, timeout_s=5)),
        ("feed", "judge_outputs", TIMEOUT, t[0]),
        ("tick", 0.25),
        ("feed", "judge_outputs", TIMEOUT, t[1]),
        ("sweep",),
        ("tick", 5.5),
        ("sweep",),
        ("feed", "judge_outputs", TIMEOUT, t[2]),
        ("feed", "judge_outputs", TIMEOUT, t[1]),
        # deductions, a critical flag, a partial and a failed judge; the run comes last
        *[("feed", "judge_outputs", FLAGGED, doc) for doc in f],
        ("tick", 0.000003),
        ("feed", "runs", FLAGGED, workload.evaluation_run(FLAGGED)),
        *[("feed", "judge_outputs", FLAGGED, doc) for doc in f],
        # retention runs out for the final runs
        ("tick", 3600),
        ("sweep",),
        ("feed", "judge_outputs", IN_ORDER, a[0]),
    ]


@dataclass
class Player:
    """The stage, a table keyed by run id that stores states as Faust does, and a settable clock."""

    now: datetime = START
    rubric_known: bool = True
    table: dict[str, bytes] = field(default_factory=dict)
    offset: int = 0
    rekeyed: int = 0

    def __post_init__(self) -> None:
        self.stage = RunStage(self.lookup, clock=lambda: self.now, retention=RETENTION, max_payload_bytes=1_000_000)

    def lookup(self, rubric_id: str) -> RubricVersion | None:
        return RUBRIC if self.rubric_known and rubric_id == RUBRIC.rubric_version_id else None

    def feed(self, role: str, key: str, value: bytes, headers: tuple[tuple[str, bytes], ...] = ()) -> list[Outgoing]:
        """One record through the stage; what it sends to the re-keyed topic it reads comes back to it (as in the
        worker: held outputs are released that way)."""
        if role == "judge_outputs_rekeyed":  # a topic of its own: its offsets do not move the input topics'
            self.rekeyed += 1
            offset = self.rekeyed
        else:
            self.offset += 1
            offset = self.offset
        kb = key.encode()
        before = self.table.get(key)
        step = self.stage.handle(Inbound(role, kb, value, SourceRef(role, 0, offset, kb), dict(headers)),
                                 json.loads(before) if before is not None else None)  # fmt: skip
        if step.changed:
            if step.state is None:
                self.table.pop(key, None)
            else:
                self.table[key] = stored(step.state)
        out = list(step.records)
        for r in step.records:
            if r.role == "judge_outputs_rekeyed":
                out += self.feed(r.role, (r.key or b"").decode(), r.value, tuple(r.headers))
        return out

    def play(self, step: Step) -> list[Outgoing]:
        kind = step[0]
        if kind == "tick":
            self.now += timedelta(seconds=step[1])
            return []
        if kind == "rubric":
            self.rubric_known = step[1]
            return []
        if kind == "feed":
            return self.feed(step[1], step[2], json.dumps(step[3]).encode())
        # a sweep over every key; what it sends comes back through its topic, as in the worker
        sent = self.stage.sweep([(k, json.loads(v)) for k, v in sorted(self.table.items())])
        out = list(sent)
        for record in sent:
            out += self.feed(record.role, (record.key or b"").decode(), record.value)
        return out


def describe(records: list[Outgoing]) -> list[dict[str, Any]]:
    """Records as the golden file keeps them: small values whole, large ones (judge outputs) by digest. A dead
    letter's `received_at` is the wall clock's, not the stage's: left out."""
    out = []
    for r in records:
        value = r.value.decode()
        if r.role == "invalid":
            value = json.dumps({**json.loads(value), "received_at": None}, separators=(",", ":"))
        item: dict[str, Any] = {"role": r.role, "key": (r.key or b"").decode(),
                                "headers": [[h, v.decode()] for h, v in r.headers]}  # fmt: skip
        if len(value) <= 1500:
            item["value"] = value
        else:
            item["sha256"] = hashlib.sha256(value.encode()).hexdigest()
        out.append(item)
    return out


def play(player: Player, script: list[Step], first: int = 0) -> Iterator[dict[str, Any]]:
    """Each step from `first` on: what it produced, the player's clock and offset after it, and the stored
    states it changed (None: deleted)."""
    for step in script[first:]:
        before = dict(player.table)
        records = player.play(step)
        changed = {k: (v.decode() if v is not None else None) for k in sorted(before.keys() | player.table.keys())
                   if (v := player.table.get(k)) != before.get(k)}  # fmt: skip
        yield {
            "records": describe(records),
            "now": player.now.isoformat(),
            "rubric_known": player.rubric_known,
            "offset": player.offset,
            "changed": changed,
        }


def main() -> None:
    """Rewrite the records golden (the old-format golden stays as written by the format before)."""
    RECORDS_GOLDEN.write_text(json.dumps([s["records"] for s in play(Player(), steps())], indent=1) + "\n")
    print(f"wrote {RECORDS_GOLDEN}")


if __name__ == "__main__":
    main()
