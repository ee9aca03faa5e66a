"""Configuration from environment variables (and an optional TOML file).

Every value is validated up front so a bad setting fails in one clear line,
not a traceback from deep inside a Kafka client.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from streams.drift import DriftOptions, parse_windows

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PRODUCERS = ("librdkafka", "aiokafka")
_HOSTPORT = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


class ConfigError(ValueError):
    """A setting that cannot work; the message names the variable."""


@dataclass(frozen=True)
class KafkaSecurity:
    """TLS / SASL settings passed through to every Kafka client unchanged."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None

    def aiokafka_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.sasl_mechanism:
            kwargs.update(
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=self.sasl_username,
                sasl_plain_password=self.sasl_password,
            )
        if self.security_protocol in ("SSL", "SASL_SSL"):
            import ssl

            ctx = ssl.create_default_context(cafile=self.ssl_cafile)
            if self.ssl_certfile:
                ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
            kwargs["ssl_context"] = ctx
        return kwargs


@dataclass(frozen=True)
class Settings:
    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    database_url: str | None = field(default=None, repr=False)
    topic_prefix: str = ""
    app_id: str = "judgeflow"
    partitions: int = 4
    replication_factor: int = 1
    data_dir: Path = Path(".judgeflow/worker-data")
    store: str = "memory://"
    web_host: str = "127.0.0.1"
    web_port: int = 6066
    web_enabled: bool = False
    timer_interval_seconds: float = 1.0
    max_payload_bytes: int = 1_000_000
    session_timeout_seconds: float = 60.0
    state_retention_seconds: float = 7 * 24 * 3600.0
    producer_linger_ms: float = 20.0
    producer: str = "librdkafka"
    """What the worker's stages publish through: "librdkafka" (confluent-kafka) or "aiokafka" (Faust's)."""
    commit_interval_seconds: float = 2.8  # Faust's broker_commit_interval
    take_events: int = 256  # streams.app.TAKE_EVENTS
    poll_records: int = 2000  # streams.app.POLL_RECORDS
    agent_slice_ms: float = 5.0  # streams.app.SLICE_MS
    malloc_mmap_threshold: int = 128 * 1024  # judgeflow.allocator.MMAP_THRESHOLD
    gc_threshold: int = 20_000  # judgeflow.collector.YOUNG_THRESHOLD
    rocksdb_memory_mb: int = 32  # streams.rocksdb_memory.MEMORY_BUDGET
    stale_after_seconds: float = 300.0
    max_held_events: int = 100_000
    stall_seconds: float = 60.0
    stall_recovery_seconds: float = 60.0
    ready_lag: int = 1000
    outage_exit_seconds: float = 300.0  # streams.outage.DEFAULT_OUTAGE_EXIT_SECONDS
    log_repeat_seconds: float = 60.0  # streams.outage.DEFAULT_LOG_EVERY_SECONDS
    drift_windows: str = "1h,1d"
    drift_flush_seconds: float = 5.0
    drift_grace_seconds: float = 300.0
    drift_baseline_windows: int = 24
    drift_min_baseline_windows: int = 6
    drift_z: float = 5.0
    drift_min_delta: float = 0.05
    drift_min_window_events: int = 30
    review_lease_seconds: float = 300.0  # judgeflow.desk.leases.LEASE_SECONDS
    kafka_security: KafkaSecurity = KafkaSecurity()

    @property
    def broker_url(self) -> str:
        return ",".join(f"kafka://{hp}" for hp in self.kafka_bootstrap_servers.split(","))

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)


ENV = {
    "KAFKA_BOOTSTRAP_SERVERS": "kafka_bootstrap_servers",
    "DATABASE_URL": "database_url",
    "JUDGEFLOW_TOPIC_PREFIX": "topic_prefix",
    "JUDGEFLOW_APP_ID": "app_id",
    "JUDGEFLOW_PARTITIONS": "partitions",
    "JUDGEFLOW_REPLICATION_FACTOR": "replication_factor",
    "JUDGEFLOW_DATA_DIR": "data_dir",
    "JUDGEFLOW_STORE": "store",
    "JUDGEFLOW_WEB_HOST": "web_host",
    "JUDGEFLOW_WEB_PORT": "web_port",
    "JUDGEFLOW_WEB_ENABLED": "web_enabled",
    "JUDGEFLOW_TIMER_INTERVAL": "timer_interval_seconds",
    "JUDGEFLOW_MAX_PAYLOAD_BYTES": "max_payload_bytes",
    "JUDGEFLOW_SESSION_TIMEOUT": "session_timeout_seconds",
    "JUDGEFLOW_STATE_RETENTION": "state_retention_seconds",
    "JUDGEFLOW_PRODUCER_LINGER_MS": "producer_linger_ms",
    "JUDGEFLOW_PRODUCER": "producer",
    "JUDGEFLOW_COMMIT_INTERVAL": "commit_interval_seconds",
    "JUDGEFLOW_TAKE_EVENTS": "take_events",
    "JUDGEFLOW_POLL_RECORDS": "poll_records",
    "JUDGEFLOW_AGENT_SLICE_MS": "agent_slice_ms",
    "JUDGEFLOW_MALLOC_MMAP_THRESHOLD": "malloc_mmap_threshold",
    "JUDGEFLOW_GC_THRESHOLD": "gc_threshold",
    "JUDGEFLOW_ROCKSDB_MEMORY_MB": "rocksdb_memory_mb",
    "JUDGEFLOW_STALE_AFTER": "stale_after_seconds",
    "JUDGEFLOW_MAX_HELD_EVENTS": "max_held_events",
    "JUDGEFLOW_STALL_SECONDS": "stall_seconds",
    "JUDGEFLOW_STALL_RECOVERY_SECONDS": "stall_recovery_seconds",
    "JUDGEFLOW_READY_LAG": "ready_lag",
    "JUDGEFLOW_OUTAGE_EXIT_SECONDS": "outage_exit_seconds",
    "JUDGEFLOW_LOG_REPEAT_SECONDS": "log_repeat_seconds",
    "JUDGEFLOW_DRIFT_WINDOWS": "drift_windows",
    "JUDGEFLOW_DRIFT_FLUSH_SECONDS": "drift_flush_seconds",
    "JUDGEFLOW_DRIFT_GRACE_SECONDS": "drift_grace_seconds",
    "JUDGEFLOW_DRIFT_BASELINE_WINDOWS": "drift_baseline_windows",
    "JUDGEFLOW_DRIFT_MIN_BASELINE_WINDOWS": "drift_min_baseline_windows",
    "JUDGEFLOW_DRIFT_Z": "drift_z",
    "JUDGEFLOW_DRIFT_MIN_DELTA": "drift_min_delta",
    "JUDGEFLOW_DRIFT_MIN_WINDOW_EVENTS": "drift_min_window_events",
    "JUDGEFLOW_REVIEW_LEASE_SECONDS": "review_lease_seconds",
}
SECURITY_ENV = {
    "KAFKA_SECURITY_PROTOCOL": "security_protocol",
    "KAFKA_SASL_MECHANISM": "sasl_mechanism",
    "KAFKA_SASL_USERNAME": "sasl_username",
    "KAFKA_SASL_PASSWORD": "sasl_password",
    "KAFKA_SSL_CAFILE": "ssl_cafile",
    "KAFKA_SSL_CERTFILE": "ssl_certfile",
    "KAFKA_SSL_KEYFILE": "ssl_keyfile",
}


def _coerce(name: str, kind: Any, raw: Any) -> Any:
    try:
        if kind in (int, "int"):
            return int(raw)
        if kind in (float, "float"):
            return float(raw)
        if kind in (bool, "bool"):
            if isinstance(raw, bool):
                return raw
            if str(raw).lower() in ("1", "true", "yes", "on"):
                return True
            if str(raw).lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if kind in (Path, "Path"):
            return Path(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected {getattr(kind, '__name__', kind)}") from None
    return raw if raw is None else str(raw)


SECRET_FILES = {"DATABASE_URL": "DATABASE_URL_FILE", "KAFKA_SASL_PASSWORD": "KAFKA_SASL_PASSWORD_FILE"}
"""Settings that may also come from a file (a container's mounted secret), and the variable naming it."""


def _with_secret_files(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with each `<SECRET>_FILE` read into `<SECRET>` (the file's text without its final newline). Both
    set is an error; an unreadable file is named, its content never shown."""
    out = dict(env)
    for name, file_var in SECRET_FILES.items():
        path = env.get(file_var)
        if not path:
            continue
        if env.get(name):
            raise ConfigError(f"{name} and {file_var} are both set: keep one")
        try:
            out[name] = Path(path).read_text(encoding="utf-8").rstrip("\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{file_var}={path}: {getattr(exc, 'strerror', None) or 'not readable text'}") from None
    return out


def load_settings(env: Mapping[str, str] | None = None, config_file: Path | None = None) -> Settings:
    """Settings from a TOML file (optional; `JUDGEFLOW_CONFIG`) overlaid by the environment (secrets also
    from `<NAME>_FILE`)."""
    env = _with_secret_files(os.environ if env is None else env)
    values: dict[str, Any] = {}
    security: dict[str, Any] = {}
    path = config_file or (Path(env["JUDGEFLOW_CONFIG"]) if env.get("JUDGEFLOW_CONFIG") else None)
    if path is not None:
        try:
            doc = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"config file {path}: {exc}") from None
        known = {f.name for f in fields(Settings)}
        for key, value in doc.items():
            if key == "kafka_security" and isinstance(value, dict):
                security.update(value)
            elif key in known:
                values[key] = value
            else:
                raise ConfigError(f"config file {path}: unknown setting {key!r}")
    for var, attr in ENV.items():
        if env.get(var) not in (None, ""):
            values[attr] = env[var]
    for var, attr in SECURITY_ENV.items():
        if env.get(var) not in (None, ""):
            security[attr] = env[var]
    types = {f.name: f.type for f in fields(Settings)}
    typed = {k: _coerce(k, types[k], v) for k, v in values.items()}
    settings = Settings(**typed, kafka_security=KafkaSecurity(**security))
    validate(settings)
    return settings


def validate(settings: Settings) -> None:
    servers = [s.strip() for s in settings.kafka_bootstrap_servers.split(",")]
    for server in servers:
        match = _HOSTPORT.match(server)
        if not match or not 0 < int(match.group(2)) < 65536:
            raise ConfigError(f"KAFKA_BOOTSTRAP_SERVERS: {server!r} is not host:port (e.g. 127.0.0.1:9092)")
    if settings.database_url is not None and not re.match(r"^postgres(ql)?://", settings.database_url):
        raise ConfigError("DATABASE_URL: expected postgresql://user@host:port/dbname")
    if settings.partitions < 1:
        raise ConfigError("JUDGEFLOW_PARTITIONS: must be at least 1")
    if settings.stall_seconds <= 0:
        raise ConfigError("JUDGEFLOW_STALL_SECONDS: must be positive")
    if settings.stall_recovery_seconds <= 0:
        raise ConfigError("JUDGEFLOW_STALL_RECOVERY_SECONDS: must be positive")
    if settings.outage_exit_seconds < 0:
        raise ConfigError("JUDGEFLOW_OUTAGE_EXIT_SECONDS: must be 0 (never exit) or more")
    if settings.log_repeat_seconds <= 0:
        raise ConfigError("JUDGEFLOW_LOG_REPEAT_SECONDS: must be positive")
    if settings.ready_lag < 0:
        raise ConfigError("JUDGEFLOW_READY_LAG: must be 0 or more")
    if settings.producer not in PRODUCERS:
        raise ConfigError(f"JUDGEFLOW_PRODUCER: one of {', '.join(PRODUCERS)}, not {settings.producer!r}")
    if settings.commit_interval_seconds <= 0:
        raise ConfigError("JUDGEFLOW_COMMIT_INTERVAL: must be positive")
    if settings.poll_records < 0:
        raise ConfigError("JUDGEFLOW_POLL_RECORDS: must be 0 (no limit) or more")
    if settings.gc_threshold < 0:
        raise ConfigError("JUDGEFLOW_GC_THRESHOLD: must be 0 (CPython's default) or more")
    if settings.rocksdb_memory_mb < 1:
        raise ConfigError("JUDGEFLOW_ROCKSDB_MEMORY_MB: must be at least 1")
    try:
        drift_options(settings)
    except ValueError as exc:
        raise ConfigError(f"JUDGEFLOW_DRIFT_*: {exc}") from None
    if settings.kafka_security.security_protocol not in PROTOCOLS:
        raise ConfigError(f"KAFKA_SECURITY_PROTOCOL: one of {', '.join(PROTOCOLS)}")


def drift_options(settings: Settings) -> DriftOptions:
    """The drift stage's windows and detector thresholds (`streams.drift`)."""
    if settings.drift_flush_seconds <= 0 or settings.drift_grace_seconds < 0:
        raise ValueError("flush must be positive and grace 0 or more")
    if settings.drift_z <= 0 or settings.drift_min_delta < 0 or settings.drift_min_window_events < 1:
        raise ValueError("z must be positive, min delta 0 or more, min window events 1 or more")
    return DriftOptions(
        windows=parse_windows(settings.drift_windows),
        flush_seconds=settings.drift_flush_seconds,
        grace_seconds=settings.drift_grace_seconds,
        baseline_windows=settings.drift_baseline_windows,
        min_baseline_windows=settings.drift_min_baseline_windows,
        z_threshold=settings.drift_z,
        min_delta=settings.drift_min_delta,
        min_window_events=settings.drift_min_window_events,
    )
