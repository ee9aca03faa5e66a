"""Producer client for judge producers: validate locally, key, publish.

    async with JudgeflowProducer("127.0.0.1:9092") as producer:
        await producer.send_judge_output(doc)        # dict, str, bytes or a JudgeOutput

    with SyncProducer("127.0.0.1:9092") as producer:  # the same, for non-async code
        producer.send_claim_check(check)

Every event is validated with the same parser the worker uses before it
leaves the process (a `ContractError` is raised, nothing is sent), keyed the
way the topology expects (evaluation_run_id, claim_id, rubric_version_id),
tagged with headers, and published with idempotence on (acks=all), so a
retried send never duplicates a record.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from pydantic import BaseModel

from schemas import (
    MAX_PAYLOAD_BYTES,
    RunReview,
    parse_evaluation_run,
    parse_review,
    parse_rubric,
    validate_claim_check,
    validate_judge_output,
)
from streams.topics import TopicNames

T = TypeVar("T")
Event = bytes | str | dict[str, Any] | BaseModel


def _raw(event: Event) -> bytes:
    if isinstance(event, BaseModel):
        return event.model_dump_json().encode()
    if isinstance(event, dict):
        return json.dumps(event).encode()
    return event.encode() if isinstance(event, str) else event


def encode_for(role: str, event: Event) -> tuple[bytes, bytes]:
    """(key, value) for a topic role after local validation; raises ContractError."""
    raw = _raw(event)
    if role == "judge_outputs":
        out = validate_judge_output(raw).event
        return out.evaluation_run_id.encode(), raw
    if role == "checks":
        return validate_claim_check(raw).event.claim_id.encode(), raw
    if role == "runs":
        return parse_evaluation_run(raw).evaluation_run_id.encode(), raw
    if role == "rubrics":
        return parse_rubric(raw).rubric_version_id.encode(), raw
    if role == "reviews":
        review = parse_review(raw)
        key = review.evaluation_run_id if isinstance(review, RunReview) else review.claim_id
        return key.encode(), raw
    raise ValueError(f"{role!r} is not a topic judge producers write")


class JudgeflowProducer:
    def __init__(self, bootstrap_servers: str, *, topic_prefix: str = "", **client: Any):
        from aiokafka import AIOKafkaProducer

        self.names = TopicNames.with_prefix(topic_prefix)
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap_servers,
            enable_idempotence=True,
            acks="all",
            max_request_size=MAX_PAYLOAD_BYTES + 64 * 1024,
            **client,
        )

    async def __aenter__(self) -> JudgeflowProducer:
        await self._producer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._producer.stop()

    async def send(self, role: str, event: Event) -> Any:
        key, value = encode_for(role, event)
        headers = [("judgeflow-producer", b"judgeflow-python"), ("content-type", b"application/json")]
        return await self._producer.send_and_wait(getattr(self.names, role), key=key, value=value, headers=headers)

    async def send_judge_output(self, event: Event) -> Any:
        return await self.send("judge_outputs", event)

    async def send_claim_check(self, event: Event) -> Any:
        return await self.send("checks", event)

    async def send_run(self, event: Event) -> Any:
        return await self.send("runs", event)

    async def send_rubric(self, event: Event) -> Any:
        return await self.send("rubrics", event)

    async def send_review(self, event: Event) -> Any:
        return await self.send("reviews", event)


class SyncProducer:
    """`JudgeflowProducer` on a private event loop thread, for synchronous code."""

    def __init__(self, bootstrap_servers: str, **kwargs: Any):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._async = self._call(self._make(bootstrap_servers, kwargs))

    async def _make(self, bootstrap: str, kwargs: dict[str, Any]) -> JudgeflowProducer:
        return await JudgeflowProducer(bootstrap, **kwargs).__aenter__()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __enter__(self) -> SyncProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._call(self._async.__aexit__(None, None, None))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _sender(self, name: str) -> Callable[[Event], Any]:
        return lambda event: self._call(getattr(self._async, name)(event))

    def send_judge_output(self, event: Event) -> Any:
        return self._sender("send_judge_output")(event)

    def send_claim_check(self, event: Event) -> Any:
        return self._sender("send_claim_check")(event)

    def send_run(self, event: Event) -> Any:
        return self._sender("send_run")(event)

    def send_rubric(self, event: Event) -> Any:
        return self._sender("send_rubric")(event)

    def send_review(self, event: Event) -> Any:
        return self._sender("send_review")(event)
