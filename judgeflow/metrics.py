"""Prometheus metrics of the worker and the projector.

Exposed on 127.0.0.1:`JUDGEFLOW_METRICS_PORT` when that is set (each process
its own port), in the standard text format `prometheus_client` serves.
"""

from __future__ import annotations

import logging
import os

from prometheus_client import Counter, Gauge, start_http_server

log = logging.getLogger("judgeflow.metrics")

EVENTS = Counter("judgeflow_events_total", "Records processed, by agent", ["agent"])
INVALID = Counter("judgeflow_invalid_total", "Records dead-lettered, by error code", ["code"])
ROUTES = Counter("judgeflow_routes_total", "Routing decisions, by route and subject", ["route", "subject"])
CONSUMER_LAG = Gauge("judgeflow_consumer_lag", "Worker consumer lag (records behind), by partition",
                     ["topic", "partition"])  # fmt: skip
PROJECTION_LAG = Gauge("judgeflow_projection_lag", "Projector lag (records behind), by partition",
                       ["topic", "partition"])  # fmt: skip
PROJECTED_ROWS = Counter("judgeflow_projected_rows_total", "Rows written by the projector")
PROJECTED_BATCHES = Counter("judgeflow_projected_batches_total", "Batches committed by the projector")


def serve_from_env(default_host: str = "127.0.0.1") -> int | None:
    """Start the metrics endpoint if JUDGEFLOW_METRICS_PORT is set; return the port."""
    port = os.environ.get("JUDGEFLOW_METRICS_PORT")
    if not port:
        return None
    start_http_server(int(port), addr=os.environ.get("JUDGEFLOW_METRICS_HOST", default_host))
    log.info("metrics on http://%s:%s/metrics", default_host, port)
    return int(port)
