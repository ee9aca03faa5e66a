"""Progress watchdog: decides from plain numbers whether a consumer is stalled.

No Kafka and no clock of its own: the caller feeds it, every few seconds, each
assigned partition's committed position and end offset, and how many partitions
its topics have; the watchdog answers with a `WatchdogState` whose `action`
says what to do (nothing, rebuild the consumer, or give up and exit non-zero so
a supervisor restarts the process). Any consumer (the projector, the worker)
can drive it; tests drive it with a fake clock.

A partition is stalled when it has lag and its committed position has not moved
for `stall_seconds`. The consumer is stalled as a whole when it has no partition
while its topics have some, for `stall_seconds`. A stall triggers one recovery;
if no progress follows within `recovery_seconds`, the action is EXIT. Progress
(any partition's position moving, or every assigned partition caught up) ends
the recovery window.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

TP = tuple[str, int]


class Action(enum.Enum):
    NONE = "none"
    RECOVER = "recover"
    EXIT = "exit"


@dataclass(frozen=True)
class WatchdogState:
    """One verdict. `live` and `ready` are what /healthz and /readyz report."""

    checked_at: float
    assigned: int = 0
    topic_partitions: int = 0
    lag: int | None = None
    stalled: tuple[TP, ...] = ()
    unassigned_stall: bool = False
    last_progress_seconds: float = 0.0
    recovering_seconds: float | None = None
    action: Action = Action.NONE
    ready_lag: int = 0
    reason: str = "not checked yet"
    extra: dict[str, Any] = field(default_factory=dict)
    unreachable: tuple[str, ...] = ()
    """What the process cannot reach now ("broker", "Postgres"; see `streams.outage`)."""
    outage_stalled: bool = False
    """One of them has been out of reach for the stall deadline or longer."""

    @property
    def live(self) -> bool:
        return not self.stalled and not self.unassigned_stall and not self.extra.get("dead") and not self.outage_stalled

    @property
    def ready(self) -> bool:
        return (
            self.live
            and not self.unreachable
            and self.assigned > 0
            and self.lag is not None
            and self.lag <= self.ready_lag
        )

    @property
    def stalled_count(self) -> int:
        """Partitions nobody here is making progress on (all of them when none is assigned)."""
        return self.topic_partitions if self.unassigned_stall else len(self.stalled)

    def detail(self) -> dict[str, Any]:
        return {
            "live": self.live,
            "ready": self.ready,
            "reason": self.reason,
            "assigned_partitions": self.assigned,
            "topic_partitions": self.topic_partitions,
            "lag": self.lag,
            "ready_lag": self.ready_lag,
            "stalled_partitions": [f"{t}[{p}]" for t, p in self.stalled],
            "last_progress_seconds": round(self.last_progress_seconds, 3),
            "recovering_seconds": None if self.recovering_seconds is None else round(self.recovering_seconds, 3),
            "unreachable": list(self.unreachable),
            **self.extra,
        }

    def stale(self, now: float, max_age: float) -> WatchdogState:
        """This state, or a dead one when the watchdog has not checked for `max_age` s
        (its task died or the loop is blocked): health must not report an old verdict."""
        age = now - self.checked_at
        if age <= max_age:
            return self
        return dataclasses.replace(
            self, checked_at=now, reason=f"watchdog has not checked for {age:.0f}s", extra={**self.extra, "dead": True}
        )


def format_partitions(tps: tuple[TP, ...] | list[TP]) -> str:
    return ", ".join(f"{t}[{p}]" for t, p in sorted(tps))


class ProgressWatchdog:
    """Stall decisions over successive observations (see the module docstring)."""

    def __init__(
        self,
        stall_seconds: float = 60.0,
        recovery_seconds: float = 60.0,
        *,
        ready_lag: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ):
        if stall_seconds <= 0 or recovery_seconds <= 0:
            raise ValueError("stall_seconds and recovery_seconds must be positive")
        self.stall_seconds = stall_seconds
        self.recovery_seconds = recovery_seconds
        self.ready_lag = ready_lag
        self.clock = clock
        self._position: dict[TP, int] = {}
        self._since: dict[TP, float] = {}
        """Per partition: when it last advanced or had no lag."""
        self._unassigned_since: float | None = None
        self._recovering_since: float | None = None
        self.state = WatchdogState(clock(), ready_lag=ready_lag)

    def excuse(self) -> None:
        """An outage (see `streams.outage`) explains any stall now: restart every stall clock, so the stall
        decisions start afresh once the outage is over instead of exiting before progress could resume."""
        now = self.clock()
        self._since = dict.fromkeys(self._since, now)
        if self._unassigned_since is not None:
            self._unassigned_since = now
        self._recovering_since = None

    def observe(
        self,
        positions: Mapping[TP, int],
        ends: Mapping[TP, int | None],
        topic_partitions: int,
    ) -> WatchdogState:
        """One check. `positions`: every assigned partition's committed next offset;
        `ends`: their end offsets where known; `topic_partitions`: how many
        partitions the consumed topics have in total (0 when they do not exist)."""
        now = self.clock()
        progressed = False
        for tp in list(self._since):
            if tp not in positions:
                del self._since[tp]
                self._position.pop(tp, None)
        lags: dict[TP, int] = {}
        for tp, pos in positions.items():
            end = ends.get(tp)
            lag = None if end is None else max(0, end - pos)
            if lag is not None:
                lags[tp] = lag
            if tp not in self._since:
                self._since[tp] = now
            elif pos != self._position.get(tp):
                self._since[tp] = now
                progressed = True
            if lag == 0:
                self._since[tp] = now
            self._position[tp] = pos
        lagging = {tp: now - self._since[tp] for tp, lag in lags.items() if lag > 0}
        stalled = tuple(sorted(tp for tp, quiet in lagging.items() if quiet >= self.stall_seconds))
        if positions or topic_partitions == 0:
            self._unassigned_since = None
        elif self._unassigned_since is None:
            self._unassigned_since = now
        unassigned_for = None if self._unassigned_since is None else now - self._unassigned_since
        unassigned_stall = unassigned_for is not None and unassigned_for >= self.stall_seconds
        caught_up = bool(positions) and len(lags) == len(positions) and not lagging
        if progressed or caught_up:
            self._recovering_since = None
        action = Action.NONE
        if (stalled or unassigned_stall) and self._recovering_since is None:
            self._recovering_since = now
            action = Action.RECOVER
        if self._recovering_since is not None and now - self._recovering_since >= self.recovery_seconds:
            action = Action.EXIT
        last_progress = max(lagging.values(), default=0.0)
        if unassigned_for is not None:
            last_progress = max(last_progress, unassigned_for)
        if stalled:
            reason = f"no progress for {self.stall_seconds:g}s on {format_partitions(stalled)}"
        elif unassigned_stall:
            reason = f"no partition assigned for {unassigned_for:.0f}s while the topics have {topic_partitions}"
        elif not positions:
            reason = "no partition assigned yet"
        elif len(lags) < len(positions):
            reason = "end offsets not known yet"
        else:
            reason = f"lag {sum(lags.values())} on {len(positions)} partition(s)"
        self.state = WatchdogState(
            checked_at=now,
            assigned=len(positions),
            topic_partitions=topic_partitions,
            lag=sum(lags.values()) if positions and len(lags) == len(positions) else None,
            stalled=stalled,
            unassigned_stall=unassigned_stall,
            last_progress_seconds=last_progress,
            recovering_seconds=None if self._recovering_since is None else now - self._recovering_since,
            action=action,
            ready_lag=self.ready_lag,
            reason=reason,
        )
        return self.state
