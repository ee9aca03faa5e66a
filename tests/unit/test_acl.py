"""The ACL plan: each role gets what it uses and nothing that would let it forge another's records."""

from __future__ import annotations

from pathlib import Path

import pytest

from judgeflow.acl import ROLES, kafka_acls_commands, needs_of, plan, worker_topics
from judgeflow.config import Settings
from judgeflow.services import local
from judgeflow.worker import build_worker
from streams.topics import INPUT_ROLES, TopicNames

PREFIX = "acme."
APP = "judgeflow-acme"


def writes_of(role: str) -> set[str]:
    return {g.name for g in needs_of(role, APP, PREFIX).grants() if g.operation == "Write"}


def test_the_worker_gets_every_topic_its_topology_reads_and_writes() -> None:
    app = build_worker(Settings(topic_prefix=PREFIX))
    names = TopicNames.with_prefix(PREFIX).all()
    reads, writes, _ = worker_topics(TopicNames.with_prefix(PREFIX), APP)
    for node in app.topology:  # type: ignore[attr-defined]
        assert {names[r] for r in node.reads} <= set(reads)
        assert {names[r] for r in node.writes} <= set(writes)
    worker = needs_of("worker", APP, PREFIX)
    changelogs = {f"{APP}-{table}-changelog" for table in ("run_state", "claim_state", "drift_state")}
    assert worker.group == APP and set(worker.owns) == changelogs
    assert {g.name for g in worker.grants() if g.operation == "Create"} == changelogs


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
    assert not [g for n in plan(APP, PREFIX) if n.role != "worker" for g in n.grants() if g.operation == "Create"]


def test_an_app_id_that_starts_another_grants_nothing_of_the_other() -> None:
    """`judgeflow` and `judgeflow-prod` side by side (and a topic prefix that starts with an app id): neither
    worker may touch the other's topics."""
    short = {g.name for g in needs_of("worker", "judgeflow", "").grants()}
    other = {g.name for g in needs_of("worker", "judgeflow-prod", "judgeflow-prod.").grants()}
    assert not short & other


def test_the_printed_commands_name_each_grant_once() -> None:
    needs = plan(APP, PREFIX, {"worker": "User:svc-worker"})
    lines = [line for line in kafka_acls_commands(needs) if not line.startswith("#")]
    assert all(line.startswith("kafka-acls.sh --bootstrap-server $BOOTSTRAP --command-config") for line in lines)
    assert sum(line.count("--operation") for line in lines) == sum(len(n.grants()) for n in needs)
    assert any("--allow-principal User:svc-worker" in line and "--topic judgeflow-acme-run_state-changelog" in line
               for line in lines)  # fmt: skip


def test_secure_services_refuse_a_broker_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """`services up --secure` never hands out plaintext exports of a broker it did not secure."""
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    with pytest.raises(RuntimeError, match="--secure starts a broker of its own"):
        local.start(Path("/nonexistent"), secure=True)
