"""The second peer: the Quix peer's claim step (`bench.peer.decide`) as a Bytewax dataflow.

One worker, Bytewax's own Kafka source (batches of 1,000) and sink; each decision goes to its routing
topic. Run as `python -m bench.peer_bytewax`, configured by environment like `bench.peer`; kept in
`bench/` only.
"""

from __future__ import annotations

import os
from typing import Any

from bench.peer import decide


def build_flow(bootstrap: str, prefix: str) -> Any:
    import bytewax.operators as op
    from bytewax.connectors.kafka import KafkaSink, KafkaSinkMessage, KafkaSource
    from bytewax.dataflow import Dataflow

    def step(msg: Any) -> Any:  # a KafkaSourceMessage (errors raise in the source)
        out = decide(msg.value or b"")
        return KafkaSinkMessage(msg.key, out["value"].encode(), topic=prefix + "routing." + out["route"])

    flow = Dataflow("claim_step")
    checks = op.input("checks", flow, KafkaSource([bootstrap], [prefix + "judge.checks"], batch_size=1000))
    op.output("routes", op.map("decide", checks, step), KafkaSink([bootstrap], None, {"linger.ms": "5"}))
    return flow


def main() -> None:
    from bytewax.run import cli_main

    cli_main(build_flow(os.environ["KAFKA_BOOTSTRAP_SERVERS"], os.environ["BENCH_TOPIC_PREFIX"]))


if __name__ == "__main__":
    main()
