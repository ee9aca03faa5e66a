"""Differential: the projector's binary COPY of raw events stores exactly what a
plain parameterised INSERT of the same rows stores, byte for byte and value for value."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from judgeflow import workload
from projections.migrate import migrate
from projections.projector import PROJECTED_ROLES
from projections.rows import Record, Rows, project
from projections.store import COPY_MIN_ROWS, INSERTS, STAGED_BINARY, _insert, write_batch
from streams.topics import TopicNames

pytestmark = pytest.mark.integration

NAMES = TopicNames.with_prefix("diff.")
ROLES = {getattr(NAMES, r): r for r in PROJECTED_ROLES}


@pytest.fixture
def schemas(database_url: str) -> Iterator[tuple[str, str]]:
    pair = (f"bin_{uuid.uuid4().hex[:10]}", f"txt_{uuid.uuid4().hex[:10]}")
    for name in pair:
        migrate(database_url, name)
    yield pair
    with psycopg.connect(database_url, autocommit=True) as conn:
        for name in pair:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _records() -> list[Record]:
    """Raw input records of every awkward kind a topic can hold."""
    rng = random.Random(3)
    rubric_id = workload.stable_id("diff-rubric")
    values: list[bytes | None] = [
        json.dumps(workload.rubric(rubric_id)).encode(),
        json.dumps(workload.judge_output(rng, workload.stable_id("r"), "gpt-4o", rubric_id=rubric_id)).encode(),
        json.dumps(workload.claim_check(rng, "c1")).encode(),
        '{"ünïcode": "naïve — \\u00e9 \\ud83d\\ude00", "n": 1.50, "e": 1e400}'.encode(),  # jsonb refuses 1e400
        b'{"dup": 1, "dup": 2,  "ws" :\t[1 ,2]}',  # duplicated key, odd spacing: jsonb keeps the last
        b'{"nul": "a\\u0000b"}',  # jsonb cannot hold NUL: no value_json
        b"[1, 2, 3]",  # JSON, not an object
        b"\x00\xff\xfe not json at all",
        b"",
        None,  # a tombstone
        b'{"big": "' + b"x" * 100_000 + b'"}',
    ]
    topics = [NAMES.rubrics, NAMES.judge_outputs, NAMES.checks, NAMES.runs, NAMES.reviews]
    records = []
    for i in range(max(COPY_MIN_ROWS, 3 * len(values))):
        headers = (("h", b"\x00\x01"), ("trace", b"abc")) if i % 2 else ()
        key = None if i % 5 == 0 else f"k{i}\x00é".encode()
        records.append(Record(topics[i % len(topics)], i % 4, 1000 + i, key, values[i % len(values)], headers,
                              1_764_540_000_000 + i))  # fmt: skip
    return records


def test_raw_events_binary_copy_stores_the_same_rows_as_a_plain_insert(
    database_url: str, schemas: tuple[str, str]
) -> None:
    assert "raw_events" in STAGED_BINARY
    binary, text = schemas
    rows = Rows()
    for record in _records():
        project(record, NAMES, ROLES, rows)
    batch = rows.tables["raw_events"]
    assert len(batch) >= COPY_MIN_ROWS  # so `_insert` takes the COPY path
    assert any(r[6] is None for r in batch) and any(r[6] is not None for r in batch)
    with psycopg.connect(database_url, options=f"-c search_path={binary}") as conn, conn.cursor() as cur:
        _insert(cur, "raw_events", batch)
        _insert(cur, "raw_events", batch)  # a replay of the same records adds nothing
    with psycopg.connect(database_url, options=f"-c search_path={text}") as conn, conn.cursor() as cur:
        cur.executemany(INSERTS["raw_events"], batch)
    with psycopg.connect(database_url, autocommit=True) as conn:
        q = sql.SQL(
            'SELECT topic, partition, "offset", key, headers, value, value_json::text, received_at '
            'FROM {}.raw_events ORDER BY topic, partition, "offset"'
        )
        got = conn.execute(q.format(sql.Identifier(binary))).fetchall()
        want = conn.execute(q.format(sql.Identifier(text))).fetchall()
    assert len(want) == len(batch)
    assert got == want


def test_a_failed_batch_leaves_the_next_one_its_staging_table(database_url: str, schemas: tuple[str, str]) -> None:
    """A staging table is created once per connection; when the transaction that created it fails, it is rolled
    back with it, and the next batch on the same connection must create it again, not assume it exists."""
    schema, _ = schemas
    rows = Rows()
    records = _records()
    for record in records:
        project(record, NAMES, ROLES, rows)
    assert len(rows.tables["raw_events"]) >= COPY_MIN_ROWS  # the staged path
    offsets: dict[tuple[str, int], tuple[int | None, int]] = {}
    for r in records:
        tp = (r.topic, r.partition)
        offsets[tp] = (None, max(offsets.get(tp, (None, 0))[1], r.offset + 1))

    def fail() -> None:
        raise RuntimeError("the batch dies before its commit")

    with psycopg.connect(database_url, autocommit=True, options=f"-c search_path={schema}") as conn:
        with pytest.raises(RuntimeError):
            write_batch(conn, "stage-test", rows, offsets, fail)
        assert conn.execute("SELECT to_regclass('pg_temp.stage_raw_events')").fetchone() == (None,)
        write_batch(conn, "stage-test", rows, offsets)
        stored = conn.execute("SELECT count(*) FROM raw_events").fetchone()
        assert stored == (len(rows.tables["raw_events"]),)
        # And a second batch on the connection reuses the table it created (a replay stores nothing new).
        again = {tp: (nxt, nxt) for tp, (_, nxt) in offsets.items()}
        write_batch(conn, "stage-test", rows, again)
        assert conn.execute("SELECT count(*) FROM raw_events").fetchone() == stored


def test_a_batch_part_of_which_is_stored_adds_only_its_new_rows(database_url: str, schemas: tuple[str, str]) -> None:
    """A COPY batch goes straight into its table unless a row of it exists: then that COPY is undone and the
    batch staged, so a partly redelivered batch (and one holding a record twice) stores each row once, and
    the judge outputs it reports as new are exactly those it stored (their children follow only them)."""
    twice, once = schemas
    rng = random.Random(5)
    records = []
    for i in range(2 * COPY_MIN_ROWS):
        run_id = workload.stable_id("partly", i // 3)
        doc = workload.judge_output(rng, run_id, workload.JUDGE_MODELS[i % 3])
        for topic in (NAMES.judge_outputs, NAMES.judge_outputs_valid):  # raw input and validated record
            records.append(Record(topic, i % 4, i, run_id.encode(), json.dumps(doc).encode(), (),
                                  1_764_540_000_000 + i))  # fmt: skip
    first = records[: 2 * COPY_MIN_ROWS + 6]

    def rows_of(batch: list[Record]) -> Rows:
        rows = Rows()
        for record in batch:
            project(record, NAMES, ROLES, rows)
        return rows

    assert len(rows_of(first).tables["raw_events"]) >= COPY_MIN_ROWS  # both tables take the COPY path
    tables = ["raw_events", *(t for t in INSERTS if t.startswith("judge_"))]
    counts = sql.SQL("SELECT {}").format(sql.SQL(", ").join(
        sql.SQL("(SELECT count(*) FROM {})").format(sql.Identifier(t)) for t in tables))  # fmt: skip
    with psycopg.connect(database_url, autocommit=True, options=f"-c search_path={twice}") as conn:
        write_batch(conn, "partly-a", rows_of(first), {})
        # Everything again (the first part redelivered), and one record of the new part twice.
        write_batch(conn, "partly-b", rows_of(records + records[-2:]), {})
        got = conn.execute(counts).fetchone()
    with psycopg.connect(database_url, autocommit=True, options=f"-c search_path={once}") as conn:
        write_batch(conn, "once", rows_of(records), {})
        want = conn.execute(counts).fetchone()
    assert want is not None and want[:2] == (len(records) // 2, len(records) // 2)
    assert got == want
