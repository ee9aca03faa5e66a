"""Hand each fetched batch of records to the agents' streams in one step, not one scheduled step per record.

faust-streaming 0.15.3 delivers every fetched record through `Service.wait_first(callback(message),
suspend_flow.wait())`: two tasks created, scheduled and cancelled per record, and an event-loop turn in
which the agent wakes for that one record. A profile of the claim step put ~7% of the worker's CPU in
`wait_first` alone, and the turn per record kept every agent batch at one event. `deliver_in_batches`
replaces the consumer's drain loop with one that awaits the same callback for each record of a fetch
inside a single `wait_first`, so the records of a fetch reach the stream queues together.

One departure more: while the conductor holds a partition back because its stream queue is full
(`Consumer.on_buffer_full`), a fetch of the other partitions waits at most 20 ms for records, not Faust's
1 s. The held-back partitions are left out of the fetch, so it waited for records from idle ones; the agents
drained the queue meanwhile, the conductor let the partitions in again, and the worker then sat idle for the
rest of the second with every thread in `epoll_wait` (0.6-1.0 s every 1.5-3 s on a backlog;
bench/PROFILE.md, issue 31). While a partition stays held back (an agent waiting on a broker that is out,
say), the loop fetches about fifty times a second, each fetch a call into the consumer thread. When every
partition is held back, Faust itself sleeps a second before it fetches again; that stays as it is.

What stays as Faust does it: the callback (the conductor's routing to each topic's streams), the
`suspend_flow` cut-off (a rebalance cancels the delivery of the rest of the fetch; those records are read
again after the seek, as the durable consumer keeps no read offsets), `commit_every`, and the handling of
a stopped or cancelled consumer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from faust.transport.consumer import CONSUMER_FETCHING

log = logging.getLogger("judgeflow.worker")

FETCH_TIMEOUT_SECONDS = 1.0
HELD_BACK_FETCH_TIMEOUT_SECONDS = 0.02
"""How long a fetch waits for records while a partition is held back: the next fetch looks again at which
partitions are active."""


def fetch_timeout(consumer: Any) -> float:
    """The wait for the next fetch: short while a full stream queue holds a partition back."""
    return HELD_BACK_FETCH_TIMEOUT_SECONDS if getattr(consumer, "_buffered_partitions", ()) else FETCH_TIMEOUT_SECONDS


def deliver_in_batches(consumer: Any) -> Callable[[Any], Awaitable[None]]:
    """A replacement for `consumer._drain_messages(fetcher)` that delivers a whole fetch per step."""
    if not hasattr(consumer, "_buffered_partitions"):  # another faust-streaming: say so rather than do nothing
        log.warning("Faust's consumer has no _buffered_partitions: a fetch waits 1 s while a queue is full")

    async def deliver(messages: list[Any]) -> None:
        callback = consumer.callback
        for message in messages:
            if consumer._commit_every is not None and consumer._n_acked >= consumer._commit_every:
                consumer._n_acked = 0
                await consumer.commit()
            await callback(message)

    async def drain(fetcher: Any) -> None:
        stopped, fetcher_stopped = consumer._stopped.is_set, fetcher._stopped.is_set
        try:
            while not (stopped() or fetcher_stopped()):
                consumer.diag.set_flag(CONSUMER_FETCHING)
                messages = [message async for _, message in consumer.getmany(timeout=fetch_timeout(consumer))]
                await asyncio.sleep(0)  # getmany can return at once, again and again
                if messages and not consumer.should_stop:
                    await consumer.wait_first(deliver(messages), consumer.suspend_flow.wait())
                consumer.diag.unset_flag(CONSUMER_FETCHING)
        except consumer.consumer_stopped_errors:
            if consumer.transport.app.should_stop:
                return
            raise
        except asyncio.CancelledError:
            if consumer.transport.app.should_stop:
                return
            raise
        except Exception:
            log.exception("delivering fetched records failed")
            raise
        finally:
            consumer.diag.unset_flag(CONSUMER_FETCHING)

    return drain
