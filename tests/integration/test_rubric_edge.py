"""The rubric at the edge on the real broker and database (DESIGN decision 13): a judge output its run's rubric
refuses is dead-lettered with the bytes and key received, and its judge counts as failed at once, so the run
reconciles the other judges without waiting for a timeout; no `judge_outputs` row carries the refused scores,
whether the output came after its run or was held for it. Rubric and run records under a key that is not their
id are dead-lettered and used nowhere. Notices name failed judges only."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest

from judgeflow import workload
from schemas import InvalidEvent, ReconciliationRevision
from tests.scaffold import Pipeline
from tests.support import consume_until

pytestmark = pytest.mark.integration


def test_refused_output_is_its_judges_failure_and_keyed_records_are_used_nowhere(pipeline: Pipeline) -> None:
    prefix, names = pipeline.prefix, pipeline.names
    rubric = workload.rubric(workload.stable_id("rubric", prefix))
    rid = rubric["rubric_version_id"]
    after, held = workload.stable_id("run", prefix, "after"), workload.stable_id("run", prefix, "held")
    stray_rubric = workload.rubric(workload.stable_id("rubric", prefix, "stray"))
    stray_run = workload.evaluation_run(workload.stable_id("run", prefix, "stray"), rubric_id=rid)
    refused_model = workload.JUDGE_MODELS[1]

    def outputs(run_id: str, seed: int) -> list[dict[str, Any]]:
        docs = [workload.judge_output(random.Random(seed + i), run_id, m, rubric_id=rid)
                for i, m in enumerate(workload.JUDGE_MODELS)]  # fmt: skip
        docs[1]["lane_scores"][0]["lane_key"] = "vibes"  # not a lane of the rubric
        docs[1]["completed_lane_keys"][0] = "vibes"
        return docs

    def run(run_id: str) -> tuple[str, bytes, bytes]:
        doc = workload.evaluation_run(run_id, rubric_id=rid, timeout_s=3600)  # a timeout would take an hour
        return names.runs, run_id.encode(), json.dumps(doc).encode()

    def sent(run_id: str, docs: list[dict[str, Any]]) -> list[tuple[str, bytes, bytes]]:
        return [(names.judge_outputs, run_id.encode(), json.dumps(d).encode()) for d in docs]

    after_docs, held_docs = outputs(after, 10), outputs(held, 20)
    pipeline.send([
        (names.rubrics, rid.encode(), json.dumps(rubric).encode()),
        (names.rubrics, b"not-its-id", json.dumps(stray_rubric).encode()),
        (names.runs, b"not-its-id", json.dumps(stray_run).encode()),
        run(after), *sent(after, after_docs),  # validated with the rubric on arrival
        *sent(held, held_docs), run(held),  # held for their run, validated when it comes
    ])  # fmt: skip
    with pipeline.worker() as worker:

        def settled(rs: list[Any]) -> bool:
            finals = {ReconciliationRevision.model_validate_json(r.value).evaluation_run_id for r in rs
                      if r.topic == names.reconciled and b'"status":"final"' in r.value}  # fmt: skip
            return finals == {after, held} and sum(r.topic == names.invalid for r in rs) >= 4

        got = consume_until(pipeline.bootstrap, [names.reconciled, names.invalid, names.judge_outputs_valid], settled,
                            timeout=120, worker=worker)  # fmt: skip
        assert worker.alive(), worker.log()
    dead = [InvalidEvent.model_validate_json(r.value) for r in got if r.topic == names.invalid]
    by_key = {(d.contract, base64.b64decode(d.source_key_b64 or "").decode()): d for d in dead}
    assert {k: d.error_codes for k, d in by_key.items()} == {
        ("rubric", "not-its-id"): ["KEY_MISMATCH"], ("evaluation_run", "not-its-id"): ["KEY_MISMATCH"],
        ("judge_output", after): ["UNKNOWN_LANE_KEY"], ("judge_output", held): ["UNKNOWN_LANE_KEY"],
    }  # fmt: skip
    assert json.loads(base64.b64decode(by_key[("judge_output", held)].original_b64)) == held_docs[1]  # as received
    for run_id in (after, held):
        [final] = [ReconciliationRevision.model_validate_json(r.value) for r in got if r.topic == names.reconciled
                   and b'"status":"final"' in r.value and run_id.encode() in r.value]  # fmt: skip
        assert final.final_reason == "all_judges_in" and final.result.successful_judge_count == 2
        assert final.result.failed_judges == [refused_model]
        assert final.result.notice == f"1 judge unavailable: {refused_model} failed"

    pipeline.project_to_end()
    with pipeline.connect() as conn:
        rows = conn.execute("SELECT evaluation_run_id::text, judge_model, status, failure_reason, "
                            "(SELECT count(*) FROM judge_lane_scores l WHERE l.judge_output_id = o.id) "
                            "FROM judge_outputs o").fetchall()  # fmt: skip
        lanes = {k for (k,) in conn.execute("SELECT DISTINCT lane_key FROM judge_lane_scores")}
        rubrics = {str(r) for (r,) in conn.execute("SELECT id FROM rubrics")}
        runs = {str(r) for (r,) in conn.execute("SELECT id FROM evaluation_runs")}
    assert "vibes" not in lanes  # no row carries the refused scores
    for run_id in (after, held):
        mine = {(m, status, reason, n) for r, m, status, reason, n in rows if r == run_id}
        assert (refused_model, "failed", "UNKNOWN_LANE_KEY", 0) in mine and len(mine) == 3
    assert stray_rubric["rubric_version_id"] not in rubrics and stray_run["evaluation_run_id"] not in runs


def test_warnings_say_which_check_made_them_through_kafka_and_postgres(pipeline: Pipeline) -> None:
    """With its run's rubric known, a lane is checked against the rubric-weighted mean of its dimensions (±1),
    and a stock-phrase signal is flagged; both are stored per output with the check named in the message."""
    from schemas import parse_rubric

    prefix, names = pipeline.prefix, pipeline.names
    rubric = workload.rubric(workload.stable_id("rubric", prefix))
    rid, run_id = rubric["rubric_version_id"], workload.stable_id("run", prefix)
    doc = workload.judge_output(random.Random(5), run_id, "gpt-4o", rubric_id=rid)
    lane = doc["lane_scores"][0]
    weights = {d.dimension_key: d.weight for d in parse_rubric(rubric).lane(lane["lane_key"]).dimensions}  # type: ignore[union-attr]
    weighted = sum(d["score"] * weights[d["dimension_key"]] for d in lane["dimension_scores"]) / sum(weights.values())
    lane["lane_score"] = min(100, round(weighted) + 4)  # 3-4 points off: only the weighted (±1) check sees it
    doc["positive_signal"] = "Good job overall, shows a good understanding of the problem"
    run = workload.evaluation_run(run_id, rubric_id=rid, judges=("gpt-4o",))
    pipeline.send([(names.rubrics, rid.encode(), json.dumps(rubric).encode()),
                              (names.runs, run_id.encode(), json.dumps(run).encode()),
                              (names.judge_outputs, run_id.encode(), json.dumps(doc).encode())])  # fmt: skip
    with pipeline.worker() as worker:
        consume_until(
            pipeline.bootstrap, [names.judge_outputs_valid], lambda rs: len(rs) >= 1, timeout=90, worker=worker
        )
    pipeline.project_to_end()
    with pipeline.connect() as conn:
        warnings = {
            (code, message) for code, message in conn.execute("SELECT code, message FROM judge_output_warnings")
        }
    lane_warnings = [m for c, m in warnings if c == "LANE_SCORE_DIVERGES"]
    assert len(lane_warnings) == 1 and "weighted dimension mean" in lane_warnings[0]
    assert "unweighted" not in lane_warnings[0]
    assert {"GENERIC_SIGNAL", "SIGNAL_NOT_CONCRETE"} <= {c for c, _ in warnings}
