"""Checklist 12's signal checks measured on a labelled corpus (tests/data/signals.jsonl): precision and recall
of each code, on the part the rules were tuned on and on a held-out part written before any tuning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas.specificity import signal_codes

CORPUS = [json.loads(line) for line in (Path(__file__).parents[1] / "data" / "signals.jsonl").read_text().splitlines()]
CODES = ("GENERIC_SIGNAL", "SIGNAL_NOT_CONCRETE", "SIGNAL_RESTATES_SCORE")


def scores(rows: list[dict[str, object]], code: str) -> tuple[float, float, int]:
    """Precision, recall and support of `code` on `rows` (1.0 when nothing was predicted / expected)."""
    tp = fp = fn = 0
    for row in rows:
        got, want = code in signal_codes(str(row["text"])), code in row["codes"]  # type: ignore[operator]
        tp, fp, fn = tp + (got and want), fp + (got and not want), fn + (want and not got)
    return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 1.0), tp + fn


def table() -> dict[str, dict[str, tuple[float, float, int]]]:
    parts = {"tuned": [r for r in CORPUS if r["split"] == "dev"],
             "held-out": [r for r in CORPUS if r["split"] == "held_out"], "all": CORPUS}  # fmt: skip
    return {name: {code: scores(rows, code) for code in CODES} for name, rows in parts.items()}


def test_corpus_is_big_enough_and_keeps_a_fifth_held_out() -> None:
    held = sum(r["split"] == "held_out" for r in CORPUS)
    assert len(CORPUS) >= 60 and 0.15 <= held / len(CORPUS) <= 0.25
    assert all(set(r["codes"]) <= set(CODES) for r in CORPUS)


def test_precision_and_recall_of_each_code(capsys: pytest.CaptureFixture[str]) -> None:
    figures = table()
    with capsys.disabled():
        print(f"\n[measured] signal checks on {len(CORPUS)} labelled signals (precision / recall, support)")
        for part, by_code in figures.items():
            cells = ", ".join(f"{code} {p:.2f} / {r:.2f} ({n})" for code, (p, r, n) in by_code.items())
            print(f"[measured]   {part}: {cells}")
    for code, (precision, recall, _) in figures["all"].items():
        assert precision >= 0.9 and recall >= 0.9, (code, precision, recall)


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("Points to line 45 of app.py, where the null check is missing", []),  # "points to" is not a score
        ("The agent's work wasn't as careful as it should've been", ["SIGNAL_NOT_CONCRETE"]),  # apostrophes
        ("The scoring function compute_score() divides by zero on an empty list", []),  # an identifier
        ("Ran the suite: 3 of 5 integration tests still fail", []),  # a count of things, not a grade
        ("Earns a 7/10 for code quality", ["SIGNAL_RESTATES_SCORE", "SIGNAL_NOT_CONCRETE"]),
        ("Well done: the lock in worker.py is released in a finally block", []),  # stock phrase, concrete rest
        ("Good job overall, shows a good understanding of the problem", ["GENERIC_SIGNAL", "SIGNAL_NOT_CONCRETE"]),
    ],
)
def test_the_tricky_cases(text: str, codes: list[str]) -> None:
    assert signal_codes(text) == codes
