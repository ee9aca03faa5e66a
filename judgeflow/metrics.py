"""Prometheus metrics of the worker and the projector.

Exposed on 127.0.0.1:`JUDGEFLOW_METRICS_PORT` when that is set (each process
its own port), in the standard text format `prometheus_client` serves.
"""

from __future__ import annotations

import logging
import os

from prometheus_client import Counter, Gauge, start_http_server

log = logging.getLogger("judgeflow.metrics")

# The worker's own metrics live beside it, in the lower layer.
from streams.metrics import CONSUMER_LAG, EVENTS, INVALID, ROUTES  # noqa: F401, E402

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
