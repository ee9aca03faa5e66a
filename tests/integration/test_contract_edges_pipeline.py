"""The contract's edges, from outside: every input the differential run against seed 000's Zod schema found
looser than storage (timestamps Postgres refuses or that are not RFC 3339, ids with a trailing newline,
versions with a newline or non-ASCII digits) is published as raw bytes, as kcat would, followed by integral
floats where integers are due and one plain valid output. The worker and the projector stay up; each bad
output is dead-lettered at the edge with its code; the integral floats and the valid output are projected
as integers; nothing is lost."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import psycopg
import pytest

from judgeflow import workload
from streams.topics import TopicNames
from tests.support import (
    ProjectorProcess,
    Worker,
    create_topics,
    produce,
    projected_topic_ends,
    projection_reached,
    unique_prefix,
    wait_for,
)

pytestmark = pytest.mark.integration

REFUSED: list[tuple[str, str, str, str]] = [
    # (what, field, value, the code it must be dead-lettered with)
    ("reduced precision", "judge_completed_at", "2026-11-30T23Z", "INVALID_TIMESTAMP"),
    ("ISO week date", "judge_completed_at", "2026-W48-1T22:00:00Z", "INVALID_TIMESTAMP"),
    ("comma fraction", "judge_completed_at", "2026-11-30T22:00:00,5Z", "INVALID_TIMESTAMP"),
    ("underscore separator", "judge_completed_at", "2026-11-30_22:00:00Z", "INVALID_TIMESTAMP"),
    ("basic format", "judge_completed_at", "20261130T220500Z", "INVALID_TIMESTAMP"),
    ("judge_run_id + newline", "judge_run_id", "\n", "INVALID_UUID"),
    ("evaluation_run_id + newline", "evaluation_run_id", "\n", "INVALID_UUID"),
    ("submission_id + newline", "submission_id", "\n", "INVALID_UUID"),
    ("rubric_version_id + newline", "rubric_version_id", "\n", "INVALID_UUID"),
    ("version + newline", "schema_version", "2.1\n", "INVALID_SCHEMA_VERSION"),
    ("Arabic-Indic digits", "schema_version", "٢.١", "INVALID_SCHEMA_VERSION"),
    ("fullwidth digits", "schema_version", "２.１", "INVALID_SCHEMA_VERSION"),
]
INTEGRAL = ["lane_score: 70.0", "overall_score: 7e1", "deduction: -5.0"]


def _output(rng: random.Random, prefix: str, i: int, rubric_id: str) -> tuple[str, dict[str, Any]]:
    run_id = workload.stable_id("edge-run", prefix, i)
    doc = workload.judge_output(rng, run_id, workload.JUDGE_MODELS[0], rubric_id=rubric_id, with_adjustment=True,
                                submission_id=workload.stable_id("edge-sub", prefix, i))  # fmt: skip
    return run_id, doc


def _integral(doc: dict[str, Any], case: str) -> bytes:
    """The document with one integer written as a float literal (text, so `7e1` stays `7e1`)."""
    if case.startswith("lane_score"):
        doc["lane_scores"][0]["lane_score"] = "@@"
        return json.dumps(doc).replace('"@@"', "70.0").encode()
    if case.startswith("overall_score"):
        doc["overall_score"], doc["integrity_adjusted_score"] = "@@", min(doc["integrity_adjusted_score"], 70)
        return json.dumps(doc).replace('"@@"', "7e1").encode()
    doc["integrity_adjustments"][0]["deduction"] = "@@"
    return json.dumps(doc).replace('"@@"', "-5.0").encode()


def test_each_bad_input_is_dead_lettered_with_its_code_and_the_rest_projected(
    kafka_bootstrap: str, database_url: str, schema: str, tmp_path: Path
) -> None:
    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names)
    rng = random.Random(27)
    rubric = workload.rubric(workload.stable_id("edge-rubric", prefix))
    rubric_id = rubric["rubric_version_id"]
    records: list[tuple[str, bytes | None, bytes]] = [(names.rubrics, rubric_id.encode(), json.dumps(rubric).encode())]
    outputs: list[tuple[str, str, bytes]] = []  # (case, judge_run_id, bytes)
    for i, (what, field, value, _) in enumerate(REFUSED):
        run_id, doc = _output(rng, prefix, i, rubric_id)
        doc[field] = doc[field] + value if value == "\n" else value
        outputs.append((what, doc["judge_run_id"].strip(), json.dumps(doc, ensure_ascii=False).encode()))
    for j, case in enumerate(INTEGRAL):
        run_id, doc = _output(rng, prefix, 100 + j, rubric_id)
        outputs.append((case, doc["judge_run_id"], _integral(doc, case)))
    run_id, doc = _output(rng, prefix, 200, rubric_id)
    outputs.append(("valid, after them all", doc["judge_run_id"], json.dumps(doc).encode()))
    for k, (_, _, raw) in enumerate(outputs):
        run_id = json.loads(raw)["evaluation_run_id"].strip()
        run = workload.evaluation_run(run_id, rubric_id=rubric_id, judges=(workload.JUDGE_MODELS[0],),
                                      submission_id=workload.stable_id("edge-sub", prefix, k))  # fmt: skip
        records.append((names.runs, run_id.encode(), json.dumps(run).encode()))
        records.append((names.judge_outputs, run_id.encode(), raw))
    produce(kafka_bootstrap, records)

    with Worker(kafka_bootstrap, prefix, tmp_path / "w") as worker, ProjectorProcess(
        kafka_bootstrap, prefix, tmp_path / "p", database_url, schema
    ) as projector:  # fmt: skip
        conn = psycopg.connect(database_url, autocommit=True, options=f"-c search_path={schema}")

        def accounted() -> bool:
            try:
                bad = conn.execute("SELECT count(*) FROM invalid_events WHERE contract = 'judge_output'").fetchone()
                good = conn.execute("SELECT count(*) FROM judge_outputs").fetchone()
            except psycopg.errors.UndefinedTable:
                return False
            return bool(bad and good and bad[0] == len(REFUSED) and good[0] == len(INTEGRAL) + 1)

        wait_for(accounted, 120, "every output projected or dead-lettered", projector)
        ends = projected_topic_ends(kafka_bootstrap, names)
        wait_for(lambda: projection_reached(database_url, schema, ends), 60, "projector at the end", projector)
        assert worker.alive() and projector.alive()
        with conn:
            dead = {
                bytes(original): codes
                for original, codes in conn.execute(
                    "SELECT original, error_codes FROM invalid_events WHERE contract = 'judge_output'"
                ).fetchall()
            }
            stored = {
                str(jr): (overall, adjusted)
                for jr, overall, adjusted in conn.execute(
                    "SELECT judge_run_id, overall_score, integrity_adjusted_score FROM judge_outputs"
                ).fetchall()
            }
            lanes = {
                str(jr): score
                for jr, score in conn.execute(
                    "SELECT o.judge_run_id, l.lane_score FROM judge_lane_scores l JOIN judge_outputs o "
                    "ON o.id = l.judge_output_id WHERE l.lane_key = 'correctness'"
                ).fetchall()
            }
            deductions = {
                str(jr): d
                for jr, d in conn.execute(
                    "SELECT o.judge_run_id, a.deduction FROM judge_integrity_adjustments a JOIN judge_outputs o "
                    "ON o.id = a.judge_output_id WHERE a.position = 0"
                ).fetchall()
            }
            raw = conn.execute("SELECT count(*) FROM raw_events WHERE topic = %s", [names.judge_outputs]).fetchone()
            rejects = conn.execute("SELECT count(*) FROM projection_rejects").fetchone()
    for (what, _, _, code), (_, _, value) in zip(REFUSED, outputs, strict=False):
        assert value in dead, f"{what}: not dead-lettered"
        assert code in dead[value], f"{what}: dead-lettered with {dead[value]}, not {code}"
    by_case = {case: judge_run_id for case, judge_run_id, _ in outputs}
    assert lanes[by_case["lane_score: 70.0"]] == 70
    assert stored[by_case["overall_score: 7e1"]][0] == 70
    assert deductions[by_case["deduction: -5.0"]] == -5
    assert by_case["valid, after them all"] in stored
    assert raw == (len(outputs),) and rejects == (0,)  # every byte kept; nothing Postgres had to refuse
