"""judgeflow on a broker secured as managed Kafka is: SASL_SSL with SCRAM-SHA-512, the StandardAuthorizer,
and one principal per process with the least-privilege ACLs of `judgeflow acl`. The whole pipeline runs on it
(worker, projector, `produce`, `tail`, dashboard) and routes seed 003's 1,000-claim night claim for claim as
the same pipeline on the plaintext broker does, and as the routing function does. Every refusal is one clear
line within seconds."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

from judgeflow.acl import Needs, needs_of
from judgeflow.demo import Published, nightly_claims
from judgeflow.kafka_access import AccessRefused, check_access
from judgeflow.services.secure_kafka import SecureKafkaBroker
from judgeflow.services.tls import new_authority, server_pem
from schemas import ContractError
from schemas.parse import parse_claim_check
from streams.routing import route, route_invalid
from tests.scaffold import fresh_schema
from tests.secure_deploy import SecureDeployment
from tests.support import REPO, ProjectorProcess, Worker, judgeflow_server, unique_prefix, wait_for

if TYPE_CHECKING:
    from tests.support import Worker as WorkerT

pytestmark = pytest.mark.integration


def reference_routes(values: list[bytes]) -> dict[str, str]:
    """What the routing function makes of each claim check (invalid ones go to people)."""
    routes: dict[str, str] = {}
    for value in values:
        claim_id = json.loads(value)["claim_id"]
        try:
            routes[claim_id] = route(parse_claim_check(value)).route
        except ContractError:
            routes[claim_id] = route_invalid().route
    return routes


def _refused_by_contract(value: bytes) -> bool:
    try:
        parse_claim_check(value)
    except ContractError:
        return True
    return False


def first_routes(database_url: str, schema: str) -> dict[str, str]:
    with psycopg.connect(database_url, autocommit=True, options=f"-c search_path={schema}") as conn:
        rows = conn.execute(
            "SELECT DISTINCT ON (claim_id) claim_id, route FROM routing_decisions WHERE subject = 'claim' "
            "ORDER BY claim_id, decided_at"
        ).fetchall()
    return dict(rows)


def as_role(process: WorkerT, deployment: SecureDeployment, user: str) -> WorkerT:
    process.env.update(deployment.broker.env(user))
    return process


def routes_on_the_plain_broker(kafka_bootstrap: str, database_url: str, tmp_path: Path, night: Path) -> dict[str, str]:
    """The same night through the same pipeline on the plaintext broker without ACLs."""
    prefix = unique_prefix()
    with fresh_schema(database_url, "plain") as schema:
        worker = Worker(kafka_bootstrap, prefix, tmp_path / "plain-w")
        with worker, ProjectorProcess(kafka_bootstrap, prefix, tmp_path / "plain-p", database_url, schema):
            env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "JUDGEFLOW_TOPIC_PREFIX": prefix}
            command = [sys.executable, "-m", "judgeflow.cli", "produce", str(night), "--topic", "judge.checks", "--raw"]
            sent = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
            assert sent.returncode == 0, sent.stderr
            wait_for(lambda: len(first_routes(database_url, schema)) == 1000, 180, "the plain night routed", worker)
            return first_routes(database_url, schema)


def test_the_pipeline_runs_on_the_secured_broker_one_principal_each(
    secure_kafka: SecureKafkaBroker, kafka_bootstrap: str, database_url: str, tmp_path: Path
) -> None:
    d = SecureDeployment.create(secure_kafka)
    records = nightly_claims(d.names, 1000, 3, Published())
    values = [value for _, _, value in records]
    night = tmp_path / "night.jsonl"
    night.write_bytes(b"\n".join(values) + b"\n")
    expected = reference_routes(values)
    invalid = sum(1 for v in values if _refused_by_contract(v))

    with fresh_schema(database_url, "sec") as schema:
        worker = as_role(Worker(secure_kafka.bootstrap, d.prefix, tmp_path / "w"), d, "worker")
        projector = as_role(
            ProjectorProcess(secure_kafka.bootstrap, d.prefix, tmp_path / "p", database_url, schema), d, "projector"
        )
        with worker, projector:
            # --raw: what the contract refuses goes through to the worker's dead letter, as on the plain broker.
            sent = d.cli("judge", "produce", str(night), "--topic", "judge.checks", "--raw")
            assert sent.returncode == 0, sent.stderr
            wait_for(lambda: len(first_routes(database_url, schema)) == len(expected), 180,
                     "every claim routed and projected", worker)  # fmt: skip
            assert first_routes(database_url, schema) == expected
            assert projector.alive() and worker.alive()

            tail = d.cli("analyst", "tail", "routing.human_review", "--json")
            assert tail.returncode == 0, tail.stderr
            tailed = Counter(json.loads(line)["value"]["claim_id"] for line in tail.stdout.splitlines())
            assert set(tailed) == {c for c, r in expected.items() if r == "human_review"}

            dashboard = judgeflow_server(["dashboard", "--schema", schema], {"DATABASE_URL": database_url}, "dash")
            with dashboard as base, urllib.request.urlopen(f"{base}/api/summary", timeout=30) as response:
                queues = json.loads(response.read())["data"]["queues"]
            assert {k: v for k, v in queues.items() if v} == dict(Counter(expected.values()))
    assert d.read_all([d.names.invalid])[d.names.invalid] == invalid
    assert routes_on_the_plain_broker(kafka_bootstrap, database_url, tmp_path, night) == expected


def test_refusals_are_one_line_within_seconds(secure_kafka: SecureKafkaBroker, tmp_path: Path) -> None:
    """Wrong password, unknown user, a client without an ACL, a plaintext client on the TLS port, a CA it does
    not trust: each one line naming the principal (and operation and resource), in under 5 s."""
    d = SecureDeployment.create(secure_kafka)
    judge = d.names.judge_outputs
    cases = {
        "wrong password": (
            replace(secure_kafka.security("judge"), sasl_password="not-it"),
            needs_of("judge", d.app_id, d.prefix),
            "refused User:judge (SCRAM-SHA-512): wrong password or unknown user",
        ),
        "unknown user": (
            replace(secure_kafka.security("judge"), sasl_username="mallory"),
            Needs("judge", "User:mallory", writes=(judge,)),
            "refused User:mallory (SCRAM-SHA-512): wrong password or unknown user",
        ),
        "no ACL at all": (
            secure_kafka.security("nobody"),
            Needs("judge", "User:nobody", writes=(judge,)),
            f"User:nobody may not Write topic {judge}: add ACL: kafka-acls.sh --add --allow-principal User:nobody "
            f"--operation Write --topic {judge}",
        ),
        "the desk writing a judge output": (
            secure_kafka.security("desk"),
            Needs("desk", "User:desk", writes=(judge,)),
            f"User:desk may not Write topic {judge}",
        ),
        "the analyst joining the worker's group": (
            secure_kafka.security("analyst"),
            Needs("worker", "User:analyst", group=d.app_id),
            f"User:analyst may not Read group {d.app_id}: add ACL: kafka-acls.sh --add --allow-principal "
            f"User:analyst --operation Read --group {d.app_id}",
        ),
        "plaintext on the TLS port": (
            replace(secure_kafka.security("judge"), security_protocol="PLAINTEXT", sasl_mechanism=None),
            Needs("judge", "User:ANONYMOUS", writes=(judge,)),
            "expects TLS but this client connects with PLAINTEXT",
        ),
        "a CA it does not trust": (
            replace(secure_kafka.security("judge"), ssl_cafile=str(_write(tmp_path / "ca.pem", new_authority().pem))),
            needs_of("judge", d.app_id, d.prefix),
            "the broker's certificate is not signed by a trusted CA (",
        ),
    }
    for label, (security, needs, line) in cases.items():
        started = time.monotonic()
        with pytest.raises(AccessRefused) as refused:
            check_access(secure_kafka.bootstrap, security, needs)
        took = time.monotonic() - started
        assert line in str(refused.value), label
        assert "\n" not in str(refused.value) and took < 5, (label, took)
        assert "not-it" not in str(refused.value)
    for role in ("worker", "projector", "judge", "desk", "analyst"):  # and each role has exactly what it needs
        assert check_access(secure_kafka.bootstrap, secure_kafka.security(role), needs_of(role, d.app_id, d.prefix))


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_an_expired_broker_certificate_is_named(tmp_path: Path) -> None:
    """Kafka refuses to start with an expired certificate, so this one expires 25 s after it was made: the
    broker starts with it, and once the clock has passed its end a client names the cause."""
    ca = new_authority()
    now = dt.datetime.now(dt.UTC)
    expires = now + dt.timedelta(seconds=25)
    workdir = tmp_path / "expiring"
    (workdir / "tls").mkdir(parents=True)
    (workdir / "tls" / "ca.pem").write_bytes(ca.pem)
    (workdir / "tls" / "broker.pem").write_bytes(server_pem(ca, not_before=now - dt.timedelta(minutes=1),
                                                            not_after=expires))  # fmt: skip
    broker = SecureKafkaBroker(workdir, ("judge",))  # keeps the TLS files it finds
    broker.start()
    try:
        wait_for(lambda: dt.datetime.now(dt.UTC) > expires + dt.timedelta(seconds=1), 60, "the certificate expired")
        started = time.monotonic()
        with pytest.raises(AccessRefused, match="the broker's certificate has expired"):
            check_access(broker.bootstrap, broker.security("judge"), Needs("judge", "User:judge"))
        assert time.monotonic() - started < 5
    finally:
        broker.stop()


def test_the_cli_refuses_in_one_line(secure_kafka: SecureKafkaBroker, tmp_path: Path) -> None:
    """What a person at a terminal sees: `produce` as the desk, `tail` as the judge, a plaintext `tail`."""
    d = SecureDeployment.create(secure_kafka)
    check = tmp_path / "c.jsonl"
    check.write_text(d.cli("judge", "produce", "--example", "judge.checks").stdout)
    as_desk = d.cli("desk", "produce", str(check), "--topic", "judge.checks")
    assert as_desk.returncode == 1
    assert as_desk.stderr.strip().splitlines() == [
        f"Error: User:desk may not Write topic {d.names.checks}: add ACL: kafka-acls.sh --add --allow-principal "
        f"User:desk --operation Write --topic {d.names.checks}"
    ]
    as_judge = d.cli("judge", "tail", "routing.done")
    assert as_judge.returncode == 1 and f"User:judge may not Read topic {d.names.done}" in as_judge.stderr
    plain = d.cli("analyst", "tail", "routing.done", KAFKA_SECURITY_PROTOCOL="PLAINTEXT", KAFKA_SASL_MECHANISM="")
    assert plain.returncode == 1 and "expects TLS" in plain.stderr
    assert d.read_all([d.names.checks])[d.names.checks] == 0  # nothing reached the topic
