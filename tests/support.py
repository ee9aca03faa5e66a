"""Test helpers that talk to real services: produce, consume until, run a worker, ask its health server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import ConsumerRecord

from streams.topics import TopicNames, ensure_topics

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def postgres_workdir() -> Iterator[Path]:
    """A folder for an embedded Postgres outside pytest's temporary root: as root, Postgres runs as an
    unprivileged user, and any other pytest session of the same user resets that root to mode 0700,
    which cuts a running server off from its data directory ("Permission denied", then shutdown)."""
    with tempfile.TemporaryDirectory(prefix="judgeflow-test-postgres-", ignore_cleanup_errors=True) as path:
        yield Path(path)


def unique_prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}."


def create_topics(bootstrap: str, names: TopicNames, partitions: int = 4, replication: int = 1, **client: Any) -> None:
    asyncio.run(ensure_topics(bootstrap, names, partitions=partitions, replication=replication, **client))


def produce(bootstrap: str, records: Iterable[tuple[str, bytes | None, bytes]], **client: Any) -> None:
    """Publish and wait for every ack; `client`: aiokafka's security settings, on a secured broker."""

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, max_request_size=8_000_000,
                                    **client)  # fmt: skip
        await producer.start()
        try:
            pending = [await producer.send(topic, key=key, value=value) for topic, key, value in records]
            await producer.flush()
            for ack in pending:
                await ack  # raises unless the broker acknowledged it (acks=all)
        finally:
            await producer.stop()

    asyncio.run(run())


def consume_until(
    bootstrap: str,
    topics: list[str],
    done: Callable[[list[ConsumerRecord[Any, Any]]], bool],
    timeout: float = 60.0,
    worker: Worker | None = None,
) -> list[ConsumerRecord[Any, Any]]:
    """Read `topics` from the beginning until `done(records)` or the timeout
    (or until `worker`, when given, has died: then fail with its log)."""

    async def run() -> list[ConsumerRecord[Any, Any]]:
        consumer = AIOKafkaConsumer(
            *topics,
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
        )
        await consumer.start()
        got: list[ConsumerRecord[Any, Any]] = []
        deadline = time.monotonic() + timeout
        try:
            while not done(got):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"condition not met after {timeout}s; got {len(got)} records")
                if worker is not None and not worker.alive():
                    raise RuntimeError(f"worker died:\n{worker.log()[-4000:]}")
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    got.extend(records)
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


class Worker:
    """`judgeflow worker` (or another long-running command) as a real subprocess
    with its own topic prefix."""

    command: tuple[str, ...] = ("worker", "--loglevel", os.environ.get("JUDGEFLOW_TEST_WORKER_LOGLEVEL", "warn"))

    def __init__(self, bootstrap: str, prefix: str, tmp: Path, **env: str):
        self.env = {
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "JUDGEFLOW_TOPIC_PREFIX": prefix,
            "JUDGEFLOW_APP_ID": f"judgeflow-{prefix.rstrip('.')}",
            "JUDGEFLOW_DATA_DIR": str(tmp / "worker-data"),
            **env,
        }
        tmp.mkdir(parents=True, exist_ok=True)
        self.log_path = tmp / f"{self.command[0]}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        cmd = [sys.executable, "-m", "judgeflow.cli", *self.command]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                cmd, env=self.env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        if self.alive():
            assert self.process is not None
            self.process.kill()
            self.process.wait()

    def stop(self, timeout: float = 30.0) -> None:
        if self.alive():
            assert self.process is not None
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> Worker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Supervised:
    """Restarts a process that exited, as a supervisor (`restart: unless-stopped`) would, and counts the restarts.

    A background thread polls the process; `alive()` of the supervised process stays true across restarts."""

    def __init__(self, proc: Worker, poll_seconds: float = 0.2) -> None:
        import threading

        self.proc = proc
        self.restarts: list[int | None] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(poll_seconds,), daemon=True)

    def _watch(self, poll_seconds: float) -> None:
        while not self._stop.wait(poll_seconds):
            process = self.proc.process
            if process is not None and process.poll() is not None:
                self.restarts.append(process.returncode)
                self.proc.start()

    def __enter__(self) -> Supervised:
        self.proc.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.proc.stop()


class ProjectorProcess(Worker):
    """`judgeflow projector` into `schema` of `database_url`."""

    def __init__(self, bootstrap: str, prefix: str, tmp: Path, database_url: str, schema: str, **env: str):
        self.command = ("projector", "--schema", schema)
        super().__init__(bootstrap, prefix, tmp, DATABASE_URL=database_url, **env)


def wait_for(condition: Callable[[], bool], timeout: float = 60.0, what: str = "condition",
             process: Worker | None = None) -> None:  # fmt: skip
    """Poll `condition` until true; fail after `timeout` or when `process` died."""
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None and not process.alive():
            raise RuntimeError(f"{what}: process died:\n{process.log()[-4000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not met after {timeout}s")
        time.sleep(0.2)


def projected_topic_ends(bootstrap: str, names: TopicNames, **client: Any) -> dict[tuple[str, int], int]:
    """End offsets of every topic the projector reads, right now."""
    from projections.projector import PROJECTED_ROLES
    from projections.rebuild import _offsets

    _, end = asyncio.run(_offsets(bootstrap, [getattr(names, r) for r in PROJECTED_ROLES], client))
    return end


def projection_reached(database_url: str, schema: str, ends: dict[tuple[str, int], int]) -> bool:
    """True once the projector's stored offsets in `schema` reach `ends`: every
    record published before `ends` was read is in the read models."""
    import psycopg

    try:
        with psycopg.connect(database_url, autocommit=True, options=f"-c search_path={schema}",
                             connect_timeout=3) as conn:  # fmt: skip
            stored = {(t, p): o for t, p, o in conn.execute(
                "SELECT topic, partition, next_offset FROM projection_offsets").fetchall()}  # fmt: skip
    except psycopg.Error:
        return False
    return all(stored.get(tp, 0) >= end for tp, end in ends.items() if end > 0)


def project_to_end(bootstrap: str, prefix: str, tmp: Path, database_url: str, schema: str, names: TopicNames,
                   timeout: float = 120.0) -> None:  # fmt: skip
    """Run a projector into `schema` until every record published so far is in the read models."""
    with ProjectorProcess(bootstrap, prefix, tmp, database_url, schema) as projector:
        ends = projected_topic_ends(bootstrap, names)
        wait_for(lambda: projection_reached(database_url, schema, ends), timeout, "projector at the end offsets",
                 projector)  # fmt: skip


def http_get(port: int, path: str) -> tuple[int, Any]:
    """Status and body of a GET on a local health server: JSON, or the text of /metrics; (0, {"error": why})
    while nothing listens yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            code, body = resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        code, body = exc.code, exc.read().decode()
    except OSError as exc:
        return 0, {"error": str(exc)}
    return code, (json.loads(body) if path != "/metrics" else body)


def metrics_text(port: int) -> str:
    """The text of /metrics, or "" while it does not answer 200."""
    code, text = http_get(port, "/metrics")
    return str(text) if code == 200 else ""


def metric(text: str, name: str) -> list[float]:
    """Every sample of the metric `name` in a Prometheus text page, whatever its labels."""
    return [float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)]


@contextlib.contextmanager
def judgeflow_server(args: list[str], env: dict[str, str], what: str) -> Iterator[str]:
    """`judgeflow ARGS --port PORT` on a free port with `env` added, until it accepts connections; yields its
    address and stops it afterwards (its output in the failure when it exits first)."""
    import socket

    from judgeflow.services.ports import free_port

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "judgeflow.cli", *args, "--port", str(port)],
                              env={**os.environ, **env}, cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
                assert time.monotonic() < deadline, f"{what} did not start"
                time.sleep(0.1)  # polling the port until the server listens
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)
