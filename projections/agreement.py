"""Agreement between judges: Krippendorff's alpha and Cohen's kappa, with bootstrap intervals. Pure: no database.

Every statistic is a function of sums of per-unit sufficient statistics, so a read model can keep one row of
numbers per unit, replace a unit's row when its values change, and get the figure from column sums; the
bootstrap resamples those rows.

Krippendorff's alpha (coincidence form). A unit u holds m_u values, one per coder that coded it; only units with
m_u >= 2 are pairable, and n = sum of m_u over them. With delta the metric,

    D_o = 1/n * sum_u 1/(m_u - 1) * sum_{i != j in u} delta(x_i, x_j)
    D_e = 1/(n (n - 1)) * sum_{i != j over all n pairable values} delta(x_i, x_j)
    alpha = 1 - D_o / D_e

Interval (delta = (a - b)^2): over ordered pairs, sum_{i != j} (x_i - x_j)^2 = 2 (m Q - S^2) with S the sum and
Q the sum of squares, so a unit's statistics are (m_u, S_u, Q_u, W_u = (m_u Q_u - S_u^2) / (m_u - 1)) and

    alpha = 1 - (n - 1) * sum W_u / (n Q - S^2)        (S, Q over every pairable value).

Nominal (delta = [a != b]): with n_uc the unit's count of category c, the differing ordered pairs in a unit are
m_u^2 - sum_c n_uc^2, so a unit's statistics are (m_u, n_u1 .. n_uK, W_u = (m_u^2 - sum_c n_uc^2) / (m_u - 1)) and

    alpha = 1 - (n - 1) * sum W_u / (n^2 - sum_c N_c^2)      (N_c = sum_u n_uc).

Cohen's kappa: a unit is one item both raters labelled; its statistics are the one-hot cell of the K x K
confusion matrix, whose sums are the matrix: kappa = (p_o - p_e) / (1 - p_e).

Undefined is None, never 0: no pairable unit, D_e = 0 (every value the same) or p_e = 1.

The bootstrap resamples units with replacement (seeded, so a refresh of unchanged data gives the same
interval), computes the statistic from each resample's sums, and takes the 2.5th and 97.5th percentiles of the
resamples where it is defined.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

DEFAULT_RESAMPLES = 1000
"""Bootstrap resamples per figure: the percentile interval's ends move by about 0.01 between seeds at 1000."""
DEFAULT_SEED = 0
CONFIDENCE = 0.95
ALL_JUDGES = "*"
"""The judge pair key of the figure over every judge at once."""
_REL_TOL = 1e-9
_CHUNK = 1_000_000
"""Resample weights held at once (resamples x units), to bound memory on large groups; weights this small are
kept (a few at most) for the next figure with as many units: every lane and judge pair of a rubric usually has
the same units, and the same seed draws the same resamples."""

Stats = NDArray[np.float64]
"""Per-unit statistics, one row per pairable unit (see the module docstring for the columns)."""


@dataclass(frozen=True)
class Agreement:
    """One figure: the statistic, its bootstrap interval, and what it rests on."""

    statistic: str
    """'alpha_interval', 'alpha_nominal' or 'kappa'."""
    value: float | None
    ci_low: float | None
    ci_high: float | None
    units: int
    """Pairable units (alpha: coded by at least two judges; kappa: labelled by both)."""
    pairable_values: int
    resamples: int


def interval_unit(values: Sequence[float]) -> tuple[float, float, float, float] | None:
    """(m, S, Q, W) of one unit's values, or None when it holds fewer than two (not pairable)."""
    m = len(values)
    if m < 2:
        return None
    s = float(sum(values))
    q = float(sum(v * v for v in values))
    return float(m), s, q, max(0.0, (m * q - s * s) / (m - 1))


def nominal_unit(labels: Sequence[Hashable], categories: Sequence[Hashable]) -> list[float] | None:
    """(m, n_1 .. n_K, W) of one unit's labels, or None when it holds fewer than two."""
    m = len(labels)
    if m < 2:
        return None
    counts = [float(sum(1 for x in labels if x == c)) for c in categories]
    if sum(counts) != m:
        raise ValueError(f"a label outside the categories {list(categories)!r}: {list(labels)!r}")
    return [float(m), *counts, (m * m - sum(c * c for c in counts)) / (m - 1)]


def kappa_unit(a: Hashable, b: Hashable, categories: Sequence[Hashable]) -> list[float]:
    """The one-hot confusion cell of one item (row: first rater's label, column: second's)."""
    k = len(categories)
    cell = [0.0] * (k * k)
    cell[categories.index(a) * k + categories.index(b)] = 1.0
    return cell


def alpha_interval_from(totals: NDArray[np.float64]) -> NDArray[np.float64]:
    """Interval alpha from summed (m, S, Q, W) columns (the last axis); NaN where undefined."""
    n, s, q, w = (totals[..., i] for i in range(4))
    spread = n * q - s * s
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (n - 1.0) * w / spread
    return np.where((n >= 2) & (spread > _REL_TOL * np.maximum(n * q, 1.0)), alpha, np.nan)


def alpha_nominal_from(totals: NDArray[np.float64]) -> NDArray[np.float64]:
    """Nominal alpha from summed (m, n_1 .. n_K, W) columns; NaN where undefined."""
    n = totals[..., 0]
    counts = totals[..., 1:-1]
    w = totals[..., -1]
    expected = n * n - (counts * counts).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (n - 1.0) * w / expected
    return np.where((n >= 2) & (expected > 0.5), alpha, np.nan)


def kappa_from(totals: NDArray[np.float64]) -> NDArray[np.float64]:
    """Cohen's kappa from a summed flattened K x K confusion matrix; NaN where undefined."""
    k = int(round(totals.shape[-1] ** 0.5))
    matrix = totals.reshape(*totals.shape[:-1], k, k)
    n = matrix.sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = np.trace(matrix, axis1=-2, axis2=-1) / n
        expected = (matrix.sum(axis=-1) * matrix.sum(axis=-2)).sum(axis=-1) / (n * n)
        kappa = (observed - expected) / (1.0 - expected)
    return np.where((n > 0) & (expected < 1.0 - _REL_TOL), kappa, np.nan)


STATISTICS = {"alpha_interval": alpha_interval_from, "alpha_nominal": alpha_nominal_from, "kappa": kappa_from}


def _defined(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def _weights(units: int, resamples: int, seed: int) -> Iterator[NDArray[np.float64]]:
    """How often each unit is drawn in each resample (resamples x units), in chunks of at most `_CHUNK` cells."""
    rng = np.random.default_rng(seed)
    per = max(1, _CHUNK // units)
    for start in range(0, resamples, per):
        b = min(per, resamples - start)
        picks = rng.integers(0, units, size=(b, units))
        flat = (np.arange(b)[:, None] * units + picks).ravel()
        yield np.bincount(flat, minlength=b * units).reshape(b, units).astype(np.float64)


@lru_cache(maxsize=4)
def _cached_weights(units: int, resamples: int, seed: int) -> tuple[NDArray[np.float64], ...]:
    return tuple(_weights(units, resamples, seed))


def bootstrap(
    stats: Stats, statistic: str, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> tuple[float | None, float | None]:
    """Percentile interval (95%) of `statistic` over `resamples` resamples of the units (rows of `stats`).

    Resamples where the statistic is undefined are left out; (None, None) when none is defined or
    `resamples` is 0."""
    units = stats.shape[0]
    if units == 0 or resamples <= 0:
        return None, None
    fn = STATISTICS[statistic]
    if units * resamples <= _CHUNK:
        found = [fn(weights @ stats) for weights in _cached_weights(units, resamples, seed)]
    else:
        found = [fn(weights @ stats) for weights in _weights(units, resamples, seed)]
    values = np.concatenate(found)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None, None
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def summarize(
    stats: Stats, statistic: str, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> Agreement:
    """The figure and its interval from per-unit statistics (rows of pairable units)."""
    units = stats.shape[0]
    if units == 0:
        return Agreement(statistic, None, None, None, 0, 0, resamples)
    value = _defined(float(STATISTICS[statistic](stats.sum(axis=0))))
    pairable = units * 2 if statistic == "kappa" else int(stats[:, 0].sum())
    low, high = bootstrap(stats, statistic, resamples=resamples, seed=seed) if value is not None else (None, None)
    return Agreement(statistic, value, low, high, units, pairable, resamples)


def interval_stats(matrix: NDArray[np.float64]) -> Stats:
    """(m, S, Q, W) of every pairable unit of a units x judges matrix (NaN: the judge did not code the unit)."""
    coded = ~np.isnan(matrix)
    m = coded.sum(axis=1).astype(np.float64)
    x = np.where(coded, matrix, 0.0)
    s, q = x.sum(axis=1), (x * x).sum(axis=1)
    keep = m >= 2
    m, s, q = m[keep], s[keep], q[keep]
    return np.column_stack([m, s, q, np.maximum(0.0, (m * q - s * s) / (m - 1))]).reshape(-1, 4)


def nominal_stats(codes: NDArray[np.int64], k: int) -> Stats:
    """(m, n_1 .. n_K, W) of every pairable unit of a units x judges matrix of category indices (-1: not coded)."""
    counts = np.stack([(codes == c).sum(axis=1) for c in range(k)], axis=1).astype(np.float64).reshape(-1, k)
    m = counts.sum(axis=1)
    keep = m >= 2
    counts, m = counts[keep], m[keep]
    return np.column_stack([m, counts, (m * m - (counts * counts).sum(axis=1)) / (m - 1)]).reshape(-1, k + 2)


def kappa_stats(a: NDArray[np.int64], b: NDArray[np.int64], k: int) -> Stats:
    """The one-hot confusion cells of the units both judges labelled (category indices, -1: not labelled)."""
    both = (a >= 0) & (b >= 0)
    return np.eye(k * k)[a[both] * k + b[both]].reshape(-1, k * k)


Units = Mapping[Any, Mapping[str, Any]]
"""unit -> {judge: value}: what each judge gave each unit (a judge missing from a unit did not code it)."""


def judges_of(units: Units) -> list[str]:
    return sorted({j for by in units.values() for j in by})


def value_matrix(units: Units, judges: Sequence[str]) -> NDArray[np.float64]:
    """units x judges, NaN where a judge did not code a unit."""
    return np.array(
        [[float(by[j]) if j in by else np.nan for j in judges] for by in units.values()], dtype=np.float64
    ).reshape(len(units), len(judges))


def code_matrix(units: Units, judges: Sequence[str], categories: Sequence[Hashable]) -> NDArray[np.int64]:
    """units x judges of category indices, -1 where a judge did not label a unit."""
    index = {c: i for i, c in enumerate(categories)}
    try:
        rows = [[index[by[j]] if j in by else -1 for j in judges] for by in units.values()]
    except KeyError as exc:
        raise ValueError(f"a label outside the categories {list(categories)!r}: {exc}") from None
    return np.array(rows, dtype=np.int64).reshape(len(units), len(judges))


def alpha_interval(
    units: Units, judges: Sequence[str] | None = None, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> Agreement:
    """Interval alpha over `judges` (default every judge) with units their per-unit values."""
    matrix = value_matrix(units, judges_of(units) if judges is None else judges)
    return summarize(interval_stats(matrix), "alpha_interval", resamples=resamples, seed=seed)


def alpha_nominal(
    units: Units,
    categories: Sequence[Hashable],
    judges: Sequence[str] | None = None,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Agreement:
    """Nominal alpha over `judges` (default every judge) on labels from `categories`."""
    codes = code_matrix(units, judges_of(units) if judges is None else judges, categories)
    return summarize(nominal_stats(codes, len(categories)), "alpha_nominal", resamples=resamples, seed=seed)


def cohen_kappa(
    units: Units,
    categories: Sequence[Hashable],
    a: str,
    b: str,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Agreement:
    """Cohen's kappa of judges `a` (rows) and `b` (columns) on the units both labelled."""
    codes = code_matrix(units, [a, b], categories)
    return summarize(kappa_stats(codes[:, 0], codes[:, 1], len(categories)), "kappa", resamples=resamples, seed=seed)


def _pairs(coded: NDArray[np.bool_], judges: Sequence[str]) -> list[tuple[int, int]]:
    """Column pairs of judges that coded at least one unit together."""
    together = coded.T.astype(np.int64) @ coded.astype(np.int64)
    return [(i, j) for i in range(len(judges)) for j in range(i + 1, len(judges)) if together[i, j] > 0]


def interval_figures(
    units: Units, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> dict[tuple[str, str], Agreement]:
    """Interval alpha over all judges ((ALL_JUDGES, ALL_JUDGES)) and per judge pair that shares a unit."""
    judges = judges_of(units)
    return interval_figures_of(value_matrix(units, judges), judges, resamples=resamples, seed=seed)


def interval_figures_of(
    matrix: NDArray[np.float64], judges: Sequence[str], *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> dict[tuple[str, str], Agreement]:
    """`interval_figures` from a units x judges matrix (NaN: not coded), built without a dict per unit."""
    kw = {"resamples": resamples, "seed": seed}
    out = {(ALL_JUDGES, ALL_JUDGES): summarize(interval_stats(matrix), "alpha_interval", **kw)}
    for i, j in _pairs(~np.isnan(matrix), judges):
        out[(judges[i], judges[j])] = summarize(interval_stats(matrix[:, [i, j]]), "alpha_interval", **kw)
    return out


def nominal_figures(
    units: Units, categories: Sequence[Hashable], *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> dict[tuple[str, str], list[Agreement]]:
    """Nominal alpha over all judges; per judge pair nominal alpha and Cohen's kappa."""
    judges = judges_of(units)
    codes = code_matrix(units, judges, categories)
    return nominal_figures_of(codes, judges, len(categories), resamples=resamples, seed=seed)


def nominal_figures_of(
    codes: NDArray[np.int64],
    judges: Sequence[str],
    k: int,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[tuple[str, str], list[Agreement]]:
    """`nominal_figures` from a units x judges matrix of category indices (-1: not labelled) over `k` categories."""
    kw = {"resamples": resamples, "seed": seed}
    out = {(ALL_JUDGES, ALL_JUDGES): [summarize(nominal_stats(codes, k), "alpha_nominal", **kw)]}
    for i, j in _pairs(codes >= 0, judges):
        out[(judges[i], judges[j])] = [
            summarize(nominal_stats(codes[:, [i, j]], k), "alpha_nominal", **kw),
            summarize(kappa_stats(codes[:, i], codes[:, j], k), "kappa", **kw),
        ]
    return out
