"""Judge agreement through Kafka and Postgres: the figures the projector stores equal the reference packages'
(`krippendorff`, scikit-learn's `cohen_kappa_score`) on the same data, per rubric, lane and judge pair; a
rebuild writes the same figures. Outputs and checks are admitted by the worker's own edge functions and
published to the validated topics the projector reads (the worker is not what is tested here)."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from judgeflow import workload
from projections.agreement_store import NO_RUBRIC
from projections.rebuild import rebuild
from streams.edge import SourceRef, screen_claim_check, screen_judge_output
from streams.topics import TopicNames
from tests.scaffold import Pipeline

pytestmark = pytest.mark.integration
RUNS = 6
CLAIMS = 12


def _alpha(by_unit: dict[str, dict[str, Any]], judges: list[str], level: str) -> float | None:
    """The reference package's alpha: judges in rows, units in columns, NaN where a judge did not code a unit."""
    codes = {"pass": 0.0, "fail": 1.0, "unclear": 2.0}
    matrix = [[float(codes.get(by[j], by[j])) if j in by else math.nan for by in by_unit.values()] for j in judges]
    value = krippendorff.alpha(reliability_data=np.array(matrix), level_of_measurement=level)
    return None if math.isnan(value) else float(value)


def _valid(names: TopicNames, screen: Any, topic: str, key: str, doc: dict[str, Any]) -> tuple[str, bytes, bytes]:
    [valid] = screen(json.dumps(doc).encode(), SourceRef(topic, 0, 0, key.encode()))
    assert valid.role in ("judge_outputs_valid", "checks_valid")
    return getattr(names, valid.role), valid.key, valid.value


def test_stored_agreement_equals_the_reference_packages(pipeline: Pipeline) -> None:
    prefix, names = pipeline.prefix, pipeline.names
    rid = workload.stable_id("rubric", prefix)
    rng = random.Random(16)
    judges = list(workload.JUDGE_MODELS)
    records: list[tuple[str, bytes | None, bytes]] = [
        (names.rubrics, rid.encode(), json.dumps(workload.rubric(rid)).encode())
    ]
    lanes: dict[str, dict[str, dict[str, Any]]] = {}  # lane -> run -> judge -> score
    for i in range(RUNS):
        run_id = workload.stable_id("run", prefix, i)
        # three judges on most runs, two on the last: a unit with a missing value
        in_run = judges if i < RUNS - 1 else judges[:2]
        records.append(
            (
                names.runs,
                run_id.encode(),
                json.dumps(workload.evaluation_run(run_id, rubric_id=rid, judges=tuple(in_run))).encode(),
            )
        )
        for model in in_run:
            doc = workload.judge_output(rng, run_id, model, rubric_id=rid)
            for lane in doc["lane_scores"]:
                lanes.setdefault(lane["lane_key"], {}).setdefault(run_id, {})[model] = lane["lane_score"]
            records.append(_valid(names, screen_judge_output, names.judge_outputs, run_id, doc))
    claims: dict[str | None, dict[str, dict[str, Any]]] = {rid: {}, None: {}}  # rubric -> claim -> judge -> verdict
    pair = ("faithfulness-judge-v1", "faithfulness-judge-v2")
    for i in range(CLAIMS):
        claim_id = f"{prefix}claim-{i}"
        rubric = rid if i % 3 else None  # every third claim checked without a rubric
        first = rng.choice(["pass", "pass", "fail", "unclear"])
        second = first if rng.random() < 0.6 else rng.choice(["pass", "fail", "unclear"])
        for judge, verdict in zip(pair, (first, second), strict=True):
            doc = workload.claim_check(rng, claim_id, judge, verdict=verdict)
            if rubric is not None:
                doc["rubric_version_id"] = rubric
            claims[rubric].setdefault(claim_id, {})[judge] = verdict
            records.append(_valid(names, screen_claim_check, names.checks, claim_id, doc))
    pipeline.send(records)

    def pending_done() -> bool:
        with pipeline.connect() as conn:
            row = conn.execute("SELECT (SELECT count(*) FROM judge_agreement_pending), "
                               "(SELECT count(*) FROM judge_agreement)").fetchone()  # fmt: skip
        return row is not None and row[0] == 0 and row[1] > 0

    with pipeline.projector(JUDGEFLOW_AGREEMENT_SECONDS="0") as projector:
        pipeline.wait_projected(projector, 120, "projector at the end offsets with every rubric's agreement refreshed",
                                also=pending_done)  # fmt: skip

    def stored() -> dict[tuple[str, str, str, str], tuple[Any, ...]]:
        with pipeline.connect() as conn:
            rows = conn.execute("SELECT rubric, coalesce(lane_key, ''), judges, statistic, value, ci_low, ci_high, "
                                "units, pairable_values FROM judge_agreement_by_rubric").fetchall()  # fmt: skip
            names_ = dict(conn.execute("SELECT id::text, name FROM rubrics").fetchall())
        assert names_[rid] == "agentic-coding-v3"
        return {(r, lane, j, s): rest for r, lane, j, s, *rest in rows}

    figures = stored()
    name = "agentic-coding-v3"
    checked = 0
    for lane, by_run in lanes.items():
        value, low, high, units, values = figures[(name, lane, "all judges", "alpha_interval")]
        assert value == pytest.approx(_alpha(by_run, judges, "interval"), abs=1e-9)
        assert (units, values) == (RUNS, 3 * RUNS - 1) and low <= value <= high
        for i, a in enumerate(sorted(judges)):  # a pair is named in sorted order
            for b in sorted(judges)[i + 1 :]:
                got = figures[(name, lane, f"{a} / {b}", "alpha_interval")][0]
                assert got == pytest.approx(_alpha(by_run, [a, b], "interval"), abs=1e-9)
                checked += 1
    for rubric, label in ((rid, name), (None, NO_RUBRIC)):
        by_claim = claims[rubric]
        all_value = figures[(label, "", "all judges", "alpha_nominal")][0]
        reference = _alpha(by_claim, list(pair), "nominal")
        assert all_value == (None if reference is None else pytest.approx(reference, abs=1e-9))
        kappa, _, _, units, values = figures[(label, "", " / ".join(pair), "kappa")]
        a = [by_claim[c][pair[0]] for c in by_claim]
        b = [by_claim[c][pair[1]] for c in by_claim]
        assert kappa == pytest.approx(cohen_kappa_score(a, b), abs=1e-9)
        assert (units, values) == (len(by_claim), 2 * len(by_claim))
        checked += 2
    assert checked == len(lanes) * 3 + 4

    rebuild(pipeline.bootstrap, pipeline.database_url, names, schema=pipeline.schema)
    assert stored() == figures
