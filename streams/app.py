"""The stream topology, in one place: every agent, what it reads, keeps and writes.

`AGENTS` is the declaration `judgeflow topology` prints; `build_app` wires
each declared agent to its Faust stream and refuses to send anywhere an agent
did not declare. Agents are thin: decode a record, call a pure function from
`streams.edge` (or later `reconcile` / `routing`), send what it returns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import faust

from judgeflow.config import Settings
from schemas import ContractError
from schemas.errors import ErrorDetail
from streams.edge import Outgoing, SourceRef, dead_letter, screen_claim_check, screen_judge_output
from streams.topics import TopicNames

log = logging.getLogger("judgeflow.streams")

Screen = Callable[..., list[Outgoing]]


@dataclass(frozen=True)
class AgentSpec:
    name: str
    reads: str
    writes: tuple[str, ...]
    keeps: tuple[str, ...] = ()
    does: str = ""


AGENTS: tuple[AgentSpec, ...] = (
    AgentSpec(
        "validate_judge_outputs",
        reads="judge_outputs",
        writes=("judge_outputs_valid", "invalid"),
        does="validate against the contract, upcast to 2.1, attach warnings; dead-letter the rest",
    ),
    AgentSpec(
        "validate_claim_checks",
        reads="checks",
        writes=("checks_valid", "invalid", "human_review"),
        does="validate claim checks; an invalid one is dead-lettered and queued for humans as unclear",
    ),
)


def describe(names: TopicNames) -> str:
    """Kafka-Streams-style text description of the topology."""
    lines = ["Topology"]
    for spec in AGENTS:
        lines.append(f"  Agent: {spec.name}")
        lines.append(f"    reads:  {getattr(names, spec.reads)}")
        if spec.keeps:
            lines.append(f"    keeps:  {', '.join(spec.keeps)}")
        lines.append(f"    writes: {', '.join(getattr(names, r) for r in spec.writes)}")
        if spec.does:
            lines.append(f"    does:   {spec.does}")
    return "\n".join(lines)


def _credentials(settings: Settings) -> Any:
    sec = settings.kafka_security
    if sec.security_protocol == "PLAINTEXT":
        return None
    ssl_context = sec.aiokafka_kwargs().get("ssl_context")
    if sec.sasl_mechanism:
        return faust.SASLCredentials(
            username=sec.sasl_username,
            password=sec.sasl_password,
            mechanism=sec.sasl_mechanism,
            ssl_context=ssl_context,
        )
    return faust.SSLCredentials(ssl_context)


def build_app(settings: Settings) -> faust.App:
    names = TopicNames.with_prefix(settings.topic_prefix)
    app = faust.App(
        settings.app_id,
        broker=settings.broker_url,
        broker_credentials=_credentials(settings),
        store=settings.store,
        datadir=str(settings.data_dir),
        processing_guarantee="at_least_once",
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        web_enabled=settings.web_enabled,
        web_host=settings.web_host,
        web_port=settings.web_port,
        consumer_auto_offset_reset="earliest",
    )
    topics = {
        role: app.topic(
            name,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            partitions=settings.partitions,
        )
        for role, name in names.all().items()
    }

    def agent(spec: AgentSpec, screen: Screen, contract: str) -> None:
        async def process(stream: faust.StreamT) -> None:
            async for event in stream.events():
                msg = event.message
                src = SourceRef(msg.topic, msg.partition, msg.offset, msg.key)
                raw: bytes = event.value if isinstance(event.value, bytes) else bytes(event.value or b"")
                try:
                    out = screen(raw, src, max_bytes=settings.max_payload_bytes)
                except Exception as exc:  # a bug must not stall the partition
                    log.exception("screening %s failed", src.coordinates())
                    err = ContractError([ErrorDetail("INTERNAL_ERROR", (), repr(exc)[:500])])
                    out = [dead_letter(raw, src, contract, err)]
                for record in out:
                    if record.role not in spec.writes:
                        raise RuntimeError(f"{spec.name} may not write {record.role}")
                    await topics[record.role].send(key=record.key, value=record.value, headers=record.headers)

        process.__name__ = spec.name
        app.agent(topics[spec.reads], name=spec.name)(process)

    agent(AGENTS[0], screen_judge_output, "judge_output")
    agent(AGENTS[1], screen_claim_check, "claim_check")
    return app
