"""Postgres read models against the real database (and Kafka where named):
constraints, immutability, idempotent projection, crash mid-batch, replay,
rebuild, the analyst views on a hand-computed fixture."""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql

from bench.per_row import write_per_row
from judgeflow import workload
from projections.analytics import cohen_kappa
from projections.migrate import connect, migrate
from projections.projector import Projector
from projections.rebuild import rebuild
from projections.rows import Record, Rows, project
from projections.store import write_batch
from streams.edge import SourceRef, screen_claim_check, screen_judge_output
from streams.topics import TopicNames
from tests.conftest import MEASURED
from tests.scaffold import Pipeline
from tests.support import wait_for

pytestmark = pytest.mark.integration
NAMES = TopicNames()
ROLES = {v: k for k, v in NAMES.all().items()}
TABLES = [
    "raw_events", "submissions", "rubrics", "evaluation_runs", "judge_outputs", "judge_lane_scores",
    "judge_dimension_scores", "judge_flags", "judge_integrity_adjustments", "judge_evidence_refs",
    "judge_telemetry", "judge_output_warnings", "evaluation_reconciled_revisions", "evaluation_reconciled_scores",
    "claim_checks", "checks", "reviews", "routing_decisions", "invalid_events",
]  # fmt: skip


class Offsets:
    def __init__(self) -> None:
        self.next: dict[str, int] = {}

    def record(self, topic: str, key: bytes | None, value: bytes, headers: Any = ()) -> Record:
        offset = self.next.get(topic, 0)
        self.next[topic] = offset + 1
        return Record(topic, 0, offset, key, value, tuple(headers), 1_764_540_000_000 + offset)


def judge_output_records(off: Offsets, doc: dict[str, Any]) -> list[Record]:
    raw = json.dumps(doc).encode()
    src = off.record(NAMES.judge_outputs, doc["evaluation_run_id"].encode(), raw)
    [valid] = screen_judge_output(raw, SourceRef(src.topic, src.partition, src.offset, src.key))
    return [src, off.record(getattr(NAMES, valid.role), valid.key, valid.value, valid.headers)]


def write(conn: psycopg.Connection, records: list[Record]) -> Rows:
    rows = Rows()
    for r in records:
        project(r, NAMES, ROLES, rows)
    offsets = {(r.topic, r.partition): (None, r.offset + 1) for r in records}
    write_batch(conn, f"test-{uuid.uuid4()}", rows, offsets)  # a fresh consumer: these tests replay on purpose
    return rows


def snapshot(conn: psycopg.Connection, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for table in TABLES:
        q = sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
        out[table] = sorted(tuple(str(v) for v in row) for row in conn.execute(q).fetchall())
    return out


def _one_output(schema: str, database_url: str, **kw: Any) -> tuple[psycopg.Connection, dict[str, Any]]:
    conn = connect(database_url, schema, autocommit=True)
    doc = workload.judge_output(random.Random(1), workload.stable_id("run", schema), "gpt-4o",
                                with_flag=True, with_adjustment=True, **kw)  # fmt: skip
    write(conn, judge_output_records(Offsets(), doc))
    return conn, doc


def test_database_refuses_update_delete_truncate_on_raw_and_judge_rows(database_url: str, schema: str) -> None:
    conn, _ = _one_output(schema, database_url)
    with conn:
        immutable = ("raw_events", "judge_outputs", "judge_lane_scores", "judge_dimension_scores",
                     "judge_evidence_refs", "judge_flags", "judge_integrity_adjustments",
                     "judge_telemetry")  # fmt: skip
        for table in immutable:
            assert conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()[0] > 0
            for statement in ("UPDATE {} SET id = id", "DELETE FROM {}", "TRUNCATE {} CASCADE"):
                if table == "raw_events" and statement.startswith("UPDATE"):
                    statement = "UPDATE {} SET topic = topic"
                with pytest.raises(psycopg.errors.RestrictViolation):
                    conn.execute(sql.SQL(statement).format(sql.Identifier(table)))


@pytest.mark.parametrize("statement", [
    "UPDATE judge_outputs SET overall_score = 101",  # refused by the trigger before any check
])  # fmt: skip
def test_judge_rows_cannot_be_edited_even_to_valid_values(database_url: str, schema: str, statement: str) -> None:
    conn, _ = _one_output(schema, database_url)
    with conn, pytest.raises(psycopg.errors.RestrictViolation):
        conn.execute(statement)


CONSTRAINT_CASES = [
    ("judge_outputs", "overall_score", 101, psycopg.errors.CheckViolation),
    ("judge_outputs", "overall_score", -1, psycopg.errors.CheckViolation),
    ("judge_outputs", "integrity_adjusted_score", 99, psycopg.errors.CheckViolation),  # > overall
    ("judge_outputs", "confidence", "certain", psycopg.errors.CheckViolation),
    ("judge_outputs", "status", "done", psycopg.errors.CheckViolation),
    ("judge_outputs", "schema_version", None, psycopg.errors.NotNullViolation),
    ("judge_outputs", "judge_run_id", "same", psycopg.errors.UniqueViolation),
    ("judge_integrity_adjustments", "deduction", -51, psycopg.errors.CheckViolation),
    ("judge_integrity_adjustments", "deduction", 1, psycopg.errors.CheckViolation),
    ("judge_lane_scores", "lane_score", 101, psycopg.errors.CheckViolation),
    ("judge_dimension_scores", "score", -5, psycopg.errors.CheckViolation),
    ("judge_flags", "severity", "fatal", psycopg.errors.CheckViolation),
    ("judge_evidence_refs", "flag_id", "dimension", psycopg.errors.CheckViolation),  # two parents
    ("judge_telemetry", "error_rate", 1.5, psycopg.errors.CheckViolation),
    ("claim_checks", "score", 1.2, psycopg.errors.CheckViolation),
    ("claim_checks", "verdict", "maybe", psycopg.errors.CheckViolation),
]


@pytest.mark.parametrize("table,column,value,error", CONSTRAINT_CASES)
def test_database_rejects_constraint_violations(
    database_url: str, schema: str, table: str, column: str, value: Any, error: type[Exception]
) -> None:
    conn, doc = _one_output(schema, database_url)
    check = workload.claim_check(random.Random(2), "claim-c")
    raw = json.dumps(check).encode()
    off = Offsets()
    src = off.record(NAMES.checks, b"claim-c", raw)
    [valid] = screen_claim_check(raw, SourceRef(src.topic, 0, 0, b"claim-c"))
    write(conn, [src, off.record(NAMES.checks_valid, valid.key, valid.value, valid.headers)])
    with conn:
        cols = [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
            "ORDER BY ordinal_position", [schema, table]).fetchall()]  # fmt: skip
        row = dict(zip(cols, conn.execute(sql.SQL("SELECT * FROM {} LIMIT 1").format(sql.Identifier(table)))
                       .fetchone(), strict=True))  # fmt: skip
        for key in ("id", "event_id"):
            if key in row:
                row[key] = uuid.uuid4()
        if table == "judge_outputs" and column != "judge_run_id":
            row["judge_run_id"] = uuid.uuid4()
        if table == "claim_checks":
            row["judge_id"] = "another-judge"
        if table in ("judge_flags", "judge_integrity_adjustments"):
            row["position"] = 99
        if table == "judge_lane_scores":
            row["lane_key"] = "another_lane"
        if table == "judge_dimension_scores":
            row["dimension_key"] = "another_dimension"
        if table == "judge_telemetry":  # telemetry is one row per output: give the row an output of its own
            out_cols = [r[0] for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = 'judge_outputs' ORDER BY ordinal_position", [schema]).fetchall()]  # fmt: skip
            output = dict(zip(out_cols, conn.execute("SELECT * FROM judge_outputs LIMIT 1").fetchone(), strict=True))
            output.update(id=uuid.uuid4(), judge_run_id=uuid.uuid4())
            _insert(conn, "judge_outputs", output)
            row["judge_output_id"] = output["id"]
        if value == "same":
            value = row["judge_run_id"]
            row["id"] = uuid.uuid4()
        elif value == "dimension":
            value = row["parent_id"]
        control = {**row, "judge_run_id": uuid.uuid4()} if column == "judge_run_id" else dict(row)
        with pytest.raises(_RolledBack), conn.transaction():  # the row with its valid value goes in
            _insert(conn, table, control)
            raise _RolledBack
        row[column] = value
        with pytest.raises(error):
            _insert(conn, table, row)


class _RolledBack(Exception):
    """Raised inside a savepoint to undo an insert that proved the row valid."""


def _insert(conn: psycopg.Connection, table: str, row: dict[str, Any]) -> None:
    conn.execute(
        sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, row)),
            sql.SQL(", ").join(sql.Placeholder() * len(row)),
        ),
        [json.dumps(v) if isinstance(v, (dict, list)) and table != "judge_outputs" else v for v in row.values()],
    )  # fmt: skip


def test_projection_is_idempotent_and_out_of_order_safe(database_url: str, schema: str) -> None:
    conn = connect(database_url, schema, autocommit=True)
    off = Offsets()
    run_id = workload.stable_id("run", schema)
    rng = random.Random(3)
    records = []
    for judge in workload.JUDGE_MODELS:  # outputs before their run and rubric
        records += judge_output_records(off, workload.judge_output(rng, run_id, judge))
    rubric = workload.rubric()
    records.append(off.record(NAMES.rubrics, rubric["rubric_version_id"].encode(), json.dumps(rubric).encode()))
    records.append(off.record(NAMES.runs, run_id.encode(), json.dumps(workload.evaluation_run(run_id)).encode()))
    write(conn, records[:3])
    write(conn, records[3:])
    first = snapshot(conn, schema)
    write(conn, records)  # redelivery of everything
    write(conn, list(reversed(records)))
    assert snapshot(conn, schema) == first
    with conn:
        run = conn.execute("SELECT expected_judge_models, started_at FROM evaluation_runs").fetchone()
        assert run[0] == list(workload.JUDGE_MODELS) and run[1] is not None
        assert conn.execute("SELECT count(*) FROM judge_outputs WHERE evaluation_run_id = %s",
                            [run_id]).fetchone()[0] == 3  # checklist 5: N rows for N judges  # fmt: skip
        assert conn.execute("SELECT outputs FROM outputs_without_schema_version").fetchone() == (0,)
        assert conn.execute("SELECT name FROM rubrics").fetchone() == (rubric["name"],)


def test_partial_output_keeps_its_lanes_and_is_flagged(database_url: str, schema: str) -> None:
    conn, doc = _one_output(schema, database_url, status="partial")
    with conn:
        lanes = conn.execute("SELECT lane_key FROM judge_lane_scores ORDER BY lane_key").fetchall()
        assert [lane for (lane,) in lanes] == sorted(doc["completed_lane_keys"])
        assert conn.execute("SELECT status, failure_reason FROM partial_and_failed_outputs").fetchone() == (
            "partial", doc["failure_reason"])  # fmt: skip
        flagged = conn.execute("SELECT count(*) FROM judge_output_warnings WHERE code = 'PARTIAL_OUTPUT'").fetchone()
        assert flagged == (1,)
        parents = conn.execute("""SELECT count(*) FROM judge_evidence_refs e JOIN judge_dimension_scores d
                                  ON d.id = e.parent_id AND e.parent_type = 'dimension_score'""").fetchone()[0]
        total = conn.execute("SELECT count(*) FROM judge_evidence_refs WHERE parent_type = 'dimension_score'")
        assert parents == total.fetchone()[0] > 0


def test_views_on_a_hand_computed_fixture(database_url: str, schema: str) -> None:
    conn = connect(database_url, schema, autocommit=True)
    off = Offsets()
    rows = [  # claim, judge, source, verdict, score, confidence
        ("c1", "judge-a", "src-1", "fail", 0.90, 0.9),  # contradiction: fail with score >= 0.80
        ("c2", "judge-a", "src-1", "fail", 0.10, 0.7),
        ("c3", "judge-a", "src-2", "fail", 0.20, 0.5),
        ("c4", "judge-a", "src-2", "pass", 0.95, 0.9),
        ("c1", "judge-b", "src-1", "pass", 0.85, 0.6),
        ("c5", "judge-b", "src-3", "pass", 0.50, 0.8),
    ]
    records = []
    for claim, judge, source, verdict, score, conf in rows:
        doc = {
            **workload.claim_check(random.Random(0), claim, judge_id=judge, source_id=source),
            "verdict": verdict,
            "score": score,
            "confidence": conf,
            "checked_at": "2026-12-01T10:00:00Z",
        }
        raw = json.dumps(doc).encode()
        src = off.record(NAMES.checks, claim.encode(), raw)
        [valid] = screen_claim_check(raw, SourceRef(src.topic, 0, src.offset, src.key))
        records += [src, off.record(NAMES.checks_valid, valid.key, valid.value)]
    reviews = [("c1", "pass"), ("c2", "fail"), ("c3", "pass"), ("c4", "pass"), ("c5", "fail")]
    for i, (claim, verdict) in enumerate(reviews):
        review = {"schema_version": "1.0", "review_id": str(uuid.uuid5(uuid.NAMESPACE_URL, claim)), "claim_id": claim,
                  "reviewer": "ana", "final_verdict": verdict, "created_at": f"2026-12-01T12:00:0{i}Z"}  # fmt: skip
        records.append(off.record(NAMES.reviews, claim.encode(), json.dumps(review).encode()))
    write(conn, records)
    with conn:
        assert conn.execute("SELECT * FROM unsupported_claims_by_source").fetchall() == [("src-1", 2), ("src-2", 1)]
        drift = {j: (float(cr), float(mc), n) for j, cr, mc, n in conn.execute("SELECT * FROM judge_drift")}
        assert drift["judge-a"] == pytest.approx((0.25, 0.75, 4))
        assert drift["judge-b"] == pytest.approx((0.0, 0.7, 2))
        overturn = {j: (float(r), n) for j, r, n in conn.execute("SELECT * FROM overturn_rate_by_judge")}
        # judge-a: c1 fail->pass, c2 fail=fail, c3 fail->pass, c4 pass=pass => 2/4; judge-b: c1 ok, c5 pass->fail
        assert overturn == {"judge-a": (0.5, 4), "judge-b": (0.5, 2)}
        checks = conn.execute("SELECT claim_id, judge_id, second_judge_id, second_verdict FROM checks ORDER BY 1")
        assert checks.fetchall()[0] == ("c1", "judge-a", "judge-b", "pass")
        pairs = conn.execute("SELECT judge_verdict, human_verdict FROM judge_human_pairs WHERE judge_id = 'judge-a'")
        # a: (fail,pass) (fail,fail) (fail,pass) (pass,pass): po = 0.5, pe = .75*.25 + .25*.75 = .375
        assert cohen_kappa(pairs.fetchall()) == pytest.approx((0.5 - 0.375) / (1 - 0.375))


@pytest.mark.pipeline(migrate=False)  # the projector makes its tables
def test_pipeline_projection_rebuild_equals_live(pipeline: Pipeline) -> None:
    prefix, names, schema = pipeline.prefix, pipeline.names, pipeline.schema
    rng = random.Random(11)
    rubric_id = workload.stable_id("rubric", prefix)
    records: list[tuple[str, bytes, bytes]] = [
        (names.rubrics, rubric_id.encode(), json.dumps(workload.rubric(rubric_id)).encode())
    ]
    n_runs = 20
    for i in range(n_runs):
        run_id = workload.stable_id("run", prefix, i)
        doc = workload.evaluation_run(run_id, rubric_id=rubric_id)
        records.append((names.runs, run_id.encode(), json.dumps(doc).encode()))
        for judge in workload.JUDGE_MODELS:
            out = workload.judge_output(rng, run_id, judge, rubric_id=rubric_id, submission_id=doc["submission_id"],
                                        status="partial" if i == 3 and judge == "gpt-4o" else "complete")  # fmt: skip
            records.append((names.judge_outputs, run_id.encode(), json.dumps(
                workload.as_version_1_0(out) if i % 5 == 0 else out).encode()))  # fmt: skip
    records.append((names.judge_outputs, b"bad", b"{not json"))
    n_claims = 60
    for c in range(n_claims):
        records.append((names.checks, f"k{c}".encode(), json.dumps(workload.claim_check(rng, f"k{c}")).encode()))
    records.append((names.checks, b"k-bad", json.dumps({**workload.claim_check(rng, "k-bad"), "score": "1"}).encode()))
    pipeline.send(records)
    with pipeline.worker(JUDGEFLOW_TIMER_INTERVAL="0.5") as worker, pipeline.projector() as projector:
        conn = pipeline.connect()

        def caught_up() -> bool:
            try:
                finals = conn.execute("SELECT count(*) FROM evaluation_reconciled_scores WHERE status = 'final'")
                checks = conn.execute("SELECT count(*) FROM checks").fetchone()[0]
                return finals.fetchone()[0] == n_runs and checks == n_claims + 1
            except psycopg.errors.UndefinedTable:
                return False

        wait_for(caught_up, 120, "read models caught up", projector)
        assert worker.alive()
    with conn:
        assert conn.execute("SELECT count(*) FROM raw_events").fetchone()[0] == len(records)
        assert conn.execute("SELECT count(*) FROM judge_outputs").fetchone()[0] == n_runs * 3
        assert sorted(conn.execute("SELECT contract, error_codes FROM invalid_events").fetchall()) == [
            ("claim_check", ["WRONG_TYPE"]), ("judge_output", ["INVALID_JSON"])]  # fmt: skip
        bad = conn.execute("SELECT verdict, confidence, final_route FROM checks WHERE claim_id = 'k-bad'").fetchone()
        assert bad == ("unclear", 0.0, "human_review")
        assert (
            conn.execute("SELECT count(*) FROM judge_outputs WHERE source_schema_version = '1.0'").fetchone()[0] == 12
        )
        assert conn.execute("SELECT count(*) FROM judge_outputs_per_run WHERE mismatch").fetchone() == (0,)
        live = snapshot(conn, schema)
    report = rebuild(pipeline.bootstrap, pipeline.database_url, names, schema=schema, keep_old=True)
    assert report.retired_as and report.raw_events == len(records) - 1  # the compacted rubric topic is not counted
    pipeline.schemas.append(report.retired_as)  # dropped with the pipeline's own
    with pipeline.connect() as c2:
        rebuilt = snapshot(c2, schema)
        old = snapshot(c2, report.retired_as)
    assert old == live
    for table in TABLES:
        assert rebuilt[table] == live[table], table


@pytest.mark.pipeline(migrate=False)  # the projector makes its tables
def test_projector_killed_mid_batch_then_restarted_matches_a_clean_run(pipeline: Pipeline) -> None:
    prefix, names, crashed = pipeline.prefix, pipeline.names, pipeline.schema
    rng = random.Random(21)
    rubric = workload.rubric()
    records = [(names.rubrics, rubric["rubric_version_id"].encode(), json.dumps(rubric).encode())]
    for i in range(30):
        run_id = workload.stable_id("run", prefix, i)
        records += [(names.runs, run_id.encode(), json.dumps(workload.evaluation_run(run_id)).encode())]
        records += [(names.judge_outputs, run_id.encode(), json.dumps(workload.judge_output(rng, run_id, j)).encode())
                    for j in workload.JUDGE_MODELS]  # fmt: skip
    records += [(names.checks, f"m{c}".encode(), json.dumps(workload.claim_check(rng, f"m{c}")).encode())
                for c in range(300)]  # fmt: skip
    pipeline.send(records)
    small = {"JUDGEFLOW_PROJECTOR_BATCH": "40"}

    def projected(schema_name: str) -> tuple[int, ...]:
        try:
            with pipeline.connect(schema_name) as c:
                row = c.execute(
                    "SELECT (SELECT count(*) FROM raw_events), (SELECT count(*) FROM checks), "
                    "(SELECT count(*) FROM judge_outputs), (SELECT count(*) FROM routing_decisions), "
                    "(SELECT count(*) FROM evaluation_reconciled_revisions)"
                ).fetchone()
                return tuple(int(v) for v in row) if row else ()
        except psycopg.errors.UndefinedTable:
            return ()

    with pipeline.worker():
        dying = pipeline.projector("a", JUDGEFLOW_FAULT_KILL_IN_BATCH="3", **small).start()
        wait_for(lambda: not dying.alive(), 120, "fault-injected projector to die")
        assert dying.process is not None and dying.process.returncode == -9
        with pipeline.projector("b", **small) as again:
            want = (len(records), 300, 90, 330, 120)  # raw, checks, outputs, decisions (300 + 30 runs), revisions
            t0 = time.monotonic()
            seen: list[tuple[int, ...]] = []
            try:
                wait_for(lambda: seen.append(projected(crashed)) or seen[-1] == want, 150, "restarted projector", again)
            except TimeoutError:
                raise AssertionError(f"wanted {want}, last seen {seen[-3:]}") from None
            # The counts can be complete before every row is (a check's row is made
            # from its route alone until the check itself arrives): wait for the offsets.
            pipeline.wait_projected(again, 150)
            MEASURED["projector restart"] = f"caught up {time.monotonic() - t0:.1f}s after the restart"
    clean = pipeline.new_schema("clean")
    asyncio.run(Projector(pipeline.bootstrap, pipeline.database_url, names, schema=clean).run(
        until_end={(t, p): o for (t, p), o in pipeline.ends().items()}))  # fmt: skip
    with pipeline.connect() as conn:
        a, b = snapshot(conn, crashed), snapshot(conn, clean)
        # The same rows; the two schemas differ only in which consumer offsets they stored.
        assert a == b
        replayed = Projector(pipeline.bootstrap, pipeline.database_url, names, schema=clean, consumer_name="replay")
        asyncio.run(replayed.run(until_end=pipeline.ends()))
        assert snapshot(conn, clean) == b  # replaying every topic a second time changes nothing


def test_batched_projection_vs_one_insert_per_row(database_url: str) -> None:
    rng = random.Random(5)
    off = Offsets()
    records: list[Record] = []
    for i in range(150):
        run_id = workload.stable_id("perf-run", i)
        for judge in workload.JUDGE_MODELS:
            records += judge_output_records(off, workload.judge_output(rng, run_id, judge, with_flag=i % 3 == 0))
    results = {}
    for label in ("batched", "per_row"):
        name = f"perf_{label}_{uuid.uuid4().hex[:6]}"
        migrate(database_url, name)
        rows = Rows()
        for r in records:
            project(r, NAMES, ROLES, rows)
        with connect(database_url, name, autocommit=True) as conn:
            t0 = time.perf_counter()
            if label == "batched":
                write_batch(conn, "perf", rows, {})  # one transaction, executemany per table
            else:
                write_per_row(conn, rows)
            results[label] = rows.count() / (time.perf_counter() - t0)
            assert conn.execute("SELECT count(*) FROM judge_outputs").fetchone()[0] == 450
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
    ratio = results["batched"] / results["per_row"]
    MEASURED["projection"] = (
        f"batched {results['batched']:.0f} rows/s vs one insert per row {results['per_row']:.0f} rows/s = {ratio:.1f}x"
    )
