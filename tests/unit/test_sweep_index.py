"""The sweep reads only the states whose wake time has come, and misses none the full scan would act on.

Two proofs against the full scan (what the sweep did before it had an index): each stage's `wake_at` is a lower
bound on when its `sweep` sends anything (for every state the scripted runs pass through, and for any claim
state hypothesis makes), and the scripted runs produce byte-identical records when their sweeps go through the
index. Then the index's own bookkeeping: a decided state is not read again until its retention runs out.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.claims import ClaimStage
from streams.envelope import Outgoing, iso, micros
from streams.sweep_index import EVERY_TICK, SweepIndex
from tests.unit.run_state_scenarios import RECORDS_GOLDEN, Player, describe, steps

START = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)
OWNED = frozenset({0})
OFFSETS = [timedelta(seconds=s) for s in (0, 0.5, 4.9, 5, 5.1, 20, 299, 300, 301, 3599, 3600, 3601, 7 * 86400)]


class JsonTable:
    """The player's table (Faust's stored bytes) read as the worker's tables are: decoded."""

    def __init__(self, raw: dict[str, bytes]) -> None:
        self.raw = raw

    def get(self, key: str) -> Any:
        value = self.raw.get(key)
        return json.loads(value) if value is not None else None

    def items(self) -> Any:
        return ((k, json.loads(v)) for k, v in list(self.raw.items()))


class IndexedPlayer(Player):
    """The scripted runs, with every sweep over `SweepIndex.due` instead of over every key."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.index = SweepIndex(JsonTable(self.table), self.stage.wake_at)
        self.read: list[int] = []

    def feed(self, role: str, key: str, value: bytes, headers: tuple[tuple[str, bytes], ...] = ()) -> list[Outgoing]:
        out = super().feed(role, key, value, headers)
        for k in list(self.index.keys | self.table.keys()):
            self.index.note(k, JsonTable(self.table).get(k))
        return out

    def play(self, step: tuple[Any, ...]) -> list[Outgoing]:
        if step[0] != "sweep":
            return super().play(step)
        for state in JsonTable(self.table).items():  # each stored state carries its partition; all are owned
            assert state[1]["partition"] in OWNED
        due = self.index.due(OWNED, micros(self.now))
        self.read.append(len(due))
        sent = self.stage.sweep(due)
        out = list(sent)
        for record in sent:
            out += self.feed(record.role, (record.key or b"").decode(), record.value)
        return out


def test_the_scripted_runs_send_the_same_records_through_the_index() -> None:
    golden = json.loads(RECORDS_GOLDEN.read_text())
    player = IndexedPlayer()
    for i, (step, then) in enumerate(zip(steps(), golden, strict=True)):
        assert describe(player.play(step)) == then, f"step {i}: {step[:3]}"
    assert sum(player.read) < len(player.read) * 4  # not every key at every sweep


def run_states() -> list[dict[str, Any]]:
    """Every state the scripted runs store, in every format they pass through."""
    player, seen = Player(), []
    for step in steps():
        player.play(step)
        seen += [json.loads(v) for v in player.table.values()]
    return seen


def test_a_run_is_never_swept_before_its_wake_time() -> None:
    player = Player()
    stage = player.stage
    for doc in run_states():
        wake = stage.wake_at(doc)
        for after in OFFSETS:
            player.now = datetime.fromtimestamp(micros(START) / 1e6, UTC) + after
            if stage.sweep([("k", doc)]):
                assert wake is not None and wake <= micros(player.now), (doc, after)


seconds = st.one_of(st.integers(0, 900), st.integers(0, 12 * 86400))
"""Near the start (the five-minute grace) or anywhere in twelve days (the seven-day retention)."""
times = seconds.map(lambda s: iso(START + timedelta(seconds=s)))
claim_states = st.fixed_dictionaries(
    {"partition": st.just(0)},
    optional={
        "waiting_for": st.sampled_from(["rubric", "judges", None]),
        "decided_at": times,
        "held": st.lists(st.just({"v": 1}), max_size=2),
        "held_since": times,
        "alerted": st.sampled_from([{}, {"held_too_long": iso(START)}]),
        "rubric_version_id": st.just("r"),
    },
)


@settings(max_examples=400, deadline=None)
@given(doc=claim_states, now=seconds, rubric_known=st.booleans())
def test_a_claim_is_never_swept_before_its_wake_time(doc: dict[str, Any], now: int, rubric_known: bool) -> None:
    clock = START + timedelta(seconds=now)
    stage = ClaimStage(lambda _r: object() if rubric_known else None, clock=lambda: clock,  # type: ignore[arg-type,return-value]
                       retention=timedelta(days=7), max_payload_bytes=1_000_000)  # fmt: skip
    before = doc.get("waiting_for") == "rubric" or bool(doc.get("decided_at"))  # what the full scan looked at
    if before and stage.sweep([("k", doc)]):
        wake = stage.wake_at(doc)
        assert wake is not None and wake <= micros(clock)


def test_a_decided_state_is_not_read_again_until_its_retention_runs_out() -> None:
    reads: list[str] = []

    class Counting(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            reads.append(key)
            return dict.get(self, key, default)

    table = Counting()
    retention = 7 * 86400 * 1_000_000
    wake = {"decided": lambda d: d["t"] + retention, "rubric": lambda d: EVERY_TICK, "open": lambda d: None}
    index = SweepIndex(table, lambda d: wake[d["kind"]](d))
    now = micros(START)
    for i in range(1000):
        table[f"d{i}"] = {"kind": "decided", "t": now, "partition": 0}
        index.note(f"d{i}", table[f"d{i}"])
    table["r"] = {"kind": "rubric", "partition": 0}
    table["o"] = {"kind": "open", "partition": 0}
    index.note("r", table["r"])
    index.note("o", table["o"])
    assert len(index.keys) == 1001
    for tick in range(60):
        reads.clear()
        assert [k for k, _ in index.due(OWNED, now + tick * 1_000_000)] == ["r"]
        assert reads == ["r"]
    due = index.due(OWNED, now + retention)
    assert len(due) == 1001
    assert len(index.due(frozenset({1}), now + retention)) == 0  # another worker's partitions: not sent
    for i in range(500):  # expired and deleted
        del table[f"d{i}"]
        index.note(f"d{i}", None)
    assert len(index.due(OWNED, now + retention + 1)) == 501
    assert len(index.keys) == 501
