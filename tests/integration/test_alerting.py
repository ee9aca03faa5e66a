"""The alert rules in a real Prometheus, delivered by a real Alertmanager (Debian's packages).

A worker reaches its broker through the suite's TCP proxy. Prometheus scrapes the worker every second and
evaluates deploy/prometheus/alerts.yml as shipped; Alertmanager sends to a webhook receiver of the test's own.
The proxy stalls the broker link (reliability scenario 8's fault, for good this time): JudgeflowNotLive must go
to firing and reach the webhook; the link heals: the alert must resolve and the webhook hear that too."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from judgeflow import workload
from judgeflow.services.ports import free_port
from streams.topics import TopicNames
from tests.conftest import MEASURED
from tests.reliability.netfault import FaultyProxy, broker_with_a_faulty_listener
from tests.support import Worker, create_topics, produce, unique_prefix, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


class Webhook:
    """An HTTP receiver for Alertmanager's webhook: every notification it was sent, in order."""

    def __init__(self) -> None:
        received: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.received = received
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def statuses(self, alertname: str) -> list[str]:
        return [a["status"] for n in self.received for a in n["alerts"] if a["labels"]["alertname"] == alertname]


class Service:
    """A Prometheus or an Alertmanager process with its own data folder and port."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


@pytest.fixture
def alerting(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """Alertmanager to a webhook, and the Prometheus configuration written for a worker on `worker_port`."""
    for name in ("prometheus", "prometheus-alertmanager"):
        assert shutil.which(name), f"{name} is not installed (scripts/bootstrap-system.sh installs it)"
    hook = Webhook()
    am_port, prom_port, worker_port = free_port(), free_port(), free_port()
    hook_url = f"http://127.0.0.1:{hook.port}/"
    route = {"receiver": "hook", "group_by": ["alertname"], "group_wait": "1s", "group_interval": "1s",
             "repeat_interval": "1h"}  # fmt: skip
    receivers = [{"name": "hook", "webhook_configs": [{"url": hook_url, "send_resolved": True}]}]
    (tmp_path / "am.yml").write_text(json.dumps({"route": route, "receivers": receivers}))  # JSON is YAML
    shutil.copy(DEPLOY / "prometheus" / "alerts.yml", tmp_path / "alerts.yml")  # the rules as shipped
    (tmp_path / "prometheus.yml").write_text(json.dumps({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["alerts.yml"],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
        "scrape_configs": [{"job_name": "judgeflow-worker",
                            "static_configs": [{"targets": [f"127.0.0.1:{worker_port}"]}]}],
    }))  # fmt: skip
    am = Service(["prometheus-alertmanager", f"--config.file={tmp_path / 'am.yml'}",
                  f"--storage.path={tmp_path / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
                  "--cluster.listen-address="], tmp_path / "alertmanager.log")  # fmt: skip
    prom = Service(["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'prom-data'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
                   tmp_path / "prometheus.log")  # fmt: skip
    try:
        yield {"hook": hook, "prometheus": f"http://127.0.0.1:{prom_port}", "worker_port": worker_port}
    finally:
        for service in (prom, am):
            service.stop()
        hook.server.shutdown()


def firing(prometheus: str, alertname: str) -> bool:
    alerts = get_json(f"{prometheus}/api/v1/alerts")["data"]["alerts"]
    return any(a["labels"]["alertname"] == alertname and a["state"] == "firing" for a in alerts)


def test_a_stalled_broker_link_fires_not_live_at_the_webhook_and_resolves_when_it_heals(
    alerting: dict[str, Any], tmp_path: Path
) -> None:
    prometheus, hook = alerting["prometheus"], alerting["hook"]
    broker, faulty_port, proxied_port = broker_with_a_faulty_listener(tmp_path / "kafka")
    broker.start()
    try:
        prefix = unique_prefix()
        names = TopicNames.with_prefix(prefix)
        create_topics(broker.bootstrap, names)
        with FaultyProxy(faulty_port, port=proxied_port) as link:
            env = {"JUDGEFLOW_METRICS_PORT": str(alerting["worker_port"]), "JUDGEFLOW_STALL_SECONDS": "4",
                   "JUDGEFLOW_STALL_RECOVERY_SECONDS": "4", "JUDGEFLOW_OUTAGE_EXIT_SECONDS": "0"}  # fmt: skip
            with Worker(f"127.0.0.1:{link.port}", prefix, tmp_path / "w", **env) as worker:
                rng = random.Random(8)
                produce(broker.bootstrap, [(names.checks, f"a{i}".encode(),
                                            json.dumps(workload.claim_check(rng, f"a{i}")).encode())
                                           for i in range(50)])  # fmt: skip

                def live_in_prometheus() -> bool:
                    result = get_json(f"{prometheus}/api/v1/query?query=judgeflow_live")["data"]["result"]
                    return bool(result) and result[0]["value"][1] == "1"

                wait_for(live_in_prometheus, 120, "Prometheus scraping a live worker", worker)
                link.stall()
                wait_for(lambda: firing(prometheus, "JudgeflowNotLive"), 150, "JudgeflowNotLive firing", worker)
                wait_for(lambda: "firing" in hook.statuses("JudgeflowNotLive"), 30, "the webhook told it fires")
                link.resume()
                wait_for(lambda: not firing(prometheus, "JudgeflowNotLive"), 120, "JudgeflowNotLive resolved", worker)
                wait_for(lambda: "resolved" in hook.statuses("JudgeflowNotLive"), 30, "the webhook told it resolved")
                assert worker.alive()
        MEASURED["alerting"] = f"webhook heard JudgeflowNotLive: {hook.statuses('JudgeflowNotLive')}"
    finally:
        broker.stop()
