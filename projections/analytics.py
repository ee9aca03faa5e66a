"""Agreement statistics and the analyst report over the read-model views."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable
from typing import Any

import psycopg

from projections.review_figures import BY_SOURCE, THROUGHPUT_TITLE, review_sections


def cohen_kappa(pairs: Iterable[tuple[Hashable, Hashable]]) -> float | None:
    """Cohen's kappa of two raters' labels on the same items.

    None (never 0) when it is undefined: no pairs, or expected agreement 1
    (both raters always gave one and the same label)."""
    items = list(pairs)
    n = len(items)
    if n == 0:
        return None
    observed = sum(a == b for a, b in items) / n
    left = Counter(a for a, _ in items)
    right = Counter(b for _, b in items)
    expected = sum(left[label] * right[label] for label in left) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


STALE_ALERTS = "Open stale alerts"
STALE_ALERTS_QUERY = (
    "SELECT kind, subject, subject_id, reason, date_trunc('second', age) AS age FROM open_stale_alerts "
    "ORDER BY first_seen_at, subject, subject_id, kind LIMIT 50"
)
"""Work not moving (a run past its deadline, events held too long) whose subject is still not done; oldest first."""

AGREEMENT = "Agreement between judges (Krippendorff's alpha, Cohen's kappa; 95% bootstrap interval)"
AGREEMENT_COLUMNS = ("rubric", "kind", "lane", "judges", "statistic", "value", "95% CI", "units", "values")
AGREEMENT_QUERY = (
    "SELECT rubric_version_id::text, rubric, kind, lane_key, judges, statistic, value, ci_low, ci_high, units, "
    "pairable_values, refreshed_at FROM judge_agreement_by_rubric LIMIT %s"
)
UNDEFINED = "undefined"
"""How a figure that does not exist shows (no pairable units, every value the same): never as 0."""

PROJECTION_REJECTS = "Records the projector set aside (projection_rejects)"
PROJECTION_REJECTS_QUERY = (
    'SELECT topic, partition, "offset", code, sqlstate, error, received_at FROM projection_rejects '
    'ORDER BY received_at DESC, topic, partition, "offset" LIMIT 20'
)
"""Records whose rows Postgres refused or that could not be made into rows: their bytes are kept; the rest
of their partitions was projected. A `judgeflow rebuild` after the cause is fixed projects them."""

EMPTY_SECTIONS: dict[str, str] = {
    STALE_ALERTS: "no stale work",
    PROJECTION_REJECTS: "none",
    AGREEMENT: "no run or claim rated by two judges yet",
    BY_SOURCE: "no reviews yet",
    THROUGHPUT_TITLE: "no timed reviews yet (reviews from the review desk carry their time)",
}
"""What to print instead of an empty table, for the sections where empty is the news."""

REPORT_QUERIES: dict[str, str] = {
    STALE_ALERTS: STALE_ALERTS_QUERY,
    "Unsupported claims by source (top 20)": "SELECT * FROM unsupported_claims_by_source LIMIT 20",
    "Judge drift": "SELECT * FROM judge_drift ORDER BY judge_id",
    "Second-judge and human load per day": "SELECT * FROM routing_load_by_day",
    "Overturn rate by judge": "SELECT * FROM overturn_rate_by_judge ORDER BY judge_id",
    "Outputs without schema_version (must be 0)": "SELECT * FROM outputs_without_schema_version",
    "Runs whose output count differs from their judges": (
        "SELECT * FROM judge_outputs_per_run WHERE mismatch ORDER BY evaluation_run_id LIMIT 20"
    ),
    "Partial and failed outputs": "SELECT * FROM partial_and_failed_outputs LIMIT 20",
    "Lane-score divergences": "SELECT * FROM lane_score_divergences LIMIT 20",
    "Runs with a judge unavailable": "SELECT * FROM runs_with_unavailable_judges LIMIT 20",
    "Run status": "SELECT status, count(*) AS runs FROM evaluation_run_status GROUP BY status ORDER BY status",
    "Score distribution": (
        "SELECT judge_model, bucket, sum(outputs) AS outputs FROM score_distribution "
        "GROUP BY judge_model, bucket ORDER BY judge_model, bucket"
    ),
    "Dead letters by code": "SELECT * FROM dead_letters_by_code",
    PROJECTION_REJECTS: PROJECTION_REJECTS_QUERY,
}


def kappa_by_judge(conn: psycopg.Connection) -> list[tuple[str, int, float | None]]:
    pairs: dict[str, list[tuple[str, str]]] = {}
    for judge, judge_verdict, human in conn.execute(
        "SELECT judge_id, judge_verdict, human_verdict FROM judge_human_pairs"
    ).fetchall():
        pairs.setdefault(judge, []).append((judge_verdict, human))
    return [(judge, len(p), cohen_kappa(p)) for judge, p in sorted(pairs.items())]


def agreement(conn: psycopg.Connection, limit: int = 500) -> list[dict[str, Any]]:
    """The `judge_agreement_by_rubric` rows: per rubric, lane and judge pair (and all judges)."""
    keys = (
        "rubric_version_id",
        "rubric",
        "kind",
        "lane_key",
        "judges",
        "statistic",
        "value",
        "ci_low",
        "ci_high",
        "units",
        "pairable_values",
        "refreshed_at",
    )
    return [dict(zip(keys, row, strict=True)) for row in conn.execute(AGREEMENT_QUERY, [limit]).fetchall()]


def figure_text(value: float | None) -> str:
    return UNDEFINED if value is None else f"{value:.3f}"


def interval_text(low: float | None, high: float | None) -> str:
    return UNDEFINED if low is None or high is None else f"[{low:.2f}, {high:.2f}]"


def agreement_cells(row: dict[str, Any]) -> tuple[str, ...]:
    """One agreement row as the text the report and the dashboard show (in `AGREEMENT_COLUMNS` order)."""
    return (
        row["rubric"],
        row["kind"].replace("_", " "),
        row["lane_key"] or "—",
        row["judges"],
        row["statistic"].replace("_", " "),
        figure_text(row["value"]),
        interval_text(row["ci_low"], row["ci_high"]),
        str(row["units"]),
        str(row["pairable_values"]),
    )


def report(conn: psycopg.Connection) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """Every report section as (column names, rows)."""
    out: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = {}
    for title, query in REPORT_QUERIES.items():
        cur = conn.execute(query)
        out[title] = ([d.name for d in cur.description or []], list(cur.fetchall()))
    out["Cohen's kappa, judge vs human review"] = (["judge_id", "pairs", "kappa"], list(kappa_by_judge(conn)))
    out[AGREEMENT] = (list(AGREEMENT_COLUMNS), [agreement_cells(r) for r in agreement(conn)])
    out.update(review_sections(conn))
    return out
