"""`judgeflow bench`: every measurement in one invocation, on one broker and one database.

Ratios (judgeflow / peers, every engine / the librdkafka ceiling, batched / per-row, 2 workers / 1 worker)
are taken within the same run because these machines are noisy. The claim step of every engine is measured
the same way, on a backlog (`bench.backlog`).
Prints one table and writes `bench/results/<date>.json`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench import backlog, contract, harness, pipeline, projection, projector, stateless

RESULTS_DIR = Path(__file__).resolve().parent / "results"
HALF_LOAD_SECONDS_ENV = "JUDGEFLOW_BENCH_HALF_LOAD_SECONDS"
"""Overrides `Sizes.half_load_seconds` (the CLI has no flag for it)."""
FULL_HALF_LOAD_SECONDS = 30.0
"""The measured input of a default half-load pass; a shorter one says so in the table."""


@dataclass(frozen=True)
class Sizes:
    runs: int = 300
    claims: int = 3000
    ceiling_events: int = 20_000
    """Judge outputs through the aiokafka passthrough: the pipeline's and the projector's ceiling."""
    step_events: int = 100_000
    """The backlog every engine's claim step consumes (`bench.backlog`)."""
    memory_small: int = 20_000
    memory_large: int = 200_000
    projection_outputs: int = 600
    half_load_seconds: float = FULL_HALF_LOAD_SECONDS
    """Measured input of the half-load pass, in seconds at the half rate."""
    half_load_warmup_seconds: float = 10.0
    """Unmeasured input at the same rate on the same topics before it."""

    @classmethod
    def quick(cls) -> Sizes:
        return cls(
            runs=100,
            claims=1000,
            ceiling_events=5000,
            step_events=3000,
            memory_small=5000,
            memory_large=20_000,
            projection_outputs=200,
            half_load_seconds=10.0,
            half_load_warmup_seconds=5.0,
        )

    def is_quick(self) -> bool:
        """The `--quick` workload, whatever the half-load durations."""
        quick = Sizes.quick()
        same = dataclasses.replace(
            self, half_load_seconds=quick.half_load_seconds, half_load_warmup_seconds=quick.half_load_warmup_seconds
        )
        return same == quick


def sizes_from_env(sizes: Sizes, environ: dict[str, str] | None = None) -> Sizes:
    """`sizes` with `half_load_seconds` from `HALF_LOAD_SECONDS_ENV` when that is set."""
    raw = (os.environ if environ is None else environ).get(HALF_LOAD_SECONDS_ENV, "").strip()
    if not raw:
        return sizes
    seconds = float(raw)
    if not seconds > 0:
        raise ValueError(f"{HALF_LOAD_SECONDS_ENV} must be a positive number of seconds, not {raw!r}")
    return dataclasses.replace(sizes, half_load_seconds=seconds)


@dataclass(frozen=True)
class Target:
    """One figure of the targets table: `numerator / denominator` (or `numerator`
    alone) of the result's top-level keys, a bound it must reach, and the goal."""

    numerator: str
    denominator: str | None
    must: str
    """"OP BOUND" (OP one of >=, >, <=, <), or "report": shown, never passed or failed."""
    goal: str


TARGETS: dict[str, Target] = {
    "judgeflow_vs_peer": Target("judgeflow_step_events_per_s", "peer_events_per_s", ">= 0.4", ">= 1.0"),
    "judgeflow_vs_bytewax": Target("judgeflow_step_events_per_s", "bytewax_events_per_s", "report", ">= 0.5"),
    "worker_cpu_us_per_claim": Target("judgeflow_step_cpu_us_per_event", None, "<= 90", "<= 36"),
    "judgeflow_vs_faust_bare": Target(
        "judgeflow_step_events_per_s", "faust_bare_step_events_per_s", ">= 0.9", ">= 1.5"
    ),
    "step_vs_rdkafka_ceiling": Target(
        "judgeflow_step_events_per_s", "rdkafka_ceiling_events_per_s", "report", "report"
    ),
    "pipeline_vs_rdkafka_ceiling": Target("pipeline_events_per_s", "rdkafka_ceiling_events_per_s", "report", "report"),
    "pipeline_p99_ms_half_load": Target("pipeline_p99_ms_half_load", None, "< 500", "< 100"),
    "rss_growth": Target("rss_mb_200k", "rss_mb_20k", "<= 1.10", "<= 1.02"),
    "contract_typical_vs_floor": Target("contract_fast_us_typical", "contract_floor_us_typical", "<= 1.5", "<= 1.2"),
    "pipeline_vs_ceiling": Target("pipeline_events_per_s", "ceiling_events_per_s", ">= 0.2", ">= 0.5"),
    "projector_vs_ceiling": Target("projector_events_per_s", "ceiling_events_per_s", ">= 0.3", ">= 1.0"),
    "batched_vs_per_row": Target("batched_rows_per_s", "per_row_rows_per_s", ">= 20", ">= 50"),
}
"""Issue 12's targets (ratios within one run), issue 15's projector targets, and issue 31's step targets on
the backlog harness. The pipeline and the projector keep their bounds against the ceiling they were set
against, the aiokafka passthrough of the pipeline's judge outputs (`ceiling_events_per_s`); the claim step's
figures are also shown against the librdkafka ceiling."""

_OPS = {">=": float.__ge__, ">": float.__gt__, "<=": float.__le__, "<": float.__lt__}


def _value(result: dict[str, Any], target: Target) -> float | None:
    """The figure, or None when a key is missing (a measurement this run did not make)."""
    num = result.get(target.numerator)
    if num is None:
        return None
    if target.denominator is None:
        return float(num)
    den = result.get(target.denominator)
    return None if not den else float(num) / float(den)


def _met(bound: str, value: float | None) -> bool | None:
    """True / False against an "OP BOUND" bound; None for "report" rows and missing values."""
    if value is None or bound == "report":
        return None
    op, limit = bound.split()
    return _OPS[op](float(value), float(limit))


def evaluate_targets(result: dict[str, Any], targets: dict[str, Target] = TARGETS) -> dict[str, dict[str, Any]]:
    """Every target's value, bound, goal and whether the bound (`met`) and goal are reached."""
    out: dict[str, dict[str, Any]] = {}
    for name, target in targets.items():
        value = _value(result, target)
        out[name] = {
            "target": target.must,
            "goal": target.goal,
            "value": value,
            "met": _met(target.must, value),
            "goal_met": _met(target.goal, value),
        }
    return out


def target_cell(entry: dict[str, Any] | None) -> str:
    """The table's target column: the bound and met / MISSED, "report", or "n/a" without a value."""
    if entry is None:
        return ""
    if entry["value"] is None:
        return f"{entry['target']} n/a"
    if entry["met"] is None:
        return entry["target"]
    return f"{entry['target']} {'met' if entry['met'] else 'MISSED'}"


def claim_steps(
    bootstrap: str, workdir: Path, events: int, step: Callable[[str], None]
) -> dict[str, backlog.BacklogResult]:
    """Every engine of `bench.backlog` on its own backlog of `events` claim checks, then judgeflow with 2
    workers (key "judgeflow_2")."""
    out: dict[str, backlog.BacklogResult] = {}
    for engine in backlog.ENGINES:
        step(f"  {engine}")
        out[engine] = asyncio.run(backlog.measure(bootstrap, workdir, engine=engine, events=events))
    step("  judgeflow, 2 workers")
    out["judgeflow_2"] = asyncio.run(backlog.measure(bootstrap, workdir, engine="judgeflow", events=events, workers=2))
    return out


def step_figures(steps: dict[str, backlog.BacklogResult]) -> dict[str, Any]:
    """The result's keys for the claim-step passes (the names earlier results used, where there were any)."""
    keys = {
        "rdkafka_passthrough": "rdkafka_ceiling",
        "aiokafka_passthrough": "aiokafka_passthrough",
        "bytewax": "bytewax",
        "quix": "peer",
        "faust_bare": "faust_bare_step",
        "judgeflow": "judgeflow_step",
        "judgeflow_2": "judgeflow_step_2_workers",
    }
    figures: dict[str, Any] = {}
    for engine, key in keys.items():
        result = steps[engine]
        figures[f"{key}_events_per_s"] = result.events_per_s
        figures[f"{key}_cpu_us_per_event"] = result.cpu_us_per_event
    figures["step_passes"] = {engine: asdict(r) for engine, r in steps.items()}
    return figures


def memory_dir() -> Path | None:
    """A writable tmpfs folder (Linux's /dev/shm), or None."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else None


def broker_log(broker_dir: Path | None) -> str:
    """Where the broker's log lives: "tmpfs", "disk", or "external" (KAFKA_BOOTSTRAP_SERVERS)."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        return "external"
    shm = memory_dir()
    return "tmpfs" if broker_dir is not None and shm is not None and shm in broker_dir.parents else "disk"


def run(
    sizes: Sizes, *, workdir: Path, console: Console, seed: int = 11, broker_dir: Path | None = None
) -> dict[str, Any]:
    """Every measurement; `broker_dir` holds the broker started here (default: under `workdir`)."""
    from judgeflow.services.local import local_services

    started = time.monotonic()
    with local_services(workdir / "services", kafka_dir=broker_dir) as services:
        bootstrap, database_url = services.kafka_bootstrap_servers, services.database_url

        def step(label: str) -> None:
            console.print(f"[dim]{time.monotonic() - started:6.1f}s[/dim] {label}")

        step("contract cost")
        costs = contract.measure(budget_s=0.5 if sizes.is_quick() else 1.5)
        step(
            f"claim step on a backlog of {sizes.step_events:,} claim checks, every engine paused while it is "
            "written" + (" (--quick: too small to compare engines)" if sizes.is_quick() else "")
        )
        steps = claim_steps(bootstrap, workdir, sizes.step_events, step)
        step(f"the pipeline's ceiling: aiokafka passthrough of {sizes.ceiling_events:,} judge outputs, on a backlog")
        ceiling = asyncio.run(
            backlog.measure(
                bootstrap, workdir, engine="aiokafka_passthrough", events=sizes.ceiling_events, inputs="judge_outputs"
            )
        )
        step(f"pipeline at full load: {sizes.runs} runs x 3 judges + {sizes.claims} claims")
        full = asyncio.run(
            pipeline.run_pipeline(bootstrap, database_url, workdir, runs=sizes.runs, claims=sizes.claims, seed=seed)
        )
        step("projector alone on the full run's topics, into an empty schema: 1 process, then 2")
        alone = projector.measure(bootstrap, database_url, full.prefix, processes=1)
        alone2 = projector.measure(bootstrap, database_url, full.prefix, processes=2)
        if alone2.counts != alone.counts:
            raise RuntimeError(f"2 projectors wrote other tables than 1: {alone2.counts} vs {alone.counts}")
        half_rate = full.events_per_s / 2
        step(
            f"pipeline at half that rate ({half_rate:.0f} events/s) on its own topics: "
            f"{sizes.half_load_warmup_seconds:g} s of warm-up, then {sizes.half_load_seconds:g} s measured"
            + short_note(sizes)
        )
        half = asyncio.run(
            pipeline.run_half_load(
                bootstrap,
                database_url,
                workdir,
                rate=half_rate,
                seconds=sizes.half_load_seconds,
                warmup_seconds=sizes.half_load_warmup_seconds,
                runs=sizes.runs,
                claims=sizes.claims,
                seed=seed + 1,
            )
        )
        step(f"projection: {sizes.projection_outputs} judge outputs, batched and one insert per row")
        proj = projection.measure(database_url, sizes.projection_outputs)
        step(f"worker memory after {sizes.memory_small} and {sizes.memory_large} claim checks")
        mem = asyncio.run(
            stateless.measure_memory(bootstrap, workdir, small=sizes.memory_small, large=sizes.memory_large)
        )
    typical = next(c for c in costs if c.size == "typical")
    figures = step_figures(steps)
    rdkafka, ceiling_eps = figures["rdkafka_ceiling_events_per_s"], ceiling.events_per_s
    one, two = figures["judgeflow_step_events_per_s"], figures["judgeflow_step_2_workers_events_per_s"]
    peer, bare = figures["peer_events_per_s"], figures["faust_bare_step_events_per_s"]
    result: dict[str, Any] = {
        **figures,
        "ceiling_events_per_s": ceiling_eps,
        "ceiling_cpu_us_per_event": ceiling.cpu_us_per_event,
        "step_comparable": not sizes.is_quick(),
        "pipeline_events_per_s": full.events_per_s,
        "pipeline_p50_ms": full.p50_ms,
        "pipeline_p95_ms": full.p95_ms,
        "pipeline_p99_ms": full.p99_ms,
        "pipeline_half_load_events_per_s": half.events_per_s,
        "pipeline_half_load_rate": half_rate,
        "pipeline_half_load_input_s": half.input_seconds,
        "pipeline_half_load_warmup_s": half.warmup_seconds,
        "pipeline_p50_ms_half_load": half.p50_ms,
        "pipeline_p95_ms_half_load": half.p95_ms,
        "pipeline_p99_ms_half_load": half.p99_ms,
        "pipeline_max_ms_half_load": half.max_ms,
        "pipeline_p99_ms_half_load_by_10s": half.p99_by_slice_ms,
        "pipeline_latency": pipeline.LATENCY,
        "pipeline_decision_p99_ms": full.decision_p99_ms,
        "pipeline_decision_p50_ms_half_load": half.decision_p50_ms,
        "pipeline_decision_p99_ms_half_load": half.decision_p99_ms,
        "pipeline_decision_max_ms_half_load": half.decision_max_ms,
        "pipeline_decision_latency": pipeline.DECISION_LATENCY,
        "pipeline_worker_cpu_s": full.worker_cpu_s,
        "pipeline_projector_cpu_s": full.projector_cpu_s,
        "pipeline_seconds": full.seconds,
        "projector_events_per_s": alone.events_per_s,
        "projector_rows_per_s": alone.rows_per_s,
        "projector_2_events_per_s": alone2.events_per_s,
        "projector_records": alone.records,
        "projector_tables": {name: asdict(cost) for name, cost in alone.tables.items()},
        "contract_us_small": next(c.parse_us for c in costs if c.size == "small"),
        "contract_us_typical": typical.parse_us,
        "contract_us_large": next(c.parse_us for c in costs if c.size == "large"),
        **contract.summary(costs),
        "batched_rows_per_s": proj.batched_rows_per_s,
        "per_row_rows_per_s": proj.per_row_rows_per_s,
        "rss_mb_20k": mem.rss_small_mb,
        "rss_mb_200k": mem.rss_large_mb,
        "ratios": {
            "pipeline_vs_ceiling": full.events_per_s / ceiling_eps,
            "pipeline_vs_rdkafka_ceiling": full.events_per_s / rdkafka,
            "judgeflow_vs_peer": one / peer,
            "judgeflow_vs_bytewax": one / figures["bytewax_events_per_s"],
            "judgeflow_vs_faust_bare": one / bare,
            "faust_bare_vs_peer": bare / peer,
            "batched_vs_per_row": proj.batched_rows_per_s / proj.per_row_rows_per_s,
            "two_vs_one_worker": two / one,
            "projector_vs_ceiling": alone.events_per_s / ceiling_eps,
            "two_vs_one_projector": alone2.events_per_s / alone.events_per_s,
            "rss_growth": mem.rss_large_mb / mem.rss_small_mb,
        },
        "by_output_size": [asdict(c) for c in costs],
        "workload": {
            **asdict(sizes),
            "judges_per_run": 3,
            "pipeline_events": full.events,
            "latency_samples": full.samples,
            "half_load_events": half.events,
            "half_load_warmup_events": half.warmup_events,
            "half_load_latency_samples": half.samples,
            "half_load_decision_samples": half.decision_samples,
            "memory_store": mem.store,
            "partitions": harness.PARTITIONS,
            "seed": seed,
            "broker_log": broker_log(broker_dir),
        },
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": time.monotonic() - started,
    }
    result["targets"] = evaluate_targets(result)
    for name, entry in result["targets"].items():  # e.g. contract_typical_vs_floor, once the floor is measured
        if TARGETS[name].denominator is not None and entry["value"] is not None:
            result["ratios"].setdefault(name, entry["value"])
    return result


def short_note(sizes: Sizes) -> str:
    """What the step line adds when the half-load pass measures less than the default."""
    if sizes.half_load_seconds >= FULL_HALF_LOAD_SECONDS:
        return ""
    why = "--quick" if sizes.is_quick() else HALF_LOAD_SECONDS_ENV
    return f" (shorter than the default {FULL_HALF_LOAD_SECONDS:g} s: {why})"


def half_load_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The table's half-load rows (label, value): p50 / p99 / max of both latencies on
    warmed topics; results from before that (no `pipeline_max_ms_half_load`) show what
    they have, p50 / p95 / p99 on fresh topics."""
    rate = r["pipeline_half_load_events_per_s"]
    if "pipeline_max_ms_half_load" not in r:
        rows = [
            (
                f"  latency p50 / p95 / p99 at {rate:,.0f} ev/s (half; the same)",
                f"{r['pipeline_p50_ms_half_load']:,.0f} / {r['pipeline_p95_ms_half_load']:,.0f} / "
                f"{r['pipeline_p99_ms_half_load']:,.0f} ms",
            )
        ]
        if "pipeline_decision_p99_ms_half_load" in r:  # results from before it lack it
            rows.append(
                (
                    "  decision latency p50 / p99 at half load (judge's send to its decision visible)",
                    f"{r['pipeline_decision_p50_ms_half_load']:,.0f} / "
                    f"{r['pipeline_decision_p99_ms_half_load']:,.0f} ms",
                )
            )
        return rows
    seconds = r["pipeline_half_load_input_s"]
    short = f", under {FULL_HALF_LOAD_SECONDS:g} s" if seconds < FULL_HALF_LOAD_SECONDS - 1 else ""
    return [
        (
            f"  latency p50 / p99 / max at {rate:,.0f} ev/s (half; warmed topics, {seconds:.0f} s of input{short})",
            f"{r['pipeline_p50_ms_half_load']:,.0f} / {r['pipeline_p99_ms_half_load']:,.0f} / "
            f"{r['pipeline_max_ms_half_load']:,.0f} ms",
        ),
        (
            "  decision latency p50 / p99 / max at half load (judge's send to its decision visible)",
            f"{r['pipeline_decision_p50_ms_half_load']:,.0f} / {r['pipeline_decision_p99_ms_half_load']:,.0f} / "
            f"{r['pipeline_decision_max_ms_half_load']:,.0f} ms",
        ),
    ]


STEP_ROWS = (
    ("rdkafka_ceiling", "ceiling: librdkafka passthrough (JSON in, JSON out)"),
    ("aiokafka_passthrough", "aiokafka passthrough (Faust's Kafka client)"),
    ("bytewax", "peer: claim step on Bytewax"),
    ("peer", "peer: claim step on Quix Streams"),
    ("faust_bare_step", "bare faust-streaming: the peers' step, tuned"),
    ("judgeflow_step", "judgeflow: same claim step, 1 worker"),
    ("judgeflow_step_2_workers", "judgeflow: same claim step, 2 workers"),
)
"""The claim-step rows: result key prefix, label."""


def step_rows(t: Table, r: dict[str, Any], tgt: Any) -> None:
    """One row per engine of the backlog pass (rate, CPU per event, share of the ceiling), then judgeflow's
    ratios to its peers."""
    q, ceiling = r["ratios"], r["rdkafka_ceiling_events_per_s"]
    events = r["workload"]["step_events"]
    note = "" if r.get("step_comparable", True) else " (--quick: not comparable)"
    for key, label in STEP_ROWS:
        rate, cpu = r[f"{key}_events_per_s"], r[f"{key}_cpu_us_per_event"]
        t.add_row(
            f"{label}, {events:,}-check backlog{note}",
            f"{rate:,.0f} ev/s, {cpu:,.1f} us CPU/ev",
            f"{rate / ceiling:.3f} of ceiling",
            *(tgt("worker_cpu_us_per_claim") if key == "judgeflow_step" else ("", "")),
        )
    t.add_row("  judgeflow vs Quix Streams", "", f"{q['judgeflow_vs_peer']:.2f}", *tgt("judgeflow_vs_peer"))
    t.add_row("  judgeflow vs Bytewax", "", f"{q['judgeflow_vs_bytewax']:.2f}", *tgt("judgeflow_vs_bytewax"))
    t.add_row(
        "  judgeflow vs bare faust-streaming",
        "",
        f"{q['judgeflow_vs_faust_bare']:.2f}",
        *tgt("judgeflow_vs_faust_bare"),
    )
    t.add_row("  judgeflow 2 workers vs 1", "", f"{q['two_vs_one_worker']:.2f}", "", "")


def table(result: dict[str, Any]) -> Table:
    r, q = result, result["ratios"]
    log = r["workload"].get("broker_log")
    t = Table(title="judgeflow bench" + (f" (broker log on {log})" if log else ""), show_lines=False)
    for col in ("measurement", "value", "ratio", "target", "goal"):
        t.add_column(col, justify="right" if col != "measurement" else "left")

    def tgt(name: str) -> tuple[str, str]:
        entry = r["targets"].get(name)
        return target_cell(entry), "" if entry is None else entry["goal"]

    step_rows(t, r, tgt)
    t.add_row(
        f"ceiling: aiokafka passthrough, {r['workload']['ceiling_events']:,} judge outputs",
        f"{r['ceiling_events_per_s']:,.0f} ev/s",
        "1.00",
        "",
        "",
    )
    t.add_row(
        "pipeline end to end (worker + projector)",
        f"{r['pipeline_events_per_s']:,.0f} ev/s",
        f"{q['pipeline_vs_ceiling']:.3f} of ceiling",
        *tgt("pipeline_vs_ceiling"),
    )
    t.add_row("", "", f"{q['pipeline_vs_rdkafka_ceiling']:.3f} of librdkafka ceiling", "report", "")
    t.add_row(
        "  latency p50 / p95 / p99, full load (judge's send to its row visible)",
        f"{r['pipeline_p50_ms']:,.0f} / {r['pipeline_p95_ms']:,.0f} / {r['pipeline_p99_ms']:,.0f} ms",
        "",
        "",
        "",
    )
    for i, (label, value) in enumerate(half_load_rows(r)):
        t.add_row(label, value, "", *(tgt("pipeline_p99_ms_half_load") if i == 0 else ("", "")))
    t.add_row(
        "projector alone: pipeline topics into an empty schema",
        f"{r['projector_events_per_s']:,.0f} ev/s",
        f"{q['projector_vs_ceiling']:.2f} of ceiling",
        *tgt("projector_vs_ceiling"),
    )
    t.add_row(
        "  the same with 2 projector processes",
        f"{r['projector_2_events_per_s']:,.0f} ev/s",
        f"{q['two_vs_one_projector']:.2f} of 1 projector",
        "",
        "",
    )
    for name, cost in list(r["projector_tables"].items())[:6]:
        t.add_row(
            f"  projector time: {name}",
            f"{cost['rows_per_s']:,.0f} rows/s" if cost["rows"] else "",
            f"{cost['share']:.0%} of its time",
            "",
            "",
        )
    for c in r["by_output_size"]:
        t.add_row(
            f"contract: parse_judge_output, {c['size']} ({c['bytes']:,} B)",
            f"{c['parse_us']:,.0f} us ({c['parse_per_s']:,.0f}/s)",
            f"worker {c['worker_us']:,.0f} us, {c['rows']} rows",
            "",
            "",
        )
    floor = r.get("contract_floor_us_typical")
    t.add_row(
        "contract: typical vs floor (strict validate_json, plain model)",
        "n/a" if floor is None else f"{floor:,.0f} us floor",
        "n/a" if floor is None else f"{q['contract_typical_vs_floor']:.2f}x floor",
        *tgt("contract_typical_vs_floor"),
    )
    t.add_row(
        "projection: batched",
        f"{r['batched_rows_per_s']:,.0f} rows/s",
        f"{q['batched_vs_per_row']:.1f}x per-row",
        *tgt("batched_vs_per_row"),
    )
    t.add_row("projection: one insert per row", f"{r['per_row_rows_per_s']:,.0f} rows/s", "1.0x", "", "")
    w = r["workload"]
    t.add_row(
        f"worker RSS after {w['memory_small']:,} / {w['memory_large']:,} claims ({w['memory_store']})",
        f"{r['rss_mb_20k']:,.0f} / {r['rss_mb_200k']:,.0f} MiB",
        f"{q['rss_growth']:.2f}x",
        *tgt("rss_growth"),
    )
    return t


def main(sizes: Sizes, out: Path | None = None, *, broker_on_disk: bool = False) -> Path:
    """Run, print and write the results. The broker started here keeps its log in
    memory (tmpfs) where the machine has one, unless `broker_on_disk`: every pass
    makes fresh topics, and on a disk shared with Postgres the broker's first
    writes into them wait behind Postgres's commit flushes (bench/PROFILE.md)."""
    # SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C, so the worker, projector
    # and broker processes this started are stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    console = Console(width=None if sys.stdout.isatty() else 150)
    sizes = sizes_from_env(sizes)
    shm = None if broker_on_disk else memory_dir()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="judgeflow-bench-"))
        broker = stack.enter_context(tempfile.TemporaryDirectory(prefix="judgeflow-bench-", dir=shm)) if shm else None
        result = run(sizes, workdir=Path(tmp), console=console, broker_dir=Path(broker) / "kafka" if broker else None)
    console.print(table(result))
    path = out or RESULTS_DIR / f"{datetime.now(UTC).date().isoformat()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    console.print(f"wrote {path} ({result['seconds']:.0f}s)")
    return path
