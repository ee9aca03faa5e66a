"""Projection: the batched projector's write path against one insert per row.

The same records (judge outputs as read from the input topic and from the
validated topic, plus their claim checks) are projected to rows once, then
written into two fresh schemas: with `write_batch` (one transaction, COPY or
executemany per table) and with `write_per_row` (seed 000's storeJudgeOutput
pattern: every row its own INSERT and commit).
"""

from __future__ import annotations

import json
import random
import time
import uuid
from dataclasses import dataclass

from psycopg import sql

from bench.per_row import write_per_row
from judgeflow import workload
from projections.migrate import connect, migrate
from projections.rows import Record, Rows, project
from projections.store import write_batch
from streams.edge import SourceRef, screen_judge_output
from streams.topics import TopicNames


@dataclass
class ProjectionResult:
    rows: int
    batched_rows_per_s: float
    per_row_rows_per_s: float


def records(outputs: int, seed: int = 9) -> list[Record]:
    rng = random.Random(seed)
    names = TopicNames()
    out: list[Record] = []
    for i in range(outputs):
        run_id = workload.stable_id("bench-projection", seed, i // 3)
        judge = workload.JUDGE_MODELS[i % 3]
        raw = json.dumps(workload.judge_output(rng, run_id, judge, with_flag=i % 3 == 0)).encode()
        out.append(Record(names.judge_outputs, 0, i, run_id.encode(), raw, (), 1_700_000_000_000 + i))
        valid = screen_judge_output(raw, SourceRef(names.judge_outputs, 0, i, run_id.encode()))[0]
        out.append(
            Record(names.judge_outputs_valid, 0, i, valid.key, valid.value, tuple(valid.headers), 1_700_000_000_000 + i)
        )
    return out


def measure(database_url: str, outputs: int) -> ProjectionResult:
    names = TopicNames()
    roles = {v: k for k, v in names.all().items()}
    rows = Rows()
    for record in records(outputs):
        project(record, names, roles, rows)
    rates = {}
    for label in ("batched", "per_row"):
        schema = f"bench_{label}_{uuid.uuid4().hex[:6]}"
        migrate(database_url, schema)
        with connect(database_url, schema, autocommit=True) as conn:
            t0 = time.perf_counter()
            if label == "batched":
                write_batch(conn, "bench", rows, {})
            else:
                write_per_row(conn, rows)
            rates[label] = rows.count() / (time.perf_counter() - t0)
            (stored,) = conn.execute("SELECT count(*) FROM judge_outputs").fetchone() or (0,)
            if stored != outputs:
                raise RuntimeError(f"{label}: {stored} judge outputs stored, expected {outputs}")
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return ProjectionResult(rows.count(), rates["batched"], rates["per_row"])
