"""The `judge_agreement` read model: which rubrics a batch touched, and their refresh.

A batch's transaction marks the rubrics whose facts it wrote (`mark_pending`: insert the mark or add 1 to its
version), as its last statement before the offsets, so two projectors marking one rubric hold that row lock
only for their commit. After the commit the projector calls `refresh`: for each marked rubric not refreshed
within the throttle, one transaction takes a transaction-scoped advisory lock on it (a second projector skips
a rubric the first is refreshing), reads the mark's version, then the rubric's facts, recomputes every figure
with `projections.agreement`, replaces the rubric's rows and deletes the mark only if its version is still the
one read. Facts and their mark commit together, so facts committed after the read leave a newer version and
the mark stays for the next refresh; a crash before the refresh commits leaves the mark too.

Lane scores: unit = evaluation run, coder = judge model, grouped by the run's rubric (the output's own when the
run event has not been projected), one value per run, judge model and lane (the earliest output's). Claim
verdicts: unit = claim, coder = judge id, grouped by the check's rubric ('no rubric' when it has none).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import psycopg

from projections import agreement
from projections.rows import Rows

LANES, CLAIMS = "lane_scores", "claim_verdicts"
NO_RUBRIC = "no rubric"
VERDICTS = ("pass", "fail", "unclear")
DEFAULT_REFRESH_SECONDS = 5.0
"""At most one refresh per rubric and kind this often (`JUDGEFLOW_AGREEMENT_SECONDS`); 0 = after every batch."""

Key = tuple[str, str | None]
"""(kind, rubric_version_id or None)."""


def _column(insert: str, name: str) -> int:
    head = insert.split("VALUES", 1)[0].split("SELECT", 1)[0]
    cols = [c.strip().strip('"') for c in head.split("(", 1)[1].rsplit(")", 1)[0].split(",")]
    return cols.index(name)


def touched(rows: Rows, inserts: dict[str, str]) -> set[Key]:
    """The (kind, rubric) pairs whose facts this batch wrote: judge outputs and runs (lane scores), claim checks."""
    out: set[Key] = set()
    for table, kind in (("judge_outputs", LANES), ("evaluation_runs", LANES), ("claim_checks", CLAIMS)):
        batch = rows.tables.get(table)
        if batch:
            i = _column(inserts[table], "rubric_version_id")
            out.update((kind, None if row[i] is None else str(row[i])) for row in batch)
    return out


MARK = """INSERT INTO judge_agreement_pending (kind, rubric_key, rubric_version_id)
SELECT k, coalesce(r, %s), r::uuid FROM unnest(%s::text[], %s::text[]) AS t(k, r) ORDER BY 1, 2
ON CONFLICT (kind, rubric_key) DO UPDATE SET version = judge_agreement_pending.version + 1"""


def mark_pending(cur: psycopg.Cursor, keys: set[Key]) -> None:
    ordered = sorted(keys, key=lambda k: (k[0], k[1] or ""))
    cur.execute(MARK, [NO_RUBRIC, [k for k, _ in ordered], [r for _, r in ordered]])


DUE = """SELECT p.kind, p.rubric_key, p.rubric_version_id::text FROM judge_agreement_pending p
WHERE %s OR NOT EXISTS (SELECT 1 FROM judge_agreement a WHERE a.kind = p.kind AND a.rubric_key = p.rubric_key
  AND a.refreshed_at > now() - make_interval(secs => %s))
ORDER BY p.marked_at, p.kind, p.rubric_key"""

LANE_VALUES = """SELECT DISTINCT ON (o.evaluation_run_id, o.judge_model, l.lane_key)
  o.evaluation_run_id::text, o.judge_model, l.lane_key, l.lane_score
FROM judge_outputs o JOIN judge_lane_scores l ON l.judge_output_id = o.id
LEFT JOIN evaluation_runs r ON r.id = o.evaluation_run_id
WHERE (o.evaluation_run_id IN (SELECT id FROM evaluation_runs WHERE rubric_version_id = %(rubric)s)
       OR o.rubric_version_id = %(rubric)s)
  AND coalesce(r.rubric_version_id, o.rubric_version_id) = %(rubric)s
ORDER BY o.evaluation_run_id, o.judge_model, l.lane_key, o.created_at, o.judge_run_id"""

CLAIM_VALUES = """SELECT claim_id, judge_id, verdict FROM claim_checks
WHERE rubric_version_id = %(rubric)s OR (%(rubric)s::uuid IS NULL AND rubric_version_id IS NULL)
ORDER BY claim_id, judge_id"""
"""In unit order, as `LANE_VALUES`: the bootstrap draws units by position, so the same facts give the same interval."""

WRITE = """INSERT INTO judge_agreement (kind, rubric_key, rubric_version_id, lane_key, judge_a, judge_b, statistic,
  value, ci_low, ci_high, units, pairable_values, resamples, refreshed_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now())"""

Figure = tuple[str, str, str, agreement.Agreement]
"""(lane_key or '', judge_a, judge_b, the figure)."""


FETCH_ROWS = 20_000
"""Facts read at once through a server-side cursor. A refresh keeps a rubric's facts as numbers in arrays (24
bytes a fact), never as one Python tuple, and a dict per unit, each: a refresh over every fact of a rubric
then needs megabytes, not hundreds of megabytes, and the projector's memory does not step up with the data."""


class _Cells:
    """One group's facts as (unit position, judge column, value) arrays: a unit is counted when it changes (the
    facts come in unit order), judges get columns as they appear (put in sorted order at the end)."""

    def __init__(self) -> None:
        self.units = 0
        self.last: object = None
        self.judges: dict[str, int] = {}
        self.u, self.j, self.v = array("q"), array("q"), array("d")

    def add(self, unit: object, judge: str, value: float) -> None:
        if self.units == 0 or unit != self.last:
            self.last, self.units = unit, self.units + 1
        col = self.judges.setdefault(judge, len(self.judges))
        if self.u and self.u[-1] == self.units - 1 and self.j[-1] == col:
            self.v[-1] = value  # a second fact of one unit and judge: the last one counts, as a dict's would
            return
        self.u.append(self.units - 1)
        self.j.append(col)
        self.v.append(value)

    def matrix(self, fill: float) -> tuple[np.ndarray, list[str]]:
        """units x judges (judges sorted), `fill` where a judge gave the unit nothing."""
        judges = sorted(self.judges)
        column = np.empty(len(judges), dtype=np.int64)
        for new, judge in enumerate(judges):
            column[self.judges[judge]] = new
        out = np.full((self.units, len(judges)), fill, dtype=np.float64)
        if self.units:
            out[np.frombuffer(self.u, dtype=np.int64), column[np.frombuffer(self.j, dtype=np.int64)]] = np.frombuffer(
                self.v, dtype=np.float64
            )
        return out, judges


def lane_figures(values: Iterable[tuple[str, str, str, int]], *, resamples: int, seed: int) -> list[Figure]:
    """Interval alpha per lane and judge pair (and over all judges) from (run, judge model, lane, score) rows in
    run order (`LANE_VALUES`)."""
    by_lane: dict[str, _Cells] = {}
    for run, judge, lane, score in values:
        cells = by_lane.get(lane)
        if cells is None:
            cells = by_lane[lane] = _Cells()
        cells.add(run, judge, float(score))
    out: list[Figure] = []
    for lane, cells in sorted(by_lane.items()):
        matrix, judges = cells.matrix(np.nan)
        for (a, b), fig in agreement.interval_figures_of(matrix, judges, resamples=resamples, seed=seed).items():
            out.append((lane, a, b, fig))
    return out


def claim_figures(values: Iterable[tuple[str, str, str]], *, resamples: int, seed: int) -> list[Figure]:
    """Nominal alpha (all judges, each pair) and Cohen's kappa (each pair) from (claim, judge, verdict) rows in
    claim order (`CLAIM_VALUES`)."""
    index = {c: i for i, c in enumerate(VERDICTS)}
    cells = _Cells()
    for claim, judge, verdict in values:
        if verdict not in index:
            raise ValueError(f"a label outside the categories {list(VERDICTS)!r}: {verdict!r}")
        cells.add(claim, judge, float(index[verdict]))
    matrix, judges = cells.matrix(-1.0)
    codes = matrix.astype(np.int64)
    figures = agreement.nominal_figures_of(codes, judges, len(VERDICTS), resamples=resamples, seed=seed)
    return [("", a, b, fig) for (a, b), figs in figures.items() for fig in figs]


def _facts(conn: psycopg.Connection, query: str, params: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
    """The rows of `query`, `FETCH_ROWS` at a time from a server-side cursor (inside the caller's transaction).
    Planned for reading every row, as a plain query is (a cursor's default plans for the first tenth)."""
    conn.execute("SET LOCAL cursor_tuple_fraction = 1")
    with conn.cursor(name="judge_agreement_facts") as cur:
        cur.execute(query, params)
        while rows := cur.fetchmany(FETCH_ROWS):
            yield from rows


def refresh_one(
    conn: psycopg.Connection, kind: str, rubric_key: str, rubric: str | None, *, resamples: int, seed: int
) -> bool:
    """Recompute one marked rubric's figures in one transaction; False when another projector is refreshing it
    or it is no longer marked."""
    with conn.transaction(), conn.cursor() as cur:
        locked = cur.execute(
            "SELECT pg_try_advisory_xact_lock(hashtext(current_schema() || '/agreement'), hashtext(%s || '/' || %s))",
            [kind, rubric_key],
        ).fetchone()
        if not locked or not locked[0]:
            return False
        mark = cur.execute(
            "SELECT version FROM judge_agreement_pending WHERE kind = %s AND rubric_key = %s", [kind, rubric_key]
        ).fetchone()
        if mark is None:
            return False
        if kind == LANES:
            figures = lane_figures(_facts(conn, LANE_VALUES, {"rubric": rubric}), resamples=resamples, seed=seed)
        else:
            figures = claim_figures(_facts(conn, CLAIM_VALUES, {"rubric": rubric}), resamples=resamples, seed=seed)
        cur.execute("DELETE FROM judge_agreement WHERE kind = %s AND rubric_key = %s", [kind, rubric_key])
        if figures:
            cur.executemany(
                WRITE,
                [
                    (
                        kind,
                        rubric_key,
                        rubric,
                        lane,
                        a,
                        b,
                        f.statistic,
                        f.value,
                        f.ci_low,
                        f.ci_high,
                        f.units,
                        f.pairable_values,
                        f.resamples,
                    )
                    for lane, a, b, f in figures
                ],
            )
        cur.execute(
            "DELETE FROM judge_agreement_pending WHERE kind = %s AND rubric_key = %s AND version = %s",
            [kind, rubric_key, mark[0]],
        )
    return True


def refresh(
    conn: psycopg.Connection,
    *,
    throttle_seconds: float = DEFAULT_REFRESH_SECONDS,
    force: bool = False,
    resamples: int = agreement.DEFAULT_RESAMPLES,
    seed: int = agreement.DEFAULT_SEED,
) -> int:
    """Refresh every marked rubric not refreshed within `throttle_seconds` (every one with `force`); return how
    many this call refreshed. `conn` is in autocommit mode: each rubric is its own transaction."""
    due: list[tuple[Any, ...]] = conn.execute(DUE, [force, float(throttle_seconds)]).fetchall()
    done = 0
    for kind, rubric_key, rubric in due:
        done += refresh_one(conn, kind, rubric_key, rubric, resamples=resamples, seed=seed)
    return done


def pending(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM judge_agreement_pending").fetchone()
    return int(row[0]) if row else 0


def timed_refresh(conn: psycopg.Connection, **kw: Any) -> tuple[int, float]:
    """`refresh` and the seconds it took (the projector reports both)."""
    t0 = time.perf_counter()
    n = refresh(conn, **kw)
    return n, time.perf_counter() - t0
