"""Contract cost: `parse_judge_output` calls per second in this process, by output size,
and how the worker's pure per-event work and the projected rows grow with it.

Beside the public parser (the fast path) each size also times, in the same run and
interleaved with it, the reference path (stdlib decode + python-mode validation) and
the floor: pydantic-core strict `validate_json` of the same bytes into the same
fields with no validators (the contract's own core schema with every validator
function removed; `floor_plain_us` also drops the field constraints).
"""

from __future__ import annotations

import functools
import json
import random
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_core import SchemaValidator

from judgeflow import workload
from projections.rows import Record, Rows, project
from schemas import (
    EvaluationRunStarted,
    JudgeOutput,
    RubricVersion,
    parse_evaluation_run,
    parse_judge_output,
    parse_rubric,
)
from schemas.decoding import MAX_PAYLOAD_BYTES
from schemas.parse import reference_validate_judge_output
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
    reference_us: float = 0.0
    floor_us: float = 0.0
    floor_plain_us: float = 0.0
    fast_us: float = 0.0
    fast_vs_floor: float = 0.0
    """Median over rounds of (fast path / floor) timed back to back."""


def _lanes(lanes: int, dims: int) -> dict[str, list[tuple[str, float]]]:
    letters = "abcdefghij"  # keys are [a-z_]+
    return {
        f"lane_{letters[i]}": [(f"dim_{letters[i]}_{letters[j]}", 1.0 / dims) for j in range(dims)]
        for i in range(lanes)
    }


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


_CONSTRAINTS = frozenset({"pattern", "min_length", "max_length", "ge", "le", "gt", "lt"})


def _without_validators(schema: Any, *, constraints: bool) -> Any:
    """A core schema with every validator function unwrapped (and, optionally, no constraints)."""
    if isinstance(schema, list):
        return [_without_validators(s, constraints=constraints) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("type") in ("function-after", "function-before", "function-wrap", "function-plain"):
        return _without_validators(schema["schema"], constraints=constraints)
    return {
        k: v if k in ("cls", "config", "metadata", "serialization") else _without_validators(v, constraints=constraints)
        for k, v in schema.items()
        if constraints or k not in _CONSTRAINTS
    }


def floor_validators(model: type[Any] = JudgeOutput) -> tuple[SchemaValidator, SchemaValidator]:
    """(same fields and constraints, no validators; same fields, plain types) for `model`."""
    schema = model.__pydantic_core_schema__
    return tuple(  # type: ignore[return-value]
        SchemaValidator(_without_validators(schema, constraints=keep), _config(schema)) for keep in (True, False)
    )


def _config(schema: dict[str, Any]) -> Any:
    while schema.get("type") != "model":
        schema = schema["schema"]
    return schema.get("config")


def _interleaved(fns: dict[str, Any], budget_s: float) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Per-call seconds of each function, timed in alternating rounds so that all of them see
    the same machine: the best round of each, and every round (for per-round ratios, which a
    busy machine disturbs far less than it disturbs times taken seconds apart)."""
    rounds: dict[str, list[float]] = {name: [] for name in fns}
    start = time.perf_counter()
    while time.perf_counter() - start < budget_s or len(rounds[next(iter(fns))]) < 5:
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(20):
                fn()
            rounds[name].append((time.perf_counter() - t0) / 20)
    return {name: min(times) for name, times in rounds.items()}, rounds


def summary(costs: list[SizeCost]) -> dict[str, float]:
    """The typical size's contract figures as result keys (the ratio's target: <= 1.5, goal <= 1.2)."""
    typical = next(c for c in costs if c.size == "typical")
    return {
        "contract_reference_us_typical": typical.reference_us,
        "contract_fast_us_typical": typical.fast_us,
        "contract_floor_us_typical": typical.floor_us,
        "contract_floor_plain_us_typical": typical.floor_plain_us,
        "contract_typical_vs_floor": typical.fast_vs_floor,
    }


def _worker_step(raw: bytes, src: SourceRef, started: EvaluationRunStarted, rubric: RubricVersion) -> None:
    """The worker's pure work for one output of a run: validate, reconcile, store the state."""
    now = datetime.now(UTC)
    stage = runs.RunStage(
        lambda _r: rubric, clock=lambda: now, retention=timedelta(days=7), max_payload_bytes=MAX_PAYLOAD_BYTES
    )
    state, _ = runs.on_run(runs.RunState.new(started.evaluation_run_id, 0, now), started, lambda _r: rubric, now)
    stage.handle(Inbound("judge_outputs", src.key, raw, src), state.model_dump(mode="json"))


def measure(budget_s: float = 1.0) -> list[SizeCost]:
    rng = random.Random(1)
    floor, floor_plain = floor_validators()
    names = TopicNames()
    roles = {v: k for k, v in names.all().items()}
    results = []
    for size, (lanes, dims, refs) in SIZES.items():
        lane_spec = _lanes(lanes, dims)
        rub = workload.rubric(workload.stable_id("bench-contract", size))
        rub["lanes"] = [
            {"lane_key": k, "weight": 1.0, "dimensions": [{"dimension_key": d, "weight": w} for d, w in v]}
            for k, v in lane_spec.items()
        ]
        rid = rub["rubric_version_id"]
        run_id = workload.stable_id("bench-contract-run", size)
        run = workload.evaluation_run(run_id, rubric_id=rid, timeout_s=3600.0)
        doc = workload.judge_output(
            rng,
            run_id,
            workload.JUDGE_MODELS[0],
            rubric_id=rid,
            lanes=lane_spec,
            submission_id=run["submission_id"],
            evidence_per_dimension=refs,
        )
        raw = json.dumps(doc).encode()
        parse_s = _timed(functools.partial(parse_judge_output, raw), budget_s)
        rubric = parse_rubric(json.dumps(rub).encode())
        started = parse_evaluation_run(json.dumps(run).encode())
        src = SourceRef(names.judge_outputs, 0, 0, run_id.encode())

        worker_s = _timed(functools.partial(_worker_step, raw, src, started, rubric), budget_s)
        rows = Rows()
        project(Record(names.judge_outputs, 0, 0, run_id.encode(), raw, (), 0), names, roles, rows)
        valid = screen_judge_output(raw, src)[0]
        project(
            Record(names.judge_outputs_valid, 0, 0, valid.key, valid.value, tuple(valid.headers), 0), names, roles, rows
        )
        best, rounds = _interleaved(
            {
                "fast": functools.partial(parse_judge_output, raw),
                "reference": functools.partial(reference_validate_judge_output, raw),
                "floor": functools.partial(floor.validate_json, raw),
                "floor_plain": functools.partial(floor_plain.validate_json, raw),
            },
            budget_s,
        )
        results.append(
            SizeCost(
                size,
                len(raw),
                parse_s * 1e6,
                1 / parse_s,
                worker_s * 1e6,
                rows.count(),
                reference_us=best["reference"] * 1e6,
                floor_us=best["floor"] * 1e6,
                floor_plain_us=best["floor_plain"] * 1e6,
                fast_us=best["fast"] * 1e6,
                fast_vs_floor=statistics.median(f / g for f, g in zip(rounds["fast"], rounds["floor"], strict=True)),
            )
        )
    return results
