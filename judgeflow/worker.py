"""The worker as the application runs it: settings in, the wired Faust app out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import faust

from judgeflow import metrics
from judgeflow.config import Settings
from streams.app import WorkerOptions, build_app
from streams.topics import TopicNames


def _credentials(settings: Settings) -> Any:
    sec = settings.kafka_security
    if sec.security_protocol == "PLAINTEXT":
        return None
    ssl_context = sec.aiokafka_kwargs().get("ssl_context")
    if sec.sasl_mechanism:
        return faust.SASLCredentials(
            username=sec.sasl_username, password=sec.sasl_password,
            mechanism=sec.sasl_mechanism, ssl_context=ssl_context,
        )  # fmt: skip
    return faust.SSLCredentials(ssl_context)


def worker_options(settings: Settings) -> WorkerOptions:
    return WorkerOptions(
        bootstrap_servers=settings.kafka_bootstrap_servers,
        app_id=settings.app_id,
        names=TopicNames.with_prefix(settings.topic_prefix),
        partitions=settings.partitions,
        replication_factor=settings.replication_factor,
        store=settings.store,
        data_dir=str(settings.data_dir),
        broker_credentials=_credentials(settings),
        client_kwargs=settings.kafka_security.aiokafka_kwargs(),
        web_enabled=settings.web_enabled,
        web_host=settings.web_host,
        web_port=settings.web_port,
        session_timeout_seconds=settings.session_timeout_seconds,
        timer_interval_seconds=settings.timer_interval_seconds,
        max_payload_bytes=settings.max_payload_bytes,
        state_retention=timedelta(seconds=settings.state_retention_seconds),
        producer_linger_ms=settings.producer_linger_ms,
    )


def build_worker(settings: Settings) -> faust.App:
    app = build_app(worker_options(settings))

    @app.task
    async def metrics_endpoint() -> None:
        metrics.serve_from_env(settings.web_host)

    return app
