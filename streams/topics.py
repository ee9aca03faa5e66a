"""Topic names. Defaults follow DESIGN's table; a prefix isolates tenants and tests."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class TopicNames:
    rubrics: str = "judge.rubrics"
    runs: str = "evaluation.runs"
    judge_outputs: str = "judge.outputs"
    checks: str = "judge.checks"
    reviews: str = "reviews"
    invalid: str = "judge.invalid"
    judge_outputs_valid: str = "judge.outputs.validated"
    checks_valid: str = "judge.checks.validated"
    reconciled: str = "evaluation.reconciled"
    done: str = "routing.done"
    second_judge: str = "routing.second_judge"
    human_review: str = "routing.human_review"
    reconcile_control: str = "judgeflow.reconcile.control"
    claims_control: str = "judgeflow.claims.control"
    alerts: str = "judgeflow.alerts"
    judge_outputs_rekeyed: str = "judgeflow.judge.outputs.rekeyed"
    checks_rekeyed: str = "judgeflow.judge.checks.rekeyed"
    judge_alerts: str = "judge.alerts"
    drift_partials: str = "judgeflow.drift.partials"

    @classmethod
    def with_prefix(cls, prefix: str) -> TopicNames:
        return cls(**{role: prefix + name for role, name in cls().all().items()})

    def all(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


INPUT_ROLES = ("rubrics", "runs", "judge_outputs", "checks", "reviews")
"""Source of truth: infinite retention, never rewritten."""

COMPACTED_ROLES = ("rubrics",)
INPUT_MAX_MESSAGE_BYTES = 8 << 20
"""Input topics accept records up to 8 MiB, well above judgeflow's 1 MB payload
limit, so an oversized event reaches the worker and is dead-lettered with
PAYLOAD_TOO_LARGE instead of being refused by the broker unseen."""


TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31
TOPIC_ALREADY_EXISTS = 36


class CreateRefused(PermissionError):
    """The broker refused to create topics this process needs: on a cluster with ACLs an admin creates them."""

    def __init__(self, topics: list[str]) -> None:
        super().__init__(f"may not Create topic {', '.join(topics)}: an admin creates the topics")
        self.topics = topics


async def ensure_topics(
    bootstrap: str,
    names: TopicNames,
    *,
    partitions: int,
    replication: int,
    required: Collection[str] | None = None,
    **client: Any,
) -> list[str]:
    """Create every judgeflow topic that is missing; return the ones created.

    Input topics keep everything (retention -1); `judge.rubrics` is compacted;
    replicated topics take acks=all writes while all but one replica are in sync.
    On a cluster with ACLs a principal sees only the topics it may describe and may create
    none: a refused creation raises `CreateRefused` only for the `required` topics (those
    this process uses; all of them when not given), and any other create error is raised.
    """
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **client)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = []
        for role, name in names.all().items():
            if name in existing:
                continue
            config = (
                {"retention.ms": "-1", "max.message.bytes": str(INPUT_MAX_MESSAGE_BYTES)} if role in INPUT_ROLES else {}
            )
            if role in COMPACTED_ROLES:
                config = {"cleanup.policy": "compact", "max.message.bytes": str(INPUT_MAX_MESSAGE_BYTES)}
            if replication > 1:
                # With acks=all, a write is acknowledged once this many replicas
                # have it: one replica may fail without losing or refusing writes.
                config["min.insync.replicas"] = str(replication - 1)
            wanted.append(NewTopic(name, partitions, replication, topic_configs=config))
        if not wanted:
            return []
        response = await admin.create_topics(wanted)
        errors = {name: code for name, code, *_ in response.topic_errors if code not in (0, TOPIC_ALREADY_EXISTS)}
        refused = [n for n, c in errors.items() if c in (TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED)]
        needed = [n for n in refused if required is None or n in required]
        if needed:
            raise CreateRefused(needed)
        failed = {n: c for n, c in errors.items() if n not in refused}
        if failed:
            raise RuntimeError(f"Kafka did not create {', '.join(f'{n} (error code {c})' for n, c in failed.items())}")
        created = [t.name for t in wanted if t.name not in errors]
        await _wait_for_leaders(admin, created)
        return created
    finally:
        await admin.close()


async def _wait_for_leaders(admin: Any, topics: list[str], timeout: float = 30.0) -> None:
    """New partitions take a moment to get a leader; producing before that
    only earns NotLeaderForPartition retries."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while True:
        described = await admin.describe_topics(topics)
        if all(
            t.get("error_code", 0) == 0
            and t.get("partitions")
            and all(p.get("leader", -1) >= 0 for p in t["partitions"])
            for t in described
        ):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics without leaders after {timeout}s: {topics}")
        await asyncio.sleep(0.1)
