"""Contract cost: `parse_judge_output` calls per second in this process, by output size,
and how the worker's pure per-event work and the projected rows grow with it."""

from __future__ import annotations

import functools
import json
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from judgeflow import workload
from projections.rows import Record, Rows, project
from schemas import EvaluationRunStarted, RubricVersion, parse_evaluation_run, parse_judge_output, parse_rubric
from schemas.decoding import MAX_PAYLOAD_BYTES
from streams import runs
from streams.edge import SourceRef, screen_judge_output
from streams.stage import Inbound
from streams.topics import TopicNames

SIZES: dict[str, tuple[int, int, int]] = {"small": (1, 1, 0), "typical": (3, 4, 2), "large": (10, 10, 2)}
"""name -> (lanes, dimensions per lane, evidence refs per dimension)."""


@dataclass
class SizeCost:
    size: str
    bytes: int
    parse_us: float
    parse_per_s: float
    worker_us: float
    rows: int


def _lanes(lanes: int, dims: int) -> dict[str, list[tuple[str, float]]]:
    letters = "abcdefghij"  # keys are [a-z_]+
    return {f"lane_{letters[i]}": [(f"dim_{letters[i]}_{letters[j]}", 1.0 / dims) for j in range(dims)]
            for i in range(lanes)}  # fmt: skip


def _timed(fn: object, budget_s: float) -> float:
    """Mean seconds per call of `fn()`, calling it for about `budget_s`."""
    assert callable(fn)
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= budget_s and calls >= 50:
            return elapsed / calls


def _worker_step(raw: bytes, src: SourceRef, started: EvaluationRunStarted, rubric: RubricVersion) -> None:
    """The worker's pure work for one output of a run: validate, reconcile, store the state."""
    now = datetime.now(UTC)
    stage = runs.RunStage(lambda _r: rubric, clock=lambda: now, retention=timedelta(days=7),
                          max_payload_bytes=MAX_PAYLOAD_BYTES)  # fmt: skip
    state, _ = runs.on_run(runs.RunState.new(started.evaluation_run_id, 0, now), started, lambda _r: rubric, now)
    stage.handle(Inbound("judge_outputs", src.key, raw, src), state.model_dump(mode="json"))


def measure(budget_s: float = 1.0) -> list[SizeCost]:
    rng = random.Random(1)
    names = TopicNames()
    roles = {v: k for k, v in names.all().items()}
    results = []
    for size, (lanes, dims, refs) in SIZES.items():
        lane_spec = _lanes(lanes, dims)
        rub = workload.rubric(workload.stable_id("bench-contract", size))
        rub["lanes"] = [{"lane_key": k, "weight": 1.0, "dimensions": [{"dimension_key": d, "weight": w}
                        for d, w in v]} for k, v in lane_spec.items()]  # fmt: skip
        rid = rub["rubric_version_id"]
        run_id = workload.stable_id("bench-contract-run", size)
        run = workload.evaluation_run(run_id, rubric_id=rid, timeout_s=3600.0)
        doc = workload.judge_output(rng, run_id, workload.JUDGE_MODELS[0], rubric_id=rid, lanes=lane_spec,
                                    submission_id=run["submission_id"], evidence_per_dimension=refs)  # fmt: skip
        raw = json.dumps(doc).encode()
        parse_s = _timed(functools.partial(parse_judge_output, raw), budget_s)
        rubric = parse_rubric(json.dumps(rub).encode())
        started = parse_evaluation_run(json.dumps(run).encode())
        src = SourceRef(names.judge_outputs, 0, 0, run_id.encode())

        worker_s = _timed(functools.partial(_worker_step, raw, src, started, rubric), budget_s)
        rows = Rows()
        project(Record(names.judge_outputs, 0, 0, run_id.encode(), raw, (), 0), names, roles, rows)
        valid = screen_judge_output(raw, src)[0]
        project(Record(names.judge_outputs_valid, 0, 0, valid.key, valid.value, tuple(valid.headers), 0),
                names, roles, rows)  # fmt: skip
        results.append(SizeCost(size, len(raw), parse_s * 1e6, 1 / parse_s, worker_s * 1e6, rows.count()))
    return results
