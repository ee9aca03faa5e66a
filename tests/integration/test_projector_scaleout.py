"""Two projectors sharing the partitions: the same tables as one, and derived
rows (checks) merged correctly when a key's topics sit on different processes."""

from __future__ import annotations

import json
import random
import re
import threading
import uuid

import psycopg
import pytest
from psycopg import sql

from judgeflow import workload
from projections.migrate import connect
from projections.rows import Record, Rows, project
from projections.store import REFRESH_CHECKS, write_batch
from streams.edge import SourceRef, screen_claim_check
from streams.topics import TopicNames
from tests.conftest import MEASURED
from tests.integration.test_projections import NAMES, ROLES, TABLES, snapshot
from tests.scaffold import Pipeline
from tests.support import wait_for

pytestmark = pytest.mark.integration


def _workload(names: TopicNames, prefix: str) -> list[tuple[str, bytes, bytes]]:
    rng = random.Random(15)
    rubric_id = workload.stable_id("rubric", prefix)
    records = [(names.rubrics, rubric_id.encode(), json.dumps(workload.rubric(rubric_id)).encode())]
    for i in range(40):
        run_id = workload.stable_id("run", prefix, i)
        doc = workload.evaluation_run(run_id, rubric_id=rubric_id)
        records.append((names.runs, run_id.encode(), json.dumps(doc).encode()))
        for judge in workload.JUDGE_MODELS:
            out = workload.judge_output(rng, run_id, judge, rubric_id=rubric_id, submission_id=doc["submission_id"],
                                        with_flag=i % 4 == 0)  # fmt: skip
            records.append((names.judge_outputs, run_id.encode(), json.dumps(out).encode()))
    for c in range(400):
        records.append((names.checks, f"s{c}".encode(), json.dumps(workload.claim_check(rng, f"s{c}")).encode()))
    return records


@pytest.mark.pipeline(partitions=4, migrate=False)  # the projectors make their tables
def test_two_projectors_over_four_partitions_write_the_same_tables_as_one(pipeline: Pipeline) -> None:
    records = _workload(pipeline.names, pipeline.prefix)
    pipeline.send(records)
    one, two = pipeline.schema, pipeline.new_schema("two", migrate=False)
    with pipeline.worker(JUDGEFLOW_TIMER_INTERVAL="0.5") as worker:
        with pipeline.projector("one") as single:

            def worker_done() -> bool:
                try:
                    with pipeline.connect() as c:
                        finals = "SELECT count(*) FROM evaluation_reconciled_scores WHERE status = 'final'"
                        row = c.execute(f"SELECT ({finals}), (SELECT count(*) FROM checks)").fetchone()
                        return row == (40, 400)
                except psycopg.errors.UndefinedTable:
                    return False

            wait_for(worker_done, 180, "worker and projector caught up", single)
        assert worker.alive()
    # The worker has stopped: every topic is complete. One projector finishes them...
    ends = pipeline.ends()
    with pipeline.projector("one-b") as single:
        pipeline.wait_projected(single, 120, "one projector at the end offsets", ends=ends)
    # ... and two, in one consumer group, project them into a second schema from scratch.
    small = {"JUDGEFLOW_PROJECTOR_BATCH": "50", "JUDGEFLOW_PROJECTOR_LINGER_MS": "5"}
    a = pipeline.projector("a", schema=two, **small)
    b = pipeline.projector("b", schema=two, **small)
    with a, b:
        pipeline.wait_projected(a, 180, "two projectors at the end offsets", ends=ends, schema=two)
        assert b.alive()
    assigned = [[int(n) for n in re.findall(r"assigned (\d+) partitions", p.log())] for p in (a, b)]
    # Both processes held a share of the 4-partition topics at some point (the group split them).
    assert all(any(n > 0 for n in counts) for counts in assigned), assigned
    with pipeline.connect() as conn:
        single_rows, double_rows = snapshot(conn, one), snapshot(conn, two)
        for table in [*TABLES, "stale_alerts"]:
            q = sql.SQL("SELECT count(*) FROM {}.{}")
            n1 = conn.execute(q.format(sql.Identifier(one), sql.Identifier(table))).fetchone()
            n2 = conn.execute(q.format(sql.Identifier(two), sql.Identifier(table))).fetchone()
            assert n1 == n2, table
    for table in TABLES:
        assert double_rows[table] == single_rows[table], table
    assert len(single_rows["checks"]) == 400 and len(single_rows["evaluation_reconciled_scores"]) == 40
    MEASURED["two projectors"] = f"assignments seen: {assigned[0]} and {assigned[1]}"


def _claim_records(claim_id: str) -> tuple[Record, Record]:
    """A claim's validated check and its routing decision, as the worker writes them."""
    rng = random.Random(7)
    raw = json.dumps(workload.claim_check(rng, claim_id)).encode()
    [valid] = screen_claim_check(raw, SourceRef(NAMES.checks, 0, 0, claim_id.encode()))
    check = Record(getattr(NAMES, valid.role), 0, 0, valid.key, valid.value, tuple(valid.headers), 1_764_540_000_000)
    decision = {
        "schema_version": "1.0", "event_id": str(uuid.uuid4()), "subject": "claim", "claim_id": claim_id,
        "evaluation_run_id": None,
        "route": "done", "reason": "confident", "verdict": "pass", "score": 0.9, "confidence": 0.9,
        "judge_ids": ["judge-a"], "input_ids": [claim_id], "policy": None, "aggregation_mode": None,
        "tie_rule": None, "agreement": None, "decided_at": "2026-12-01T00:00:01+00:00",
    }  # fmt: skip
    done = Record(NAMES.done, 1, 0, claim_id.encode(), json.dumps(decision).encode(), (), 1_764_540_001_000)
    return check, done


def test_check_and_decision_on_two_projectors_at_once_merge_into_one_checks_row(database_url: str, schema: str) -> None:
    """The check (partition 0) and its decision (partition 1) are written by two
    concurrent transactions; the later refresh must see the earlier one's fact."""
    check, done = _claim_records("merge-1")
    batches = []
    for record in (check, done):
        rows = Rows()
        project(record, NAMES, ROLES, rows)
        batches.append((rows, {(record.topic, record.partition): (None, record.offset + 1)}))
    first = connect(database_url, schema, autocommit=True)
    second = connect(database_url, schema, autocommit=True)
    release = threading.Event()
    errors: list[BaseException] = []

    def hold() -> None:  # the first transaction has written and refreshed; it waits to commit
        if not release.wait(60):
            raise TimeoutError("never released")

    def run_first() -> None:
        try:
            write_batch(first, "p-a", batches[0][0], batches[0][1], hold)
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=run_first)
    thread.start()
    watcher = connect(database_url, schema, autocommit=True)
    # The first transaction has refreshed its claim's checks row (it holds a lock on `checks`) and waits.
    holds_checks = (
        "SELECT count(*) FROM pg_locks WHERE pid = %s AND relation = 'checks'::regclass AND mode = 'RowExclusiveLock'"
    )
    wait_for(lambda: watcher.execute(holds_checks, [first.info.backend_pid]).fetchone() == (1,), 30,
             "the first transaction to refresh and sit before its commit")  # fmt: skip
    second_thread = threading.Thread(target=lambda: write_batch(second, "p-b", batches[1][0], batches[1][1]))
    second_thread.start()
    wait_for(lambda: watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event_type = "
                                     "'Lock'", [second.info.backend_pid]).fetchone() == (1,),
             30, "the second transaction to wait for the first")  # fmt: skip
    release.set()
    thread.join(60)
    second_thread.join(60)
    assert not errors
    merged = watcher.execute("SELECT * FROM checks WHERE claim_id = 'merge-1'").fetchall()
    watcher.execute(REFRESH_CHECKS, [["merge-1"]])  # recomputed from every stored fact, nothing in flight
    assert watcher.execute("SELECT * FROM checks WHERE claim_id = 'merge-1'").fetchall() == merged
    source_id, route, final_verdict = merged[0][2], merged[0][10], merged[0][17]
    assert source_id and route == "done" and final_verdict == "pass", merged
    for c in (first, second, watcher):
        c.close()
