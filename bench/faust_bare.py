"""Faust's own ceiling: the peer's stateless claim step as a bare faust-streaming app.

The same step as the Quix peer (`bench.peer.decide`: validate one claim check,
route it, publish the decision to one of the three routing topics), written the
fastest way Faust documents, so every bench run shows how much of judgeflow's
step rate is Faust's path and how much is judgeflow's:

- consume in batches with `stream.take_events(N, within)`. faust-streaming
  0.15.3 records each buffered event from `current_event` (and raises rather
  than buffering a None, the problem of faust-streaming #300 / robinhood #497)
  and acks a batch only after the loop body has run over it, so every event is
  acked once, after its decision was handed to the producer buffer;
- publish with `topic.send_soon` (into the producer buffer, no await per record);
  Faust flushes that buffer before it commits offsets (without judgeflow's
  `DrainingProducerBuffer`: at-least-once across a crash is not what this
  measures, every event producing exactly one decision is);
- producer linger and batch size, `stream_buffer_maxsize` and
  `broker_commit_every` raised from their defaults;
- the repaired Cython fast paths (`cython_optimizations`), on by default here.

Not used: uvloop (`mode.loop.use("uvloop")`, what Faust's `-L uvloop` does;
faust-streaming 0.15.3 has no `faust.use_uvloop()`). Measured on this bench
(10,000 claims, 4 alternating runs each) it was not faster: 4,207-5,916 ev/s
with it, 3,917-6,525 without.

No tables, no web server, no leader topic. Run as `python -m bench.faust_bare`;
configured by environment (`KAFKA_BOOTSTRAP_SERVERS`, `BENCH_TOPIC_PREFIX`) like
the peer, so the bench starts it as a separate process the same way.
"""

from __future__ import annotations

import os
from typing import Any

import faust

from bench.peer import decide

ROUTES = ("done", "second_judge", "human_review")

TAKE = int(os.environ.get("BENCH_FAUST_TAKE", "1000"))
"""Events per `take_events` batch. 1,000 with linger 5 ms and 5,000 with linger 20 ms measured
the same within this machine's noise (medians ~3,100 and ~2,900 ev/s over 6 runs each)."""
WITHIN = float(os.environ.get("BENCH_FAUST_WITHIN", "0.05"))
"""Seconds `take_events` waits for a batch to fill before handing over what it has."""
LINGER_MS = int(os.environ.get("BENCH_FAUST_LINGER_MS", "5"))
MAX_BATCH_BYTES = int(os.environ.get("BENCH_FAUST_MAX_BATCH_BYTES", str(1 << 20)))
CYTHON = os.environ.get("BENCH_FAUST_CYTHON", "1") == "1"
"""The repaired Cython paths: faster than without in 5 of 6 paired runs (by 0-96%), slower in one (by 37%);
median 3,100 against 2,940 ev/s. A weak signal on a noisy machine, kept because it was not worse."""


def build_app(bootstrap: str, prefix: str) -> faust.App:
    """The bare app: one agent, one source topic, three routing topics."""
    app = faust.App(
        f"faustbare-{prefix.rstrip('.')}",
        broker=f"kafka://{bootstrap}",
        store="memory://",
        web_enabled=False,
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        producer_linger=LINGER_MS / 1000,
        producer_max_batch_size=MAX_BATCH_BYTES,
        producer_max_request_size=8_000_000,
        stream_buffer_maxsize=max(4 * TAKE, 16_384),
        broker_commit_every=50_000,
        cython_optimizations=CYTHON,
    )
    raw: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
    source = app.topic(prefix + "judge.checks", **raw)
    targets = {name: app.topic(prefix + f"routing.{name}", **raw) for name in ROUTES}

    @app.agent(source)
    async def step(stream: faust.StreamT[bytes]) -> None:
        assert isinstance(stream, faust.Stream)  # take_events is on the class, not on StreamT
        async for events in stream.take_events(TAKE, WITHIN):
            for event in events:
                value = event.value if isinstance(event.value, bytes) else bytes(event.value or b"")
                out = decide(value)
                targets[out["route"]].send_soon(key=event.message.key, value=out["value"].encode())

    return app


def main() -> None:
    app = build_app(os.environ["KAFKA_BOOTSTRAP_SERVERS"], os.environ["BENCH_TOPIC_PREFIX"])
    faust.Worker(app, loglevel=os.environ.get("BENCH_FAUST_LOGLEVEL", "warning")).execute_from_commandline()


if __name__ == "__main__":
    main()
