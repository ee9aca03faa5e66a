"""Faust's own ceiling: the peer's stateless claim step as a bare faust-streaming app.

The same step as the Quix peer (`bench.peer.decide`: validate one claim check,
route it, publish the decision to one of the three routing topics), written the
fastest way Faust documents, so every bench run shows how much of judgeflow's
step rate is Faust's path and how much is judgeflow's:

- consume in batches with `stream.take_events(N, within)`; faust-streaming
  0.15.3 takes each event from `current_event` as it is buffered and acks the
  batch only after the loop body has run (the fix of faust-streaming #300), so
  no event is acked before its decision is handed to the producer;
- publish with `topic.send_soon` (into the producer buffer, no await per record);
  the producer flushes that buffer before every offset commit;
- producer linger and batch size, `stream_buffer_maxsize` and
  `broker_commit_every` raised from their defaults;
- the repaired Cython fast paths (`cython_optimizations`) and uvloop, each only
  where it measured faster (see the module constants).

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
"""Events per `take_events` batch."""
WITHIN = float(os.environ.get("BENCH_FAUST_WITHIN", "0.05"))
"""Seconds `take_events` waits for a batch to fill before handing over what it has."""
LINGER_MS = int(os.environ.get("BENCH_FAUST_LINGER_MS", "5"))
MAX_BATCH_BYTES = int(os.environ.get("BENCH_FAUST_MAX_BATCH_BYTES", str(1 << 20)))
CYTHON = os.environ.get("BENCH_FAUST_CYTHON", "1") == "1"
UVLOOP = os.environ.get("BENCH_FAUST_UVLOOP", "0") == "1"


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
    if UVLOOP:
        import mode.loop

        mode.loop.use("uvloop")
    app = build_app(os.environ["KAFKA_BOOTSTRAP_SERVERS"], os.environ["BENCH_TOPIC_PREFIX"])
    faust.Worker(app, loglevel=os.environ.get("BENCH_FAUST_LOGLEVEL", "warning")).execute_from_commandline()


if __name__ == "__main__":
    main()
