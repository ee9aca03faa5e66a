"""Prometheus metrics of the worker and the projector.

Exposed on 127.0.0.1:`JUDGEFLOW_METRICS_PORT` when that is set (each process
its own port), in the standard text format `prometheus_client` serves: by
`judgeflow.health` (beside /healthz and /readyz, from the event loop) or, for
processes not yet moved to it, by `serve_from_env` (prometheus_client's thread).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from prometheus_client import Counter, Gauge, start_http_server

from judgeflow.health import Status
from streams.outage import Reachability
from streams.watchdog import Action, WatchdogState

log = logging.getLogger("judgeflow.metrics")

# The worker's own metrics live beside it, in the lower layer.
from streams.metrics import (  # noqa: F401, E402
    CONSUMER_LAG,
    EVENTS,
    INVALID,
    LAST_PROGRESS_SECONDS,
    ROUTES,
    STALLED_PARTITIONS,
    WATCHDOG_RECOVERIES,
)

PROJECTION_LAG = Gauge(
    "judgeflow_projection_lag", "Projector lag (records behind), by partition", ["topic", "partition"]
)
PROJECTED_ROWS = Counter("judgeflow_projected_rows_total", "Rows written by the projector")
PROJECTED_BATCHES = Counter("judgeflow_projected_batches_total", "Batches committed by the projector")
PROJECTION_REJECTS = Counter(
    "judgeflow_projection_rejects_total",
    "Records the projector set aside in projection_rejects (code PROJECTION_REFUSED: Postgres refused its rows; "
    "PROJECTION_UNDECODABLE: it could not be made into rows)",
    ["topic", "code"],
)


LIVE = Gauge("judgeflow_live", "1 while the process is live (/healthz answers 200), else 0; read at scrape time")
READY = Gauge("judgeflow_ready", "1 while the process is ready (/readyz answers 200), else 0; read at scrape time")
UNREACHABLE_SECONDS = Gauge(
    "judgeflow_unreachable_seconds",
    "How long the process has not reached a dependency (broker, Postgres): 0 while it answers",
    ["dependency"],
)


def bind_health(status: Callable[[], Status], outage: Reachability, dependencies: tuple[str, ...]) -> None:
    """Health as gauges, computed when Prometheus scrapes, from the same verdict /healthz and /readyz give: alert
    rules see what an orchestrator's probe sees (deploy/prometheus/alerts.yml)."""

    def verdict(ready: bool) -> float:
        try:
            state = status()
            return float(state.ready if ready else state.live)
        except Exception:  # a broken provider is unhealthy, as /healthz says
            return 0.0

    LIVE.set_function(lambda: verdict(False))
    READY.set_function(lambda: verdict(True))

    def unreachable_for(dependency: str) -> Callable[[], float]:
        return lambda: outage.down().get(dependency, 0.0)

    for dependency in dependencies:
        UNREACHABLE_SECONDS.labels(dependency).set_function(unreachable_for(dependency))


def export_watchdog(state: WatchdogState) -> None:
    """Publish one watchdog verdict (worker or projector)."""
    STALLED_PARTITIONS.set(state.stalled_count)
    LAST_PROGRESS_SECONDS.set(state.last_progress_seconds)
    if state.action is Action.RECOVER:
        WATCHDOG_RECOVERIES.inc()


class ProjectorMetrics:
    """The projector's `ProjectorObserver`: its reports as Prometheus metrics."""

    def batch_committed(self, rows: int) -> None:
        PROJECTED_ROWS.inc(rows)
        PROJECTED_BATCHES.inc()

    def partition_lag(self, topic: str, partition: int, lag: int) -> None:
        PROJECTION_LAG.labels(topic, str(partition)).set(lag)

    def watchdog(self, state: WatchdogState) -> None:
        export_watchdog(state)

    def record_rejected(self, topic: str, code: str) -> None:
        PROJECTION_REJECTS.labels(topic, code).inc()


def serve_from_env(default_host: str = "127.0.0.1") -> int | None:
    """Start the metrics endpoint if JUDGEFLOW_METRICS_PORT is set; return the port."""
    port = os.environ.get("JUDGEFLOW_METRICS_PORT")
    if not port:
        return None
    start_http_server(int(port), addr=os.environ.get("JUDGEFLOW_METRICS_HOST", default_host))
    log.info("metrics on http://%s:%s/metrics", default_host, port)
    return int(port)
