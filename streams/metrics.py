"""The worker's Prometheus metrics (the default registry; the application serves them)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

EVENTS = Counter("judgeflow_events_total", "Records processed, by agent", ["agent"])
INVALID = Counter("judgeflow_invalid_total", "Records dead-lettered, by error code", ["code"])
ROUTES = Counter("judgeflow_routes_total", "Routing decisions, by route and subject", ["route", "subject"])
REKEYED = Counter("judgeflow_rekeyed_total", "Inputs whose key was not their id, re-keyed through a topic", ["topic"])
LATE = Counter(
    "judgeflow_late_events_total", "Inputs for a run or claim whose state had been deleted or was final", ["stage"]
)
EXPIRED = Counter("judgeflow_state_expired_total", "State entries deleted after retention", ["table"])
STATE_KEYS = Gauge("judgeflow_state_keys", "Keys held in a state table (this worker's partitions)", ["table"])
CONSUMER_LAG = Gauge(
    "judgeflow_consumer_lag", "Worker consumer lag (records behind), by partition", ["topic", "partition"]
)
STALLED_PARTITIONS = Gauge(
    "judgeflow_stalled_partitions",
    "Partitions with lag and no committed progress for the stall setting "
    "(all of the topics' partitions when none is assigned)",
)
LAST_PROGRESS_SECONDS = Gauge(
    "judgeflow_last_progress_seconds",
    "Seconds the longest-waiting partition with lag has gone without committed progress (0 when caught up)",
)
WATCHDOG_RECOVERIES = Counter(
    "judgeflow_watchdog_recoveries_total", "Consumer rebuilds the watchdog started after a stall"
)
HELD_EVENTS = Gauge(
    "judgeflow_held_events",
    "Events held waiting for their rubric or run (bounded by "
    "JUDGEFLOW_MAX_HELD_EVENTS; past it they are dead-lettered)",
)
ROCKSDB_MEMORY = Gauge(
    "judgeflow_rocksdb_memory_bytes",
    "Memory of the worker's RocksDB databases together: "
    "memtables, and the shared block cache with the memtables' charge (rocksdb:// only)",
    ["part"],
)
STALE_ALERTS = Counter("judgeflow_stale_alerts_total", "Stale-work alerts raised, by kind", ["kind"])
JUDGE_ALERTS = Counter(
    "judgeflow_judge_alerts_total", "Judge drift alerts raised, by judge and statistic", ["judge", "statistic"]
)
