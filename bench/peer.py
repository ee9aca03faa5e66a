"""The peer: judgeflow's stateless claim step written with Quix Streams.

Validate each claim check against the same contract (`validate_claim_check`),
route it by the same rule (`route`, default policy), publish the decision to
the same three routing topics. Run as `python -m bench.peer`; configured by
environment so the runner can start it as a separate process like the worker.
Kept in `bench/` only: judgeflow itself does not depend on Quix.
"""

from __future__ import annotations

import json
import os
from typing import Any

from schemas import ContractError, RoutingPolicy, validate_claim_check
from streams.routing import route, route_invalid

POLICY = RoutingPolicy()


def decide(raw: bytes) -> dict[str, Any]:
    """The decision for one raw claim check (route + the record to publish)."""
    try:
        check = validate_claim_check(raw).event
    except ContractError as err:
        decision = route_invalid()
        return {"route": "human_review", "value": json.dumps({"reason": decision.reason, "codes": err.codes})}
    decision = route(check, POLICY)
    doc = {
        "subject": "claim",
        "claim_id": check.claim_id,
        "route": decision.route,
        "reason": decision.reason,
        "verdict": check.verdict,
        "score": check.score,
        "confidence": check.confidence,
    }
    return {"route": decision.route, "value": json.dumps(doc)}


def main() -> None:
    from quixstreams import Application

    prefix = os.environ["BENCH_TOPIC_PREFIX"]
    app = Application(
        broker_address=os.environ["KAFKA_BOOTSTRAP_SERVERS"],
        consumer_group=f"peer-{prefix}",
        auto_offset_reset="earliest",
        loglevel="WARNING",
        auto_create_topics=False,
    )
    source = app.topic(prefix + "judge.checks", value_deserializer="bytes")
    sdf = app.dataframe(source).apply(decide)
    for route_name in ("done", "second_judge", "human_review"):
        target = app.topic(prefix + f"routing.{route_name}", value_serializer="str")
        branch = sdf[sdf["route"] == route_name]
        branch.apply(lambda d: d["value"]).to_topic(target)
    app.run()


if __name__ == "__main__":
    main()
