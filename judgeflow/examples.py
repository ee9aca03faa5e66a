"""One complete, valid example document per input topic: what a newcomer copies first.

`judgeflow produce --example TOPIC` prints one, and docs/contract.md shows the same documents (a test keeps
them equal and parses each). They belong together: the run names the rubric, the judge output the run and
the rubric, the review the claim of the check, so publishing all five in that order exercises the pipeline.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from judgeflow import workload

TOPICS = ("judge.rubrics", "evaluation.runs", "judge.outputs", "judge.checks", "reviews")
"""The input topics, in the order their examples are best published."""


def examples() -> dict[str, dict[str, Any]]:
    """The five example documents by (unprefixed) topic; the same on every call."""
    rubric_id = workload.stable_id("example", "rubric")
    run_id = workload.stable_id("example", "run")
    claim_id = workload.stable_id("example", "claim")
    rng = random.Random(16)
    run = workload.evaluation_run(run_id, rubric_id=rubric_id)
    output = workload.judge_output(
        rng,
        run_id,
        workload.JUDGE_MODELS[0],
        submission_id=run["submission_id"],
        rubric_id=rubric_id,
        with_adjustment=True,
        with_flag=True,
    )
    check = workload.claim_check(rng, claim_id, verdict="pass", score=0.92, confidence=0.99)
    review = {
        "schema_version": "1.0",
        "review_id": workload.stable_id("example", "review"),
        "claim_id": claim_id,
        "reviewer": "reviewer-1",
        "final_verdict": "pass",
        "notes": "The filing's Q3 figure matches the claim.",
        "created_at": workload.iso(workload.EPOCH + timedelta(hours=2)),
    }
    docs = (workload.rubric(rubric_id), run, output, check, review)
    return dict(zip(TOPICS, docs, strict=True))
