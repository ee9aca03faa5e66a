"""The keys of one table a sweep must look at (`SweepIndex`), and which stored states each sweep watches."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from streams.stage import HoldBudget, State

CONTROL_QUIET_SECONDS = 10.0
"""A control record or stub sent by a sweep is not sent again for this long (the agent needs a moment)."""
SCAN_CHUNK = 2000
"""Keys a sweep reads per tick while it rebuilds its index after the worker's partitions changed."""


class SweepIndex:
    """The keys of one table a sweep must look at, kept up to date by its agent.

    After the worker's partitions change it refills itself by reading the table lazily, a chunk per tick,
    instead of decoding every key at once. `watch(doc)` says whether a stored state needs the sweep. It also
    keeps the worker's `HoldBudget` counting the events each stored state holds (its `held` list)."""

    def __init__(
        self, table: Any, watch: Callable[[State], bool], hold: HoldBudget | None = None, name: str = ""
    ) -> None:
        self.table = table
        self.watch = watch
        self.hold = hold
        self.name = name
        self.keys: set[str] = set()
        self.sent: dict[str, float] = {}
        self._scan: Iterator[tuple[str, Any]] | None = None
        self._owned: frozenset[int] = frozenset()

    def note(self, key: str, doc: State | None) -> None:
        self._count_held(key, doc)
        if doc is not None and self.watch(doc):
            self.keys.add(key)
        else:
            self.keys.discard(key)
            self.sent.pop(key, None)

    def refill(self, owned: frozenset[int]) -> None:
        if owned != self._owned:
            self._owned, self._scan = owned, iter(self.table.items())
        if self._scan is None:
            return
        try:
            for _ in range(SCAN_CHUNK):
                key, doc = next(self._scan)
                self._count_held(key, doc)
                if doc and self.watch(doc):
                    self.keys.add(key)
        except StopIteration:
            self._scan = None
        except RuntimeError:  # the table changed under the iterator: start again
            self._scan = iter(self.table.items())

    def _count_held(self, key: str, doc: State | None) -> None:
        if self.hold is not None:
            self.hold.note(f"{self.name}/{key}", len(doc.get("held") or ()) if doc else 0)

    def due(self, owned: frozenset[int]) -> list[tuple[str, State]]:
        """The watched keys of owned partitions, each with its state, minus those just sent a record."""
        now = time.monotonic()
        self.sent = {k: t for k, t in self.sent.items() if now - t < CONTROL_QUIET_SECONDS}
        out = []
        for key in list(self.keys):
            doc = self.table.get(key)
            if not doc or not self.watch(doc):
                self.keys.discard(key)
                continue
            if doc.get("partition") in owned and key not in self.sent:
                out.append((key, doc))
        return out

    def mark_sent(self, keys: list[str]) -> None:
        now = time.monotonic()
        for key in keys:
            self.sent[key] = now


def watch_run(doc: State) -> bool:
    """Every run: open ones need their deadline checked, final ones wait for their retention."""
    return bool(doc)


def watch_claim(doc: State) -> bool:
    return doc.get("waiting_for") == "rubric" or bool(doc.get("decided_at"))
