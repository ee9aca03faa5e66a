"""A judgeflow deployment on the secured test broker: its topics (made by the admin), the ACL plan for its
app id and topic prefix, and each role's environment. Shared by the integration test and scenario 10."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from judgeflow.acl import plan
from streams.topics import TopicNames
from tests.support import REPO, unique_prefix

if TYPE_CHECKING:
    from judgeflow.services.secure_kafka import SecureKafkaBroker


@dataclass
class SecureDeployment:
    broker: SecureKafkaBroker
    prefix: str

    @classmethod
    def create(cls, broker: SecureKafkaBroker) -> SecureDeployment:
        deployment = cls(broker, unique_prefix())
        broker.create_topics(deployment.names)
        broker.apply_acls([g for needs in plan(deployment.app_id, deployment.prefix) for g in needs.grants()])
        return deployment

    @property
    def names(self) -> TopicNames:
        return TopicNames.with_prefix(self.prefix)

    @property
    def app_id(self) -> str:
        return f"judgeflow-{self.prefix.rstrip('.')}"  # what tests.support.Worker sets

    def env(self, user: str, **extra: str) -> dict[str, str]:
        """What a process running as `user` gets: the broker, this deployment, the user's credentials."""
        return {
            "KAFKA_BOOTSTRAP_SERVERS": self.broker.bootstrap,
            "JUDGEFLOW_TOPIC_PREFIX": self.prefix,
            "JUDGEFLOW_APP_ID": self.app_id,
            **self.broker.env(user),
            **extra,
        }

    def cli(self, user: str, *args: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
        """`judgeflow ARGS` as `user`, to completion."""
        return subprocess.run([sys.executable, "-m", "judgeflow.cli", *args], capture_output=True, text=True,
                              env={**os.environ, **self.env(user, **extra)}, cwd=REPO, timeout=timeout)  # fmt: skip

    def read_all(self, topics: Iterable[str]) -> Counter[str]:
        """How many records each topic holds, read by the admin (who may read everything)."""
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def run() -> Counter[str]:
            consumer = AIOKafkaConsumer(bootstrap_servers=self.broker.bootstrap, group_id=None,
                                        **self.broker.security("admin").aiokafka_kwargs())  # fmt: skip
            await consumer.start()
            try:
                cluster = await consumer._client.fetch_all_metadata()
                counts: Counter[str] = Counter()
                for topic in topics:
                    parts = [TopicPartition(topic, p) for p in cluster.partitions_for_topic(topic) or ()]
                    assert parts, f"no partitions for {topic}"
                    ends = await consumer.end_offsets(parts)
                    starts = await consumer.beginning_offsets(parts)
                    counts[topic] = sum(ends[tp] - starts[tp] for tp in parts)
                return counts
            finally:
                await consumer.stop()

        return asyncio.run(run())
