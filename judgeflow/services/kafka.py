"""Apache Kafka (KRaft, combined broker+controller) from Maven Central jars.

No Docker and no Apache download site are needed: Maven resolves the broker
and its runtime classpath from `kafka-pom.xml` once into a cache folder, and
each broker runs as `java -cp "LIB/*" kafka.Kafka node.properties` on a fresh,
formatted log dir with free loopback ports. Ready means a metadata request
(describe-cluster) succeeds, never a sleep.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from judgeflow.services.ports import free_port
from judgeflow.services.process import ServiceProcess, write_private

POM = Path(__file__).with_name("kafka-pom.xml")
LOG4J2 = """\
status = error
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka.server.KafkaRaftServer
logger.kafka.level = INFO
"""


JIT = "-XX:TieredStopAtLevel=1"
"""The broker's JVM compiles with C1 only. A local broker shares its few cores with every judgeflow process,
the load and Postgres, and within its first minutes the optimizing C2 compiler took about half a core: in a
half-load pipeline pass 4.0-4.2 s of the broker's 8.1 s of CPU were its compiler threads, while its network
and request threads spent the same 3.2-3.5 s with C1 alone (bench/PROFILE.md). A production cluster runs its
own JVMs; this one is for `judgeflow services`, the demo, the tests and the bench."""


def cache_root() -> Path:
    return Path(os.environ.get("JUDGEFLOW_CACHE_DIR", Path.home() / ".cache" / "judgeflow"))


def ensure_kafka_jars() -> Path:
    """The broker's runtime classpath folder, resolved with Maven on first use.

    Cached by a hash of the pom, so a version bump resolves anew; a file lock
    keeps parallel test processes from resolving twice."""
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    lib = cache_root() / f"kafka-{digest}" / "lib"
    if (lib / ".complete").exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    with open(lib.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (lib / ".complete").exists():
            return lib
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError("Maven (mvn) is needed once to fetch the Kafka jars: apt-get install maven")
        staging = Path(tempfile.mkdtemp(dir=lib.parent, prefix="staging-"))
        subprocess.run(
            [
                mvn,
                "-B",
                "-q",
                "-Dstyle.color=never",
                "-f",
                str(POM),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}",
                "-DincludeScope=runtime",
            ],
            check=True,
        )
        (staging / ".complete").write_text(digest)
        if lib.exists():
            shutil.rmtree(lib)
        staging.rename(lib)
    return lib


def new_cluster_id() -> str:
    """What `StorageTool random-uuid` prints (base64url of 16 random bytes),
    without paying for a JVM start."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    exe = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not exe:
        raise RuntimeError("a Java runtime (17+) is needed to run Kafka: apt-get install openjdk-17-jre")
    return exe


class KafkaBroker(ServiceProcess):
    """One KRaft node acting as broker and controller.

    `properties` adds or overrides node settings (e.g. message.max.bytes)."""

    def __init__(
        self,
        workdir: Path,
        *,
        port: int | None = None,
        controller_port: int | None = None,
        properties: dict[str, str] | None = None,
        heap: str = "512m",
        node_id: int = 1,
        voters: str | None = None,
        cluster_id: str | None = None,
    ):
        self.node_id = node_id
        self.voters = voters  # "1@host:port,2@host:port,...": a static quorum (KafkaCluster)
        self.cluster_id = cluster_id
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        self.properties = properties or {}
        self.heap = heap
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / "kafka.log"
        self.startup_seconds: float | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _node_properties(self) -> str:
        quorum = (
            {"controller.quorum.voters": self.voters}
            if self.voters
            else {"controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}"}
        )
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            **quorum,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "4",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
        }
        props.update(self.properties)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def start(self, timeout: float = 90.0) -> KafkaBroker:
        t0 = time.monotonic()
        self.launch()
        self._wait_ready(t0 + timeout)
        self.startup_seconds = time.monotonic() - t0
        return self

    def launch(self) -> None:
        """Format the log dir if new and start the JVM, without waiting for it."""
        lib = ensure_kafka_jars()
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "node.properties"
        config.write_text(self._node_properties())
        (self.workdir / "log4j2.properties").write_text(LOG4J2)
        classpath = f"{lib}/*"
        log4j = f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}"
        if not (self.workdir / "data" / "meta.properties").exists():
            cluster_id = self.cluster_id or new_cluster_id()
            standalone = [] if self.voters else ["--standalone"]
            args = [log4j, "-cp", classpath, "kafka.tools.StorageTool", "format", *standalone]
            args += ["-t", cluster_id, "-c", str(config), *self._format_extra()]
            # In a file only the owner reads, not on the command line: the secured broker's
            # SCRAM passwords are among these arguments (java expands @argfiles itself).
            argfile = write_private(self.workdir / "format.args", "\n".join(_quoted(a) for a in args))
            try:
                subprocess.run([java(), f"@{argfile}"], check=True, capture_output=True, text=True)
            finally:
                argfile.unlink()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    java(),
                    f"-Xmx{self.heap}",
                    "-XX:+UseSerialGC",
                    JIT,
                    log4j,
                    "-cp",
                    classpath,
                    "kafka.Kafka",
                    str(config),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _format_extra(self) -> list[str]:
        """More arguments for `StorageTool format` (the secured broker's SCRAM users)."""
        return []

    def answers(self) -> bool:
        return metadata_ready(self.bootstrap)

    def _wait_ready(self, deadline: float) -> None:
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.process.returncode}:\n{self.log_tail()}")
            if self.answers():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka not ready at {self.bootstrap}:\n{self.log_tail()}")
            time.sleep(0.2)

    def restart(self, timeout: float = 90.0) -> None:
        self.stop()
        self.start(timeout)


class KafkaCluster:
    """Three (or `size`) KRaft nodes, each broker and controller, with a static
    quorum: replication 3 and min.insync.replicas 2 by default, so one node
    can die without refusing acks=all writes."""

    def __init__(self, workdir: Path, size: int = 3, properties: dict[str, str] | None = None):
        cluster_id = new_cluster_id()
        controllers = [free_port() for _ in range(size)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{port}" for i, port in enumerate(controllers))
        internal = str(min(3, size))
        props = {
            "default.replication.factor": internal,
            "min.insync.replicas": str(max(1, min(3, size) - 1)),
            "offsets.topic.replication.factor": internal,
            "transaction.state.log.replication.factor": internal,
            "transaction.state.log.min.isr": str(max(1, min(3, size) - 1)),
            "share.coordinator.state.topic.replication.factor": internal,
            **(properties or {}),
        }
        self.nodes = [
            KafkaBroker(
                Path(workdir) / f"node{i + 1}",
                controller_port=port,
                properties=props,
                node_id=i + 1,
                voters=voters,
                cluster_id=cluster_id,
                heap="384m",
            )
            for i, port in enumerate(controllers)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def start(self, timeout: float = 120.0) -> KafkaCluster:
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            node.launch()  # a quorum needs a majority up, so start all before waiting
        for node in self.nodes:
            node._wait_ready(deadline)
        return self

    def node(self, node_id: int) -> KafkaBroker:
        return next(n for n in self.nodes if n.node_id == node_id)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def _quoted(arg: str) -> str:
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def metadata_ready(bootstrap: str, timeout: float = 5.0, **client: Any) -> bool:
    """True when the broker answers a describe-cluster request with a controller
    (`client`: aiokafka's security settings, for the secured broker)."""

    async def probe() -> bool:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000), **client)
        try:
            await asyncio.wait_for(admin.start(), timeout)
            info = await asyncio.wait_for(admin.describe_cluster(), timeout)
            return bool(info.get("brokers")) and info.get("controller_id", -1) != -1
        except Exception:
            return False
        finally:
            with contextlib.suppress(Exception):
                await admin.close()

    quiet = logging.getLogger("aiokafka")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # a broker still booting is expected here
    try:
        return asyncio.run(probe())
    finally:
        quiet.setLevel(level)
