"""Two workers, one SIGKILLed mid-run (reliability scenario 6, in part): its
partitions move to the survivor, run state recovers from the changelog, no
run is finalized twice and every timeout stub keeps one identity."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from judgeflow import workload
from schemas import ReconciliationRevision
from streams.topics import TopicNames
from tests.conftest import MEASURED
from tests.support import Worker, consume_until, create_topics, produce, unique_prefix

pytestmark = pytest.mark.integration


def test_killing_one_of_two_workers_finalizes_every_run_once(kafka_bootstrap: str, tmp_path: Path) -> None:
    import random

    prefix = unique_prefix()
    names = TopicNames.with_prefix(prefix)
    create_topics(kafka_bootstrap, names)
    rng = random.Random(66)
    rubric = workload.rubric(workload.stable_id("rubric", prefix))
    rid = rubric["rubric_version_id"]
    records = [(names.rubrics, rid.encode(), json.dumps(rubric).encode())]
    n_runs = 60
    for i in range(n_runs):
        run_id = workload.stable_id("run", prefix, i)
        run = workload.evaluation_run(run_id, rubric_id=rid, timeout_s=4.0)
        records.append((names.runs, run_id.encode(), json.dumps(run).encode()))
        for judge in workload.JUDGE_MODELS[:2]:  # the third judge never answers: a stub per run
            doc = workload.judge_output(rng, run_id, judge, rubric_id=rid, submission_id=run["submission_id"])
            records.append((names.judge_outputs, run_id.encode(), json.dumps(doc).encode()))

    def finals(rs: list) -> dict[str, set[str]]:
        out: dict[str, set[str]] = defaultdict(set)
        for r in rs:
            if r.topic == names.reconciled:
                rev = ReconciliationRevision.model_validate_json(r.value)
                if rev.status == "final":
                    out[rev.evaluation_run_id].add(rev.event_id)
        return out

    env = {"JUDGEFLOW_TIMER_INTERVAL": "0.5"}
    a = Worker(kafka_bootstrap, prefix, tmp_path / "a", **env).start()
    with Worker(kafka_bootstrap, prefix, tmp_path / "b", **env) as b:
        half = 1 + (n_runs // 2) * 3  # the rubric and whole runs: no judge's output is published late
        produce(kafka_bootstrap, records[:half])
        consume_until(kafka_bootstrap, [names.reconciled], lambda rs: len(finals(rs)) >= 5, timeout=120, worker=b)
        a.kill()
        produce(kafka_bootstrap, records[half:])
        got = consume_until(kafka_bootstrap, [names.reconciled, names.judge_outputs],
                            lambda rs: len(finals(rs)) >= n_runs, timeout=240, worker=b)  # fmt: skip
        assert b.alive(), b.log()[-3000:]
    by_run = finals(got)
    assert len(by_run) == n_runs
    assert all(len(ids) == 1 for ids in by_run.values()), "a run was finalized with two different revisions"
    stubs = [json.loads(r.value) for r in got if r.topic == names.judge_outputs and b'"status":"failed"' in r.value]
    stub_ids = {s["judge_run_id"] for s in stubs}
    assert len(stub_ids) == n_runs  # one identity per missing judge, whoever emitted it
    MEASURED["worker failover"] = (
        f"{n_runs} runs over 2 workers, one SIGKILLed: every run final once; "
        f"{len(stubs)} stub records for {len(stub_ids)} stub identities"
    )
