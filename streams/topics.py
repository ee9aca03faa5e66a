"""Topic names. Defaults follow DESIGN's table; a prefix isolates tenants and tests."""

from __future__ import annotations

from dataclasses import dataclass, fields


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

    @classmethod
    def with_prefix(cls, prefix: str) -> TopicNames:
        return cls(**{f.name: prefix + f.default for f in fields(cls)})  # type: ignore[operator]

    def all(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


INPUT_ROLES = ("rubrics", "runs", "judge_outputs", "checks", "reviews")
"""Source of truth: infinite retention, never rewritten."""

COMPACTED_ROLES = ("rubrics",)


async def ensure_topics(
    bootstrap: str, names: TopicNames, *, partitions: int, replication: int, **client: object
) -> list[str]:
    """Create every judgeflow topic that is missing; return the ones created.

    Input topics keep everything (retention -1); `judge.rubrics` is compacted.
    """
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **client)  # type: ignore[arg-type]
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = []
        for role, name in names.all().items():
            if name in existing:
                continue
            config = {"retention.ms": "-1"} if role in INPUT_ROLES else {}
            if role in COMPACTED_ROLES:
                config = {"cleanup.policy": "compact"}
            wanted.append(NewTopic(name, partitions, replication, topic_configs=config))
        if wanted:
            await admin.create_topics(wanted)
        return [t.name for t in wanted]
    finally:
        await admin.close()
