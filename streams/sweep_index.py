"""The keys of one table a sweep must look at, by the time each next needs it (`SweepIndex`).

A sweep runs every second, and a worker that keeps decided claims and final runs for their retention (seven
days by default) holds millions of states that need nothing until that retention runs out. Reading each of
them every tick cost seconds per tick at a few hundred events/s and stalled the worker. So each stage says,
per stored state, the earliest time its sweep could have anything to send (`wake_at`: microseconds since the
epoch; `EVERY_TICK` for states waiting on something outside the state, such as a rubric; None for states that
need nothing until they change). The index keeps those times in a heap and reads only the states whose time
has come, plus the few that must be looked at every tick.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator, KeysView
from typing import Any

from streams.stage import HoldBudget, State

CONTROL_QUIET_SECONDS = 10.0
"""A control record or stub sent by a sweep is not sent again for this long (the agent needs a moment)."""
SCAN_CHUNK = 2000
"""Keys a sweep reads per tick while it rebuilds its index after the worker's partitions changed."""
EVERY_TICK = 0
"""`wake_at` for a state the sweep reads every tick (its trigger is not in the state: a rubric arriving)."""
WakeAt = Callable[[State], "int | None"]


class SweepIndex:
    """The watched keys of one table, kept up to date by its agent (`note`) and, after the worker's partitions
    changed, by reading the table lazily, a chunk per tick (`refill`).

    `due(owned, now)` returns the states of owned partitions whose wake time has come, minus those a record was
    just sent for. A state handed out stays due on the following ticks until its stored state moves its wake
    time on (as the control record it caused is processed). It also keeps the worker's `HoldBudget` counting
    the events each stored state holds (its `held` list)."""

    def __init__(self, table: Any, wake_at: WakeAt, hold: HoldBudget | None = None, name: str = "") -> None:
        self.table = table
        self.wake_at = wake_at
        self.hold = hold
        self.name = name
        self.wake: dict[str, int] = {}
        """Every watched key and its wake time."""
        self.ripe: set[str] = set()
        """Keys read on every tick: due now, or `EVERY_TICK`."""
        self._heap: list[tuple[int, str]] = []
        """(wake time, key) of the keys not yet due; entries whose time no longer matches `wake` are stale."""
        self.sent: dict[str, float] = {}
        self._scan: Iterator[tuple[str, Any]] | None = None
        self._owned: frozenset[int] = frozenset()

    @property
    def keys(self) -> KeysView[str]:
        return self.wake.keys()

    def note(self, key: str, doc: State | None) -> None:
        self._count_held(key, doc)
        self._place(key, self.wake_at(doc) if doc else None)

    def refill(self, owned: frozenset[int]) -> None:
        if owned != self._owned:  # start again from what the table holds now
            self._owned, self._scan = owned, iter(self.table.items())
            self.wake.clear()
            self.ripe.clear()
            self._heap.clear()
        if self._scan is None:
            return
        try:
            for _ in range(SCAN_CHUNK):
                key, doc = next(self._scan)
                self.note(key, doc)
        except StopIteration:
            self._scan = None
        except RuntimeError:  # the table changed under the iterator: start again
            self._scan = iter(self.table.items())

    def due(self, owned: frozenset[int], now: int) -> list[tuple[str, State]]:
        """The keys of owned partitions whose wake time (µs since the epoch) is at or before `now`, each with
        its state, minus those just sent a record. In key order, as a scan of the table would give them."""
        clock = time.monotonic()
        self.sent = {k: t for k, t in self.sent.items() if clock - t < CONTROL_QUIET_SECONDS}
        heap = self._heap
        while heap and heap[0][0] <= now:
            at, key = heapq.heappop(heap)
            if self.wake.get(key) == at:
                self.ripe.add(key)
        out = []
        for key in list(self.ripe):
            doc = self.table.get(key)
            wake = self.wake_at(doc) if doc else None
            if wake is None:
                self._place(key, None)
            elif wake > now:  # its state moved on: back to waiting
                self.ripe.discard(key)
                self.wake[key] = wake
                heapq.heappush(heap, (wake, key))
            elif doc.get("partition") in owned and key not in self.sent:
                out.append((key, doc))
        return sorted(out, key=lambda item: item[0])

    def mark_sent(self, keys: list[str]) -> None:
        now = time.monotonic()
        for key in keys:
            self.sent[key] = now

    def _place(self, key: str, wake: int | None) -> None:
        if wake is None:
            self.wake.pop(key, None)
            self.ripe.discard(key)
            self.sent.pop(key, None)
            return
        before = self.wake.get(key)
        self.wake[key] = wake
        if wake == EVERY_TICK:
            self.ripe.add(key)
            return
        if key in self.ripe and before == wake:
            return  # due and handed out; stays ripe until its state moves its wake time on
        self.ripe.discard(key)
        if before != wake:
            heapq.heappush(self._heap, (wake, key))
            if len(self._heap) > 2 * len(self.wake) + 1024:  # drop stale entries
                self._heap = [(w, k) for k, w in self.wake.items() if w != EVERY_TICK and k not in self.ripe]
                heapq.heapify(self._heap)

    def _count_held(self, key: str, doc: State | None) -> None:
        if self.hold is not None:
            self.hold.note(f"{self.name}/{key}", len(doc.get("held") or ()) if doc else 0)
