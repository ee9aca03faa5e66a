"""Baseline: seed 000's storeJudgeOutput pattern, one INSERT per row, each its
own round trip and commit (the seed awaits every insert separately). Kept only to measure the batched projector
against; judgeflow itself never writes this way."""

from __future__ import annotations

import psycopg

from projections.rows import Rows
from projections.store import INSERTS, ORDER


def write_per_row(conn: psycopg.Connection, rows: Rows) -> int:
    """Insert every row with its own statement, round trip and commit
    (`conn` in autocommit mode); return rows written."""
    written = 0
    with conn.cursor() as cur:
        for table in ORDER:
            for row in rows.tables.get(table, []):
                cur.execute(INSERTS[table], row)
                written += 1
    return written
