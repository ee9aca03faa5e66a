"""The projector alone: topics already full, an empty schema, no worker running.

What the pipeline's projector can do when it is the only thing on the
machine's mind: every projected topic of a finished pipeline run (inputs,
validated records, decisions, revisions) is read from the beginning into a
fresh schema, by one process or by several splitting the partitions between
them as a consumer group would. The figure is records per second over all
projected topics, from the moment the projectors start reading to the last
commit; start-up (imports, connecting) is left out.

Each projector is a child process (`python -m bench.projector`), so two of
them use two cores and `py-spy record` can attach to one.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench import harness
from projections.migrate import migrate
from projections.projector import PROJECTED_ROLES, Projector
from projections.rebuild import _offsets
from streams.topics import TopicNames


@dataclass
class TableCost:
    rows: int
    seconds: float
    rows_per_s: float
    share: float
    """Of the projectors' time (decoding plus writing), summed over processes."""


@dataclass
class ProjectorAloneResult:
    processes: int
    records: int
    rows: int
    seconds: float
    events_per_s: float
    rows_per_s: float
    seconds_projecting: float
    seconds_writing: float
    tables: dict[str, TableCost] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    """Rows per table in the schema afterwards (1 and 2 projectors must agree)."""


def split(ends: dict[tuple[str, int], int], processes: int) -> list[dict[tuple[str, int], int]]:
    """Partitions of every topic dealt out by number, as aiokafka's range assignor
    does for topics with as many partitions as consumers times two."""
    parts: list[dict[tuple[str, int], int]] = [{} for _ in range(processes)]
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(ends):
        by_topic.setdefault(topic, []).append(partition)
    for topic, partitions in by_topic.items():
        per = -(-len(partitions) // processes)
        for i, partition in enumerate(partitions):
            parts[i // per][(topic, partition)] = ends[(topic, partition)]
    return [p for p in parts if p]


COUNTED = (
    "raw_events",
    "submissions",
    "rubrics",
    "evaluation_runs",
    "judge_outputs",
    "judge_lane_scores",
    "judge_dimension_scores",
    "judge_flags",
    "judge_integrity_adjustments",
    "judge_evidence_refs",
    "judge_telemetry",
    "judge_output_warnings",
    "evaluation_reconciled_revisions",
    "evaluation_reconciled_scores",
    "claim_checks",
    "checks",
    "reviews",
    "routing_decisions",
    "invalid_events",
    "stale_alerts",
)


def _counts(database_url: str, schema: str) -> dict[str, int]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        out = {}
        for table in COUNTED:
            q = sql.SQL("SELECT count(*) FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
            row = conn.execute(q).fetchone()
            out[table] = int(row[0]) if row else 0
        return out


def measure(
    bootstrap: str,
    database_url: str,
    prefix: str,
    *,
    processes: int = 1,
    profile: Path | None = None,
    keep: bool = False,
) -> ProjectorAloneResult:
    """Project every topic of `prefix` into a fresh schema with `processes` projectors.

    `profile`: run the first projector under `py-spy record` (raw folded stacks there)."""
    names = TopicNames.with_prefix(prefix)
    schema = f"palone_{uuid.uuid4().hex[:8]}"
    migrate(database_url, schema)
    _, ends = asyncio.run(_offsets(bootstrap, [getattr(names, r) for r in PROJECTED_ROLES], {}))
    children = []
    for i, part in enumerate(split(ends, processes)):
        spec = {
            "bootstrap": bootstrap,
            "database_url": database_url,
            "prefix": prefix,
            "schema": schema,
            "ends": [[t, p, o] for (t, p), o in part.items()],
        }
        cmd = [sys.executable, "-m", "bench.projector", json.dumps(spec)]
        if profile is not None and i == 0:
            spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
            cmd = [spy, "record", "-r", "200", "-f", "raw", "-o", str(profile), "--", *cmd]
        children.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, cwd=harness.REPO, env=os.environ.copy()))
    reports = []
    for child in children:
        out, _ = child.communicate(timeout=900)
        if child.returncode != 0:
            raise RuntimeError(f"projector child exited with {child.returncode}")
        reports.append(json.loads([line for line in out.decode().splitlines() if line.startswith("{")][-1]))
    seconds = max(r["ended"] for r in reports) - min(r["started"] for r in reports)
    records = sum(r["records"] for r in reports)
    rows = sum(r["rows"] for r in reports)
    projecting = sum(r["seconds_projecting"] for r in reports)
    writing = sum(r["seconds_writing"] for r in reports)
    busy = projecting + sum(s for r in reports for s in r["table_seconds"].values())
    table_rows: dict[str, int] = {}
    table_seconds: dict[str, float] = {"(decoding records into rows)": projecting}
    for r in reports:
        for name, s in r["table_seconds"].items():
            table_seconds[name] = table_seconds.get(name, 0.0) + s
            table_rows[name] = table_rows.get(name, 0) + r["table_rows"].get(name, 0)
    tables = {}
    for name, s in sorted(table_seconds.items(), key=lambda kv: -kv[1]):
        n = table_rows.get(name, 0)
        tables[name] = TableCost(n, s, n / s if s else 0.0, s / busy if busy else 0.0)
    counts = _counts(database_url, schema)
    if not keep:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return ProjectorAloneResult(
        processes, records, rows, seconds, records / seconds, rows / seconds, projecting, writing, tables, counts
    )


async def _child(spec: dict[str, Any]) -> dict[str, Any]:
    names = TopicNames.with_prefix(spec["prefix"])
    ends = {(t, p): o for t, p, o in spec["ends"]}
    projector = Projector(spec["bootstrap"], spec["database_url"], names, schema=spec["schema"])
    started = time.time()
    stats = await projector.run(until_end=ends)
    return {
        "started": started,
        "ended": time.time(),
        "records": stats.records,
        "rows": stats.rows,
        "seconds_projecting": stats.seconds_projecting,
        "seconds_writing": stats.seconds_writing,
        "table_seconds": dict(stats.timings.seconds),
        "table_rows": dict(stats.timings.rows),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_child(json.loads(sys.argv[1])))))
