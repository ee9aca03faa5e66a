"""Reliability scenario 10, intruders: on the secured broker, with the pipeline running as its own least-privilege
principals, a judge producer tries to forge a routing decision, the desk's principal tries to publish a judge
output, a client brings a wrong password and another speaks plaintext to the TLS port. Each is refused within
seconds with one clear line, nothing of theirs reaches a topic, and the pipeline loses nothing."""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import TopicAuthorizationFailedError

from bench.harness import read_all
from judgeflow import workload
from judgeflow.acl import Needs
from judgeflow.kafka_access import AccessRefused, check_access
from judgeflow.services.secure_kafka import SecureKafkaBroker
from tests.conftest import RELIABILITY
from tests.reliability.scenario import Scenario, split
from tests.secure_deploy import SecureDeployment

FORGED_CLAIM = "forged-claim-0001"


def forge_decision(broker: SecureKafkaBroker, topic: str) -> tuple[str, float]:
    """The judge producer's principal writes a decision straight to the routing topic, as a raw client would."""
    decision = {"schema_version": "1.0", "subject": "claim", "claim_id": FORGED_CLAIM, "route": "done"}

    async def run() -> str:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True,
                                    **broker.security("judge").aiokafka_kwargs())  # fmt: skip
        await producer.start()
        try:
            await asyncio.wait_for(producer.send_and_wait(topic, json.dumps(decision).encode()), 10)
            return "accepted"
        except TopicAuthorizationFailedError as exc:
            return f"refused: {exc!r}"
        finally:
            await producer.stop()

    started = time.monotonic()
    outcome = asyncio.run(run())
    return outcome, time.monotonic() - started


def refused_cli(d: SecureDeployment, user: str, file: Path, topic: str, **env: str) -> tuple[str, float]:
    started = time.monotonic()
    done = d.cli(user, "produce", str(file), "--topic", topic, **env)
    took = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    return lines[0].removeprefix("Error: "), took


@pytest.mark.integration
def test_intruders_are_refused_and_the_pipeline_loses_nothing(
    secure_kafka: SecureKafkaBroker, database_url: str, tmp_path: Path
) -> None:
    d = SecureDeployment.create(secure_kafka)
    admin: dict[str, Any] = secure_kafka.security("admin").aiokafka_kwargs()
    judge: dict[str, Any] = secure_kafka.security("judge").aiokafka_kwargs()
    sc = Scenario(secure_kafka.bootstrap, database_url, tmp_path, seed=1010, prefix=d.prefix, client=admin,
                  send_client=judge)  # fmt: skip
    first, second = split(sc.workload(), 2)
    output = tmp_path / "output.jsonl"  # a valid judge output of a run of its own
    run_id = workload.stable_id("intruder-run")
    output.write_text(json.dumps(workload.judge_output(random.Random(1), run_id, workload.JUDGE_MODELS[0])) + "\n")
    secret = secure_kafka.security("judge").sasl_password
    assert secret

    refusals: dict[str, tuple[str, float]] = {}
    with sc.worker(**secure_kafka.env("worker")) as worker, sc.projector(**secure_kafka.env("projector")) as proj:
        sc.send(first)
        refusals["forged decision"] = forge_decision(secure_kafka, d.names.done)
        try:
            check_access(secure_kafka.bootstrap, secure_kafka.security("judge"),
                         Needs("judge", "User:judge", writes=(d.names.done,)))  # fmt: skip
        except AccessRefused as exc:
            refusals["forged decision, the check's line"] = (str(exc), 0.0)
        refusals["desk publishes a judge output"] = refused_cli(d, "desk", output, "judge.outputs")
        refusals["wrong password"] = refused_cli(
            d, "judge", output, "judge.outputs", KAFKA_SASL_PASSWORD_FILE="", KAFKA_SASL_PASSWORD="wrong-" + secret
        )
        refusals["plaintext client"] = refused_cli(
            d, "judge", output, "judge.outputs", KAFKA_SECURITY_PROTOCOL="PLAINTEXT", KAFKA_SASL_MECHANISM=""
        )
        sc.send(second)
        sc.wait_accounted(180, worker, proj)
        assert worker.alive() and proj.alive()

    lines = {label: line for label, (line, _) in refusals.items()}
    assert lines["forged decision"].startswith("refused: TopicAuthorizationFailedError")
    assert lines["forged decision, the check's line"].startswith(f"User:judge may not Write topic {d.names.done}: ")
    assert lines["desk publishes a judge output"].startswith(f"User:desk may not Write topic {d.names.judge_outputs}")
    assert "refused User:judge (SCRAM-SHA-512): wrong password or unknown user" in lines["wrong password"]
    assert "expects TLS but this client connects with PLAINTEXT" in lines["plaintext client"]
    assert all(took < 10 for _, took in refusals.values()), refusals
    assert not any(secret in line for line in lines.values())

    topics = [d.names.done, d.names.judge_outputs]
    records = asyncio.run(read_all(sc.kafka, topics, **admin))
    assert not [r for r in records if FORGED_CLAIM.encode() in r.value or run_id.encode() in (r.key or b"")]
    slowest = max(took for _, took in refusals.values())
    row = sc.verdict("10 intruders", None, refused=len(refusals) - 1, slowest_refusal_s=round(slowest, 2))
    RELIABILITY["10 intruders"] = row
