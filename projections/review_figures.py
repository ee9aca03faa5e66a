"""What the reviews say, with their uncertainty: the figures `judgeflow report`, the dashboard and the demo show.

- Overturn rate of the pipeline's verdict and Cohen's kappa judge vs human, per source. Only a claim's first
  review counts; the `audit` row is the unbiased estimate for the claims routed `done`, the `routed` row is
  about the claims the policy already doubted. The overturn rate has a 95 % Wilson interval (scipy), kappa a
  95 % bootstrap interval (`projections.agreement`).
- Agreement between people: kappa of the first two reviewers of each claim reviewed twice.
- Anchoring: how often the reviewer's final verdict differs from the one chosen before the reveal.
- Throughput per reviewer: reviews, median seconds per review and the items per hour that makes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import psycopg
from scipy.stats import binomtest

from projections.agreement import Agreement, cohen_kappa

VERDICTS = ("pass", "fail", "unclear")
BY_SOURCE = "Reviews against the pipeline's verdict, by source (audit: the unbiased estimate for `done`)"
PEOPLE = "Agreement between reviewers (overlap items) and anchoring"
THROUGHPUT_TITLE = "Reviewer throughput"
RUNS = "Evaluation runs reviewed against their reconciled score"
RUN_FIGURES = """SELECT count(*), count(*) FILTER (WHERE delta <> 0), avg(abs(delta)), max(abs(delta))
FROM evaluation_reviewed_scores WHERE reconciled_overall IS NOT NULL"""

FIRST_REVIEWS = """
SELECT DISTINCT ON (r.claim_id) r.claim_id, coalesce(r.source, 'routed') AS source, r.final_verdict,
       coalesce(c.final_verdict, c.verdict) AS decided
FROM reviews r JOIN checks c USING (claim_id)
WHERE coalesce(r.source, 'routed') <> 'overlap'
ORDER BY r.claim_id, r.created_at, r.review_id"""

REVIEWER_PAIRS = "SELECT claim_id, verdict_a, verdict_b FROM review_overlap_pairs"

ANCHORING = """SELECT coalesce(sum(reviewed), 0), coalesce(sum(changed_after_reveal), 0) FROM review_anchoring"""

THROUGHPUT = """
SELECT reviewer, count(*) AS reviews,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY review_seconds) AS median_seconds
FROM reviews WHERE review_seconds IS NOT NULL GROUP BY reviewer ORDER BY reviewer"""


@dataclass(frozen=True)
class Overturns:
    """The first reviews of one source against the pipeline's verdict."""

    source: str
    reviewed: int
    overturned: int
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    kappa: Agreement


def wilson(k: int, n: int) -> tuple[float | None, float | None]:
    """The 95 % Wilson interval of k successes in n trials; (None, None) without trials."""
    if n == 0:
        return None, None
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def overturns(conn: psycopg.Connection) -> list[Overturns]:
    units: dict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    for claim, source, human, decided in conn.execute(FIRST_REVIEWS).fetchall():
        units[source][claim] = {"judge": decided, "human": human} if decided else {"human": human}
    out = []
    for source in sorted(units):
        rated = units[source]
        n = len(rated)
        k = sum(u.get("judge") != u["human"] for u in rated.values())
        low, high = wilson(k, n)
        kappa = cohen_kappa(rated, VERDICTS, "judge", "human")
        out.append(Overturns(source, n, k, k / n if n else None, low, high, kappa))
    return out


def between_reviewers(conn: psycopg.Connection) -> Agreement:
    units = {claim: {"first": a, "second": b} for claim, a, b in conn.execute(REVIEWER_PAIRS).fetchall()}
    return cohen_kappa(units, VERDICTS, "first", "second")


def anchoring(conn: psycopg.Connection) -> tuple[int, int]:
    """(reviews with a blind choice, of which the final verdict differs from it)."""
    row = conn.execute(ANCHORING).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def throughput(conn: psycopg.Connection) -> list[tuple[str, int, float | None, float | None]]:
    """(reviewer, timed reviews, median seconds per review, items per hour at that median)."""
    return [
        (reviewer, int(n), median, 3600.0 / median if median else None)
        for reviewer, n, median in conn.execute(THROUGHPUT).fetchall()
    ]


def review_sections(conn: psycopg.Connection) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """The report's sections about reviews, as (column names, rows)."""
    rows: list[tuple[Any, ...]] = []
    for o in overturns(conn):
        rows.append((o.source, o.reviewed, o.overturned, _pct(o.rate), _ci(o.ci_low, o.ci_high), _num(o.kappa.value),
                     _ci(o.kappa.ci_low, o.kappa.ci_high, pct=False)))  # fmt: skip
    people = between_reviewers(conn)
    seen, changed = anchoring(conn)
    return {
        BY_SOURCE: (
            ["source", "reviewed", "overturned", "overturn rate", "95% CI", "kappa judge vs human", "95% CI"],
            rows,
        ),
        PEOPLE: (
            ["figure", "value", "95% CI", "on"],
            [
                (
                    "kappa, first vs second reviewer",
                    _num(people.value),
                    _ci(people.ci_low, people.ci_high, pct=False),
                    f"{people.units} claims reviewed twice",
                ),
                (
                    "final verdict changed after the reveal",
                    _pct(changed / seen if seen else None),
                    _ci(*wilson(changed, seen)),
                    f"{seen} reviews with a blind choice",
                ),
            ],  # fmt: skip
        ),
        RUNS: (
            ["runs reviewed", "overall score changed", "95% CI", "mean |change|", "largest |change|"],
            [_run_row(conn)],
        ),
        THROUGHPUT_TITLE: (
            ["reviewer", "timed reviews", "median seconds", "items per hour"],
            [(r, n, _num(m, 1), _num(h, 1)) for r, n, m, h in throughput(conn)],
        ),
    }


def _run_row(conn: psycopg.Connection) -> tuple[Any, ...]:
    """How often a person's accepted overall score differs from the judges' reconciled one, and by how much."""
    row = conn.execute(RUN_FIGURES).fetchone()
    reviewed, changed, mean, largest = row if row else (0, 0, None, None)
    return (
        reviewed,
        _pct(changed / reviewed if reviewed else None),
        _ci(*wilson(changed, reviewed)),
        _num(None if mean is None else float(mean), 1),
        "undefined" if largest is None else str(largest),
    )


def _num(value: float | None, digits: int = 3) -> str:
    return "undefined" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "undefined" if value is None else f"{100 * value:.1f}%"


def _ci(low: float | None, high: float | None, pct: bool = True) -> str:
    if low is None or high is None:
        return "undefined"
    return f"[{100 * low:.1f}%, {100 * high:.1f}%]" if pct else f"[{low:.2f}, {high:.2f}]"
