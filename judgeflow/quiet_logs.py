"""Quiet logs during an outage: the Kafka clients' repeating lines, at most one per interval.

With its broker gone, aiokafka logs "Unable connect to node ..." and "Unable to update metadata ..." thousands
of times a second; Faust adds its own. `RepeatFilter` lets the first line of each kind through (never
silencing the first occurrence), then at most one per `every` seconds, carrying how many like it were held
back. judgeflow's own repeating failures go through `streams.outage.Reachability`, which says when an outage
starts, how long it has lasted, and when it ends; its lines pass here untouched.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from streams.outage import span

_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
OWN = "judgeflow"
"""Loggers under this name are judgeflow's own: not filtered."""


@dataclass
class _Seen:
    logged_at: float
    held: int = 0


class RepeatFilter(logging.Filter):
    """One line per (logger, message template with its numbers blanked) per `every` seconds, for every logger but
    judgeflow's own."""

    def __init__(self, every: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every = every
        self.clock = clock
        self._seen: dict[tuple[str, int, str], _Seen] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == OWN or record.name.startswith(OWN + "."):
            return True
        # Numbers do not make a kind: some clients format their message before logging it ("producer buffer
        # full size 210", "... size 111"), and every value would otherwise pass as a line of its own.
        text = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
        key = (record.name, record.levelno, _NUMBER.sub("#", text))
        now = self.clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen.logged_at < self.every:
            seen.held += 1
            return False
        if seen is not None and seen.held and isinstance(record.msg, str):
            record.msg = f"{record.msg} [and {seen.held:,} more like it in the last {span(now - seen.logged_at)}]"
        self._seen[key] = _Seen(now)
        return True


def quiet_repeats(every: float, root: logging.Logger | None = None) -> RepeatFilter:
    """Install one `RepeatFilter` on every handler of the root logger (where every record ends up), once."""
    root = root or logging.getLogger()
    for handler in root.handlers:
        for existing in handler.filters:
            if isinstance(existing, RepeatFilter):
                return existing
    repeat = RepeatFilter(every)
    for handler in root.handlers:
        handler.addFilter(repeat)
    return repeat
