"""What a process cannot reach, since when: the truth its health tells, its outage exit, and quiet logs.

A long-running process (the worker, the projector) reports each attempt to reach a dependency (its broker,
its database) as `failed` or `succeeded`. `Reachability` keeps, per dependency, when the current outage
began and how many attempts failed since, and from that:

- logs the outage once when it starts, then at most once per `log_every` seconds with the count and the
  time since it started, and once when it ends: a ten-minute outage is a handful of lines, not millions;
- tells health: not ready while anything is unreachable, not live once an outage has lasted
  `stall_seconds` (whatever the last known lag: unknown lag is not lag 0);
- says when to give up: after `exit_seconds` (0 = never) of one outage, so a supervisor restarts the
  process and an operator sees the restarts.

No I/O and no clock of its own (`clock`, `wall` are parameters): tests drive it with fake clocks.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from streams.watchdog import WatchdogState

DEFAULT_OUTAGE_EXIT_SECONDS = 300.0
"""`JUDGEFLOW_OUTAGE_EXIT_SECONDS`: how long one outage may last before the process exits non-zero."""
DEFAULT_LOG_EVERY_SECONDS = 60.0
"""`JUDGEFLOW_LOG_REPEAT_SECONDS`: at most one line per this interval for a failure that repeats."""

BROKER, POSTGRES = "broker", "Postgres"


def span(seconds: float) -> str:
    """A duration as people read it: 45s, 5m 00s, 1h 02m."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


@dataclass
class Outage:
    """One dependency out of reach: since when (monotonic and wall clock), how many attempts failed."""

    target: str
    since: float
    since_wall: datetime
    attempts: int = 1
    last_error: str = ""
    logged_at: float = 0.0
    attempts_logged: int = 1

    def describe(self, now: float) -> str:
        return f"{self.target} unreachable for {span(now - self.since)} (since {self.since_wall:%H:%M:%S} UTC)"


class Reachability:
    """Outages by dependency name ("broker", "Postgres"), with the policy around them (module docstring)."""

    def __init__(
        self,
        *,
        stall_seconds: float = 60.0,
        exit_seconds: float = DEFAULT_OUTAGE_EXIT_SECONDS,
        log_every: float = DEFAULT_LOG_EVERY_SECONDS,
        log: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.stall_seconds = stall_seconds
        self.exit_seconds = exit_seconds
        self.log_every = log_every
        self.log = log or logging.getLogger("judgeflow.outage")
        self.clock = clock
        self.wall = wall
        self.outages: dict[str, Outage] = {}

    def failed(self, name: str, target: str, error: object) -> None:
        """One attempt to reach `name` (at `target`, e.g. "broker 127.0.0.1:9092") failed with `error`."""
        now, text = self.clock(), _first_line(error)
        outage = self.outages.get(name)
        if outage is None:
            self.outages[name] = Outage(target, now, self.wall(), last_error=text, logged_at=now)
            self.log.warning(
                "%s unreachable (%s); retrying with backoff, quietly: one line per %s until it ends",
                target,
                text,
                span(self.log_every),
            )
            return
        outage.attempts += 1
        outage.last_error = text
        if now - outage.logged_at >= self.log_every:
            self.log.warning("%s, %s attempts (last: %s)", outage.describe(now), f"{outage.attempts:,}", text)
            outage.logged_at, outage.attempts_logged = now, outage.attempts

    def succeeded(self, name: str) -> None:
        """An attempt to reach `name` succeeded: any outage of it is over."""
        outage = self.outages.pop(name, None)
        if outage is not None:
            self.log.warning(
                "%s reachable again after %s, %s failed attempts",
                outage.target,
                span(self.clock() - outage.since),
                f"{outage.attempts:,}",
            )

    def down(self) -> dict[str, float]:
        """Seconds each unreachable dependency has been out of reach."""
        now = self.clock()
        return {name: now - outage.since for name, outage in self.outages.items()}

    def reason(self) -> str:
        """What is unreachable and since when, or "" when everything answers."""
        now = self.clock()
        return "; ".join(outage.describe(now) for outage in self.outages.values())

    def exit_reason(self) -> str | None:
        """Why the process should exit now (an outage longer than `exit_seconds`), or None."""
        if self.exit_seconds <= 0:
            return None
        now = self.clock()
        long = [o for o in self.outages.values() if now - o.since >= self.exit_seconds]
        if not long:
            return None
        return "; ".join(f"{o.describe(now)}, {o.attempts:,} attempts" for o in long) + (
            f": past JUDGEFLOW_OUTAGE_EXIT_SECONDS={self.exit_seconds:g}"
        )

    def judge(self, state: WatchdogState) -> WatchdogState:
        """`state` (a `streams.watchdog.WatchdogState`) as health should report it during an outage: not ready
        at once, not live after `stall_seconds`, lag unknown while the broker is out of reach, the reason naming
        what is unreachable and since when."""
        down = self.down()
        if not down:
            return state
        reason = self.reason()
        return dataclasses.replace(
            state,
            lag=None if BROKER in down else state.lag,
            reason=reason,
            unreachable=tuple(down),
            outage_stalled=max(down.values()) >= self.stall_seconds,
        )


def _first_line(error: object) -> str:
    """An error's first line; an exception's with its type (some, e.g. TimeoutError, have no message)."""
    text = (str(error).strip().splitlines() or [""])[0][:300]
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text
