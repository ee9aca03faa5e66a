"""The worker as the application runs it: settings in, the wired Faust app out."""

from __future__ import annotations

import logging
import os
import time
from datetime import timedelta
from typing import Any

import faust

from judgeflow.config import Settings, drift_options
from judgeflow.health import HealthServer, serve_health_from_env
from judgeflow.metrics import bind_health
from judgeflow.quiet_logs import quiet_repeats
from streams.app import WorkerOptions, build_app
from streams.outage import BROKER, Reachability
from streams.topics import TopicNames
from streams.watchdog import WatchdogState


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


def producer_config(settings: Settings) -> dict[str, Any] | None:
    """librdkafka's settings for the stages' producer (same servers and security as every client), or None
    when `JUDGEFLOW_PRODUCER=aiokafka`."""
    if settings.producer != "librdkafka":
        return None
    from judgeflow.kafka_access import librdkafka_config

    config = librdkafka_config(settings.kafka_bootstrap_servers, settings.kafka_security)
    # Warnings and errors only, under a logger outside "judgeflow", so the outage filter (judgeflow.quiet_logs)
    # lets one line of each kind through per interval while the broker is away.
    config.update({"logger": logging.getLogger("librdkafka"), "log_level": 4})
    return config


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
        producer_config=producer_config(settings),
        commit_interval_seconds=settings.commit_interval_seconds,
        take_events=settings.take_events,
        poll_records=settings.poll_records,
        agent_slice_ms=settings.agent_slice_ms,
        rocksdb_memory_bytes=settings.rocksdb_memory_mb << 20,
        stale_after=timedelta(seconds=settings.stale_after_seconds),
        max_held_events=settings.max_held_events,
        stall_seconds=settings.stall_seconds,
        stall_recovery_seconds=settings.stall_recovery_seconds,
        ready_lag=settings.ready_lag,
        outage=Reachability(
            stall_seconds=settings.stall_seconds,
            exit_seconds=settings.outage_exit_seconds,
            log_every=settings.log_repeat_seconds,
            log=logging.getLogger("judgeflow.worker"),
        ),
        on_outage_exit=_exit_for_outage,
        on_stall_exit=_exit_for_supervisor,
        drift=drift_options(settings),
    )


def _exit_for_supervisor(state: WatchdogState) -> None:
    """A stall the worker could not heal: end now with exit code 3 (a clean shutdown could wait forever on the
    very thing that stalled). Uncommitted input is read again after the restart; its ids dedupe it."""
    logging.getLogger("judgeflow.worker").critical("exiting: %s", state.reason)
    logging.shutdown()
    os._exit(3)


OUTAGE_EXIT_CODE = 4
"""The exit status after an outage longer than JUDGEFLOW_OUTAGE_EXIT_SECONDS (3: a stall it could not heal)."""


def _exit_for_outage(reason: str) -> None:
    """An outage past its window: end now with exit code 4, for the supervisor to restart the process (and an
    operator to see the restarts). Nothing is lost: uncommitted input is read again, its ids dedupe it."""
    logging.getLogger("judgeflow.worker").critical("exiting: %s", reason)
    logging.shutdown()
    os._exit(OUTAGE_EXIT_CODE)


def build_worker(settings: Settings) -> faust.App:
    app = build_app(worker_options(settings))
    watchdog = app.watchdog
    check_seconds = min(5.0, settings.stall_seconds / 4)
    servers: list[HealthServer] = []

    outage = app.outage

    def status() -> WatchdogState:
        return outage.judge(watchdog.state.stale(time.monotonic(), max(3 * check_seconds, 10.0)))

    @app.task
    async def health_endpoint() -> None:
        """/healthz, /readyz and /metrics from the worker's own event loop (JUDGEFLOW_METRICS_PORT); and, Faust's
        logging being set up by now, the Kafka clients' repeating lines held to one per interval."""
        quiet_repeats(settings.log_repeat_seconds)
        bind_health(status, outage, (BROKER,))
        server = await serve_health_from_env(status, settings.web_host)
        if server is not None:
            servers.append(server)

    return app
