"""Network faults (reliability scenario 8): latency, a 12 s stall (longer than the
worker's 10 s session timeout) and connection resets, between worker and broker
and between projector and Postgres, through the suite's own TCP proxy. The worker
and the projector run under a supervisor that restarts them when they exit (their
watchdogs exit non-zero on a stall they cannot heal); the restarts are counted.

The broker gets a second listener advertised at the proxy's port, so only the
worker's connections cross the proxy; producers and the projector reach the
broker directly. The projector reaches Postgres only through its proxy."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.conftest import RELIABILITY
from tests.reliability.netfault import FaultyProxy, broker_with_a_faulty_listener
from tests.reliability.scenario import SOAK, Scenario, split, wait_progress
from tests.support import Supervised

STALL_S = 12.0
WATCHDOG = {"JUDGEFLOW_STALL_SECONDS": "15", "JUDGEFLOW_STALL_RECOVERY_SECONDS": "15"}

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600 * SOAK)]


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
            worker = sc.worker(bootstrap=f"127.0.0.1:{kafka_link.port}", **WATCHDOG)
            projector = sc.projector(database_url=proxied_db, **WATCHDOG)
            with Supervised(worker) as worker_sup, Supervised(projector) as projector_sup:
                for link in links:
                    link.set_latency(0.05)
                sc.faults.append("50 ms per chunk on both links")
                sc.send(parts[0])
                wait_progress(broker.bootstrap, sc.names, len(parts[0]) // 8, None, timeout=180)
                for link in links:
                    link.set_latency(0.0)
                    link.stall()
                sc.send(parts[1])
                # The fault itself: longer than the worker's 10 s session timeout, which once
                # left a worker idle for good; its watchdog must now heal or end it.
                time.sleep(STALL_S)
                for link in links:
                    link.resume()
                sc.faults.append(f"{STALL_S:g} s stall on both links")
                wait_progress(broker.bootstrap, sc.names, (len(parts[0]) + len(parts[1])) // 8, None, timeout=180)
                sc.send(parts[2])
                resets = sum(link.reset_all() for link in links)
                sc.faults.append(f"{resets} connections reset on both links")
                t0 = time.monotonic()
                sc.send(parts[3])
                done = sc.wait_accounted(300)
        restarts = {"worker_restarts": len(worker_sup.restarts), "projector_restarts": len(projector_sup.restarts)}
        RELIABILITY["8 network faults"] = sc.verdict("8 network faults", done - t0, **restarts)
    finally:
        broker.stop()
