"""How long the worker's consumer lets the broker hold a fetch that finds no data: 100 ms, not Faust's 1.5 s.

faust-streaming 0.15.3 builds its aiokafka consumer with `fetch_max_wait_ms=1500`, fixed. aiokafka sends a
fetch only for partitions whose earlier records it has handed over, so while a backlog's partitions still
had records buffered, the next fetch asked only for the idle ones (runs, rubrics, control topics) and the
broker held it the full 1.5 s for data that never came. Once the claim step got faster it drained the
buffered records within that wait, and the worker idled 0.3-0.9 s every few seconds with every thread in
epoll (bench/PROFILE.md). A fetch that has data returns at once whatever this is; an idle worker asks the
broker ten times a second instead of less than once.
"""

from __future__ import annotations

import logging
from typing import Any

FETCH_MAX_WAIT_MS = 100
log = logging.getLogger("judgeflow.streams")


def shorten_fetch_wait(consumer: Any, wait_ms: int = FETCH_MAX_WAIT_MS) -> None:
    """Make Faust's consumer thread build its aiokafka consumer with `wait_ms` (before that consumer starts)."""
    thread = consumer._thread
    create = thread._create_worker_consumer

    def create_worker_consumer(transport: Any) -> Any:
        made = create(transport)
        if not hasattr(made, "_fetch_max_wait_ms"):  # another aiokafka: say so rather than do nothing quietly
            log.warning("aiokafka's consumer has no _fetch_max_wait_ms: empty fetches wait Faust's 1.5 s")
        made._fetch_max_wait_ms = wait_ms  # read by AIOKafkaConsumer.start(), when it makes its fetcher
        return made

    thread._create_worker_consumer = create_worker_consumer
