"""The alerting kit in deploy/: rules that load, a promtool unit test for every rule, metric names that exist,
and configurations Prometheus and Alertmanager accept. promtool and amtool come from Debian's `prometheus` and
`prometheus-alertmanager` packages (scripts/bootstrap-system.sh installs them)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import REGISTRY

import judgeflow.metrics  # noqa: F401  (registers every metric of both processes)

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "alerts.yml"
RULE_TESTS = DEPLOY / "prometheus" / "alerts_test.yml"
BUILTIN = {"up", "process_resident_memory_bytes"}


def tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is not installed: scripts/bootstrap-system.sh installs it (Debian's prometheus packages)"
    return path


def run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=DEPLOY / "prometheus")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_rules_load() -> None:
    assert "SUCCESS: 12 rules found" in run(tool("promtool"), "check", "rules", str(RULES))


def test_every_rule_has_a_unit_test_and_they_pass() -> None:
    rules = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    tested = {t["alertname"] for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for t in case.get("alert_rule_test", [])}  # fmt: skip
    assert rules == tested, f"rules without a test: {rules - tested}; tests of no rule: {tested - rules}"
    assert "SUCCESS" in run(tool("promtool"), "test", "rules", str(RULE_TESTS))


def _exported() -> set[str]:
    """What the worker and projector (the default registry) and the review desk (a registry of its own) export."""
    from judgeflow.desk.api import DeskMetrics

    names = set()
    for metric in [*REGISTRY.collect(), *DeskMetrics(None).registry.collect()]:  # type: ignore[arg-type]
        names.add(metric.name + ("_total" if metric.type == "counter" else ""))  # a labelled one has no sample yet
        names.update(sample.name for sample in metric.samples)
    return names


def _metrics_in(expressions: list[str]) -> set[str]:
    return {m for e in expressions for m in re.findall(r"\b(judgeflow_[a-z_]+|up|process_[a-z_]+)\b", e)}


def test_the_rules_and_the_dashboard_name_only_metrics_judgeflow_exports() -> None:
    exported = _exported() | BUILTIN
    rules = [r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    panels = json.loads((DEPLOY / "grafana" / "judgeflow.json").read_text())["panels"]
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    for where, names in (("alerts.yml", _metrics_in(rules)), ("judgeflow.json", _metrics_in(exprs))):
        assert names - exported == set(), f"{where} names metrics judgeflow does not export: {names - exported}"
    assert {"judgeflow_live", "judgeflow_unreachable_seconds", "judgeflow_stalled_partitions"} <= _metrics_in(rules)


@pytest.mark.parametrize("config", ["prometheus/prometheus.yml", "alertmanager/alertmanager.yml"])
def test_the_example_configurations_are_accepted(config: str) -> None:
    if config.startswith("prometheus"):
        run(tool("promtool"), "check", "config", str(DEPLOY / config))
    else:
        run(tool("amtool"), "check-config", str(DEPLOY / config))
