"""The projection dead letter: a record whose rows Postgres refuses, or that cannot be made into rows, is set
aside in `projection_rejects` with its bytes and why; the projector stays up and projects everything else.

The refusal comes from the database alone: the test tightens one column of its own schema with a CHECK
constraint (no hook in the product), so the record is valid by the contract and only Postgres says no."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import urllib.request
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from judgeflow import workload
from judgeflow.services.ports import free_port
from streams.topics import TopicNames
from tests.support import (
    REPO,
    ProjectorProcess,
    create_topics,
    produce,
    projected_topic_ends,
    projection_reached,
    unique_prefix,
    wait_for,
)

pytestmark = pytest.mark.integration

REFUSED_MODEL = "model-the-database-refuses"


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def test_a_record_only_postgres_refuses_is_set_aside_and_everything_after_it_projected(
    kafka_bootstrap: str, database_url: str, schema: str, tmp_path: Path
) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER TABLE {}.judge_outputs ADD CONSTRAINT tighter_than_the_contract CHECK (judge_model <> {})")
            .format(sql.Identifier(schema), sql.Literal(REFUSED_MODEL))
        )  # fmt: skip
    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names, partitions=1)  # one partition: the good outputs come after the bad one
    rng = random.Random(27)
    outputs = []
    for i in range(40):
        run_id = workload.stable_id("run", prefix, i)
        judge = REFUSED_MODEL if i == 5 else workload.JUDGE_MODELS[i % len(workload.JUDGE_MODELS)]
        outputs.append((run_id, json.dumps(workload.judge_output(rng, run_id, judge)).encode()))
    undecodable = b'{"not": "a reconciliation revision"}'
    records = [(names.judge_outputs_valid, run_id.encode(), value) for run_id, value in outputs]
    records.insert(20, (names.reconciled, b"forged", undecodable))
    produce(kafka_bootstrap, records)

    port = free_port()
    with ProjectorProcess(kafka_bootstrap, prefix, tmp_path, database_url, schema,
                          JUDGEFLOW_METRICS_PORT=str(port)) as projector:  # fmt: skip
        ends = projected_topic_ends(kafka_bootstrap, names)
        wait_for(lambda: projection_reached(database_url, schema, ends), 120, "projector at the end offsets",
                 projector)  # fmt: skip
        assert projector.alive()
        metrics = _metrics(port)
        log = projector.log()

    with psycopg.connect(database_url, autocommit=True, options=f"-c search_path={schema}") as conn:
        models = [m for (m,) in conn.execute("SELECT judge_model FROM judge_outputs").fetchall()]
        rejects = conn.execute(
            'SELECT topic, "offset", code, stage, sqlstate, error, value FROM projection_rejects ORDER BY "offset"'
        ).fetchall()
        dead = dict(conn.execute("SELECT code, events FROM dead_letters_by_code").fetchall())
    assert len(models) == 39 and REFUSED_MODEL not in models  # every other output, the ones after it too
    refused = [r for r in rejects if r[2] == "PROJECTION_REFUSED"]
    assert [(t, o, st, state) for t, o, _, st, state, _, _ in refused] == [
        (names.judge_outputs_valid, 5, "write", "23514")
    ]
    assert "tighter_than_the_contract" in refused[0][5]
    assert refused[0][6] == outputs[5][1]  # the bytes, exactly
    [bad] = [r for r in rejects if r[2] == "PROJECTION_UNDECODABLE"]
    assert (bad[0], bad[3], bad[4], bad[6]) == (names.reconciled, "decode", None, undecodable)
    assert dead == {"PROJECTION_REFUSED": 1, "PROJECTION_UNDECODABLE": 1}
    assert 'judgeflow_projection_rejects_total{code="PROJECTION_REFUSED"' in metrics
    assert f"set aside {names.judge_outputs_valid}[0]@5 as PROJECTION_REFUSED (23514)" in log

    shown = subprocess.run(
        [sys.executable, "-m", "judgeflow.cli", "report", "--schema", schema],
        env={**os.environ, "DATABASE_URL": database_url, "COLUMNS": "250"},
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert "Records the projector set aside" in shown
    assert "PROJECTION_REFUSED" in shown and "23514" in shown
