"""The ACL plan: each role gets what it uses and nothing that would let it forge another's records."""

from __future__ import annotations

from judgeflow.acl import ROLES, kafka_acls_commands, needs_of, plan, worker_topics
from judgeflow.config import Settings
from judgeflow.worker import build_worker
from streams.topics import INPUT_ROLES, TopicNames

PREFIX = "acme."
APP = "judgeflow-acme"


def writes_of(role: str) -> set[str]:
    return {g.name for g in needs_of(role, APP, PREFIX).grants() if g.operation == "Write"}


def test_the_worker_gets_every_topic_its_topology_reads_and_writes() -> None:
    app = build_worker(Settings(topic_prefix=PREFIX))
    names = TopicNames.with_prefix(PREFIX).all()
    reads, writes = worker_topics(TopicNames.with_prefix(PREFIX))
    for node in app.topology:  # type: ignore[attr-defined]
        assert {names[r] for r in node.reads} <= set(reads)
        assert {names[r] for r in node.writes} <= set(writes)
    worker = needs_of("worker", APP, PREFIX)
    assert worker.group == APP and worker.internal_prefix == f"{APP}-"
    assert {g.operation for g in worker.grants() if g.pattern == "prefixed"} == {"Create", "Describe", "Read", "Write"}


def test_nobody_but_the_worker_writes_a_decision_and_only_the_desk_writes_reviews() -> None:
    names = TopicNames.with_prefix(PREFIX)
    decisions = {names.done, names.second_judge, names.human_review, names.reconciled}
    for role in ROLES:
        if role != "worker":
            assert not writes_of(role) & decisions, role
    assert writes_of("desk") == {names.reviews}
    assert writes_of("judge") == {getattr(names, r) for r in INPUT_ROLES if r != "reviews"}
    assert names.reviews not in writes_of("worker")
    assert writes_of("projector") == set() and writes_of("analyst") == set()
    assert all(g.pattern == "literal" for n in plan(APP, PREFIX) if n.role != "worker" for g in n.grants())


def test_the_printed_commands_name_each_grant_once() -> None:
    needs = plan(APP, PREFIX, {"worker": "User:svc-worker"})
    lines = [line for line in kafka_acls_commands(needs) if not line.startswith("#")]
    assert all(line.startswith("kafka-acls.sh --bootstrap-server $BOOTSTRAP --command-config") for line in lines)
    assert sum(line.count("--operation") for line in lines) == sum(len(n.grants()) for n in needs)
    assert any("--allow-principal User:svc-worker" in line and "--resource-pattern-type prefixed" in line
               for line in lines)  # fmt: skip
