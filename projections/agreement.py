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

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
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
_CHUNK = 2_000_000
"""Resample weights held at once (resamples x units), to bound memory on large groups."""

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


def bootstrap(stats: Stats, statistic: str, *, resamples: int = DEFAULT_RESAMPLES,
              seed: int = DEFAULT_SEED) -> tuple[float | None, float | None]:  # fmt: skip
    """Percentile interval (95%) of `statistic` over `resamples` resamples of the units (rows of `stats`).

    Resamples where the statistic is undefined are left out; (None, None) when none is defined or
    `resamples` is 0."""
    units = stats.shape[0]
    if units == 0 or resamples <= 0:
        return None, None
    rng = np.random.default_rng(seed)
    fn = STATISTICS[statistic]
    per = max(1, _CHUNK // units)
    found: list[NDArray[np.float64]] = []
    for start in range(0, resamples, per):
        b = min(per, resamples - start)
        picks = rng.integers(0, units, size=(b, units))
        flat = (np.arange(b)[:, None] * units + picks).ravel()
        weights = np.bincount(flat, minlength=b * units).reshape(b, units).astype(np.float64)
        found.append(fn(weights @ stats))
    values = np.concatenate(found)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None, None
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def summarize(stats: Stats, statistic: str, *, resamples: int = DEFAULT_RESAMPLES,
              seed: int = DEFAULT_SEED) -> Agreement:  # fmt: skip
    """The figure and its interval from per-unit statistics (rows of pairable units)."""
    units = stats.shape[0]
    if units == 0:
        return Agreement(statistic, None, None, None, 0, 0, resamples)
    value = _defined(float(STATISTICS[statistic](stats.sum(axis=0))))
    pairable = units * 2 if statistic == "kappa" else int(stats[:, 0].sum())
    low, high = bootstrap(stats, statistic, resamples=resamples, seed=seed) if value is not None else (None, None)
    return Agreement(statistic, value, low, high, units, pairable, resamples)


Units = Mapping[Any, Mapping[str, Any]]
"""unit -> {judge: value}: what each judge gave each unit (a judge missing from a unit did not code it)."""


def alpha_interval(units: Units, judges: Iterable[str] | None = None, *, resamples: int = DEFAULT_RESAMPLES,
                   seed: int = DEFAULT_SEED) -> Agreement:  # fmt: skip
    """Interval alpha over `judges` (default every judge) with units their per-unit values."""
    keep = None if judges is None else set(judges)
    rows = [interval_unit([float(v) for j, v in by.items() if keep is None or j in keep]) for by in units.values()]
    stats = np.array([r for r in rows if r is not None], dtype=float).reshape(-1, 4)
    return summarize(stats, "alpha_interval", resamples=resamples, seed=seed)


def alpha_nominal(units: Units, categories: Sequence[Hashable], judges: Iterable[str] | None = None, *,
                  resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> Agreement:  # fmt: skip
    """Nominal alpha over `judges` (default every judge) on labels from `categories`."""
    keep = None if judges is None else set(judges)
    rows = [nominal_unit([v for j, v in by.items() if keep is None or j in keep], categories) for by in units.values()]
    stats = np.array([r for r in rows if r is not None], dtype=float).reshape(-1, len(categories) + 2)
    return summarize(stats, "alpha_nominal", resamples=resamples, seed=seed)


def cohen_kappa(units: Units, categories: Sequence[Hashable], a: str, b: str, *, resamples: int = DEFAULT_RESAMPLES,
                seed: int = DEFAULT_SEED) -> Agreement:  # fmt: skip
    """Cohen's kappa of judges `a` (rows) and `b` (columns) on the units both labelled."""
    rows = [kappa_unit(by[a], by[b], categories) for by in units.values() if a in by and b in by]
    stats = np.array(rows, dtype=float).reshape(-1, len(categories) ** 2)
    return summarize(stats, "kappa", resamples=resamples, seed=seed)


def pairs(units: Units) -> list[tuple[str, str]]:
    """Every pair of judges that coded a unit together, sorted."""
    found: set[tuple[str, str]] = set()
    for by in units.values():
        found.update(combinations(sorted(by), 2))
    return sorted(found)


def interval_figures(units: Units, *, resamples: int = DEFAULT_RESAMPLES,
                     seed: int = DEFAULT_SEED) -> dict[tuple[str, str], Agreement]:  # fmt: skip
    """Interval alpha over all judges ((ALL_JUDGES, ALL_JUDGES)) and per judge pair that shares a unit."""
    out = {(ALL_JUDGES, ALL_JUDGES): alpha_interval(units, resamples=resamples, seed=seed)}
    for a, b in pairs(units):
        out[(a, b)] = alpha_interval(units, (a, b), resamples=resamples, seed=seed)
    return out


def nominal_figures(units: Units, categories: Sequence[Hashable], *, resamples: int = DEFAULT_RESAMPLES,
                    seed: int = DEFAULT_SEED) -> dict[tuple[str, str], list[Agreement]]:  # fmt: skip
    """Nominal alpha over all judges; per judge pair nominal alpha and Cohen's kappa."""
    out = {(ALL_JUDGES, ALL_JUDGES): [alpha_nominal(units, categories, resamples=resamples, seed=seed)]}
    for a, b in pairs(units):
        out[(a, b)] = [alpha_nominal(units, categories, (a, b), resamples=resamples, seed=seed),
                       cohen_kappa(units, categories, a, b, resamples=resamples, seed=seed)]  # fmt: skip
    return out
