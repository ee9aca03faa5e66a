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

import pytest
from psycopg import sql

from judgeflow import workload
from judgeflow.services.ports import free_port
from tests.scaffold import Pipeline
from tests.support import REPO, metrics_text

pytestmark = pytest.mark.integration

REFUSED_MODEL = "model-the-database-refuses"


@pytest.mark.pipeline(partitions=1)  # one partition: the good outputs come after the bad one
def test_a_record_only_postgres_refuses_is_set_aside_and_everything_after_it_projected(pipeline: Pipeline) -> None:
    schema = pipeline.schema
    with pipeline.connect() as conn:
        conn.execute(
            sql.SQL("ALTER TABLE {}.judge_outputs ADD CONSTRAINT tighter_than_the_contract CHECK (judge_model <> {})")
            .format(sql.Identifier(schema), sql.Literal(REFUSED_MODEL))
        )  # fmt: skip
    prefix, names = pipeline.prefix, pipeline.names
    rng = random.Random(27)
    outputs = []
    for i in range(40):
        run_id = workload.stable_id("run", prefix, i)
        judge = REFUSED_MODEL if i == 5 else workload.JUDGE_MODELS[i % len(workload.JUDGE_MODELS)]
        outputs.append((run_id, json.dumps(workload.judge_output(rng, run_id, judge)).encode()))
    undecodable = b'{"not": "a reconciliation revision"}'
    records = [(names.judge_outputs_valid, run_id.encode(), value) for run_id, value in outputs]
    records.insert(20, (names.reconciled, b"forged", undecodable))
    pipeline.send(records)

    port = free_port()
    with pipeline.projector(JUDGEFLOW_METRICS_PORT=str(port)) as projector:
        pipeline.wait_projected(projector, 120)
        assert projector.alive()
        metrics = metrics_text(port)
        log = projector.log()

    with pipeline.connect() as conn:
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
        env={**os.environ, "DATABASE_URL": pipeline.database_url, "COLUMNS": "250"},
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert "Records the projector set aside" in shown
    assert "PROJECTION_REFUSED" in shown and "23514" in shown
