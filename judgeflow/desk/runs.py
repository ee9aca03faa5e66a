"""Evaluation runs at the desk: what a reviewer sees of a run routed to human review, before and after choosing,
and the `RunReview` a submit publishes.

Blind first, as for claims: the item shows the run's lanes, which of them the judges contradict each other on,
the routing reason and each judge's own words (positive signal, primary weakness, confidence reasoning); never
a score. The reviewer gives a score per lane and overall; then the judges' lane scores, the reconciled ones and
the reconciled overall are shown, and the reviewer accepts or changes the final scores. A final overall score
that differs from the reconciled one needs a note (the run's counterpart of overturning a claim's verdict).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from judgeflow.desk.errors import DeskError
from streams.envelope import iso

FINAL = """SELECT evaluation_run_id, submission_id, final_overall_score, reconciled_lane_scores, lane_scores_by_judge,
has_contradictions, contradiction_details, emitted_at FROM evaluation_reconciled_revisions
WHERE evaluation_run_id = %s ORDER BY (status = 'final') DESC, revision DESC LIMIT 1"""
ROUTED = """SELECT reason FROM run_review_items WHERE evaluation_run_id = %s"""
JUDGES = """SELECT judge_model, status, positive_signal, primary_weakness, confidence_reasoning, confidence,
overall_score FROM judge_outputs WHERE evaluation_run_id = %s ORDER BY judge_model, judge_run_id"""


def check_scores(lanes: list[str], lane_scores: object, overall: object) -> tuple[dict[str, int], int]:
    """A score from 0 to 100 (an integer) for every lane of the run and overall; INVALID_VERDICT otherwise."""
    if not isinstance(lane_scores, dict) or sorted(lane_scores) != sorted(lanes):
        raise DeskError("INVALID_VERDICT", f"lane_scores must give a score for each lane: {', '.join(lanes)}")
    scores = {**lane_scores, "overall": overall}
    for name, value in scores.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
            raise DeskError("INVALID_VERDICT", f"score of {name} must be an integer from 0 to 100, not {value!r}")
    return {k: int(v) for k, v in lane_scores.items()}, int(overall)  # type: ignore[call-overload]


async def _final(conn: psycopg.AsyncConnection[Any], run_id: str) -> dict[str, Any]:
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(FINAL, (run_id,))
    return await cur.fetchone() or {}


async def reconciled(conn: psycopg.AsyncConnection[Any], run_id: str) -> tuple[list[str], int | None]:
    """The run's lanes and its reconciled overall score, from one read of its latest revision."""
    final = await _final(conn, run_id)
    return sorted(final.get("reconciled_lane_scores") or {}), _whole(final.get("final_overall_score"))


def _whole(score: Any) -> int | None:
    """A reconciled score (NUMERIC(5,2) in Postgres, a whole number by reconciliation) as JSON can carry it."""
    return None if score is None else round(score)


async def blind_run(conn: psycopg.AsyncConnection[Any], run_id: str) -> dict[str, Any]:
    """What the reviewer sees first of a run: lanes, contradicted lanes, the routing reason, the judges' words."""
    final = await _final(conn, run_id)
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(ROUTED, (run_id,))
    routed = await cur.fetchone() or {}
    await cur.execute(JUDGES, (run_id,))
    judges = await cur.fetchall()
    return {
        "kind": "run",
        "source": "routed",
        "evaluation_run_id": run_id,
        "submission_id": str(final.get("submission_id") or ""),
        "reason": routed.get("reason"),
        "lanes": sorted(final.get("reconciled_lane_scores") or {}),
        "contradicted_lanes": sorted({d["lane_key"] for d in final.get("contradiction_details") or []}),
        "judges": [
            {
                "judge_id": j["judge_model"],
                "status": j["status"],
                "positive_signal": j["positive_signal"],
                "primary_weakness": j["primary_weakness"],
                "confidence_reasoning": j["confidence_reasoning"],
            }
            for j in judges
        ],
        "routed_at": iso(final["emitted_at"]) if final.get("emitted_at") else None,
    }


async def reveal_run(conn: psycopg.AsyncConnection[Any], run_id: str, blind: dict[str, Any]) -> dict[str, Any]:
    """After the blind choice: each judge's lane scores, the reconciled lane scores and overall."""
    final = await _final(conn, run_id)
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(JUDGES, (run_id,))
    judges = {j["judge_model"]: j for j in await cur.fetchall()}
    by_judge: dict[str, dict[str, int]] = final.get("lane_scores_by_judge") or {}
    return {
        "blind": blind,
        "judges": [
            {
                "judge_id": model,
                "lane_scores": lanes,
                "overall_score": (judges.get(model) or {}).get("overall_score"),
                "confidence": (judges.get(model) or {}).get("confidence"),
            }
            for model, lanes in sorted(by_judge.items())
        ],
        "reconciled": {
            "lane_scores": final.get("reconciled_lane_scores") or {},
            "overall": _whole(final.get("final_overall_score")),
            "contradictions": final.get("contradiction_details") or [],
        },
    }


def run_review(lease: dict[str, Any], review_id: str, scores: tuple[dict[str, int], int], note: str | None) -> dict:
    """The `RunReview` 1.0 a submit publishes (keyed by the run id)."""
    blind = lease["blind_scores"] or {}
    lane_scores, overall = scores
    return {
        "schema_version": "1.0",
        "review_id": review_id,
        "evaluation_run_id": str(lease["evaluation_run_id"]),
        "reviewer": lease["reviewer"],
        "lane_scores": lane_scores,
        "final_overall_score": overall,
        "notes": note,
        "created_at": iso(datetime.now(UTC)),
        "review_seconds": round(min(float(lease["seconds"]), 86_400.0), 3),
        "blind_lane_scores": blind.get("lane_scores"),
        "blind_overall_score": blind.get("overall"),
        "source": "routed",
        "lease_id": lease["lease_id"],
    }
