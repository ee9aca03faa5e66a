"""Network faults (reliability scenario 8): latency, a 6 s stall and connection
resets, between worker and broker and between projector and Postgres, through
the suite's own TCP proxy.

The broker gets a second listener advertised at the proxy's port, so only the
worker's connections cross the proxy; producers and the projector reach the
broker directly. The projector reaches Postgres only through its proxy."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from judgeflow.services.kafka import KafkaBroker
from judgeflow.services.ports import free_port
from tests.conftest import RELIABILITY
from tests.reliability.netfault import FaultyProxy
from tests.reliability.scenario import SOAK, Scenario, split, wait_progress

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600 * SOAK)]


def broker_with_a_faulty_listener(workdir: Path) -> tuple[KafkaBroker, int, int]:
    """A broker whose FAULTY listener is advertised at a proxy port; returns it,
    that listener's port and the port the proxy must listen on."""
    port, controller, faulty, proxied = free_port(), free_port(), free_port(), free_port()
    broker = KafkaBroker(workdir, port=port, controller_port=controller, properties={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},FAULTY://127.0.0.1:{faulty}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},"
                                f"FAULTY://127.0.0.1:{proxied}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,FAULTY:PLAINTEXT",
    })  # fmt: skip
    return broker, faulty, proxied


def test_latency_stall_and_resets_on_both_links(database_url: str, tmp_path: Path) -> None:
    broker, faulty_port, proxied_port = broker_with_a_faulty_listener(tmp_path / "kafka")
    broker.start()
    db = urlsplit(database_url)
    try:
        with (
            FaultyProxy(faulty_port, port=proxied_port) as kafka_link,
            FaultyProxy(db.port or 5432, upstream_host=db.hostname or "127.0.0.1") as pg_link,
        ):
            proxied_db = urlunsplit(db._replace(netloc=db.netloc.replace(f":{db.port}", f":{pg_link.port}")))
            sc = Scenario(broker.bootstrap, database_url, tmp_path, seed=808)
            parts = split(sc.workload(), 4)
            links = (kafka_link, pg_link)
            with sc.worker(bootstrap=f"127.0.0.1:{kafka_link.port}") as worker, \
                    sc.projector(database_url=proxied_db) as projector:  # fmt: skip
                for link in links:
                    link.set_latency(0.05)
                sc.faults.append("50 ms per chunk on both links")
                sc.send(parts[0])
                wait_progress(broker.bootstrap, sc.names, len(parts[0]) // 8, worker, timeout=180)
                for link in links:
                    link.set_latency(0.0)
                    link.stall()
                sc.send(parts[1])
                # The fault itself, shorter than the worker's 10 s session timeout: a
                # 12 s stall followed by resets left the worker idle once (README).
                time.sleep(6)
                for link in links:
                    link.resume()
                sc.faults.append("6 s stall on both links")
                wait_progress(broker.bootstrap, sc.names, (len(parts[0]) + len(parts[1])) // 8, worker, timeout=180)
                sc.send(parts[2])
                resets = sum(link.reset_all() for link in links)
                sc.faults.append(f"{resets} connections reset on both links")
                t0 = time.monotonic()
                sc.send(parts[3])
                done = sc.wait_accounted(300, worker, projector)
        RELIABILITY["8 network faults"] = sc.verdict("8 network faults", done - t0)
    finally:
        broker.stop()
