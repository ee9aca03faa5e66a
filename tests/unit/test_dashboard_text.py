"""The dashboard's and the report's plain-text pieces, without a database."""

from __future__ import annotations

from judgeflow.dashboard import EVALUATION_RUN_COLUMNS, evaluation_run_cells


def test_a_final_run_shows_revision_notice_contradictions_and_route() -> None:
    run = {"evaluation_run_id": "r1", "status": "final", "revision": 4, "judges_in": "2/3", "score": 71.0,
           "contradictions": ["correctness (spread 41)", "process (spread 33)"], "notice": "1 judge unavailable",
           "route": "human_review", "route_reason": "contradictions"}  # fmt: skip
    cells = evaluation_run_cells(run)
    assert len(cells) == len(EVALUATION_RUN_COLUMNS)
    assert cells == ("r1", "final (rev 4)", "2/3", "71", "correctness (spread 41), process (spread 33)",
                     "1 judge unavailable", "human_review (contradictions)")  # fmt: skip


def test_a_run_without_a_revision_or_route_says_so() -> None:
    run = {"evaluation_run_id": "r2", "status": "running", "revision": None, "judges_in": None, "score": None,
           "contradictions": [], "notice": None, "route": None, "route_reason": None}  # fmt: skip
    assert evaluation_run_cells(run) == ("r2", "running", "—", "—", "none", "—", "—")
