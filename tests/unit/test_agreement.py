"""Judge agreement against known answers: Krippendorff's own example, hand-computed cases, the `krippendorff`
package and scikit-learn's `cohen_kappa_score` on random data, and the bootstrap against a plain resampling loop."""

from __future__ import annotations

import math
import warnings

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from projections import agreement as A

VERDICTS = ("pass", "fail", "unclear")
nan = math.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the worked example: 4 observers, 12 units,
# values 1..5, missing values; published alpha: nominal 0.743, interval 0.849.
TEXTBOOK = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
    [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
]


def units_of(matrix: list[list[float]]) -> dict[int, dict[str, float]]:
    """Coders in rows, units in columns (the `krippendorff` package's layout) -> unit -> {judge: value}."""
    return {
        u: {f"j{c}": row[u] for c, row in enumerate(matrix) if not math.isnan(row[u])} for u in range(len(matrix[0]))
    }


def test_textbook_example() -> None:
    units = units_of(TEXTBOOK)
    interval = A.alpha_interval(units)
    nominal = A.alpha_nominal(units, [1, 2, 3, 4, 5])
    assert interval.value == pytest.approx(0.849, abs=5e-4)
    assert nominal.value == pytest.approx(0.743, abs=5e-4)
    # unit 12 has one value: not pairable; 11 units and 40 values are
    assert (interval.units, interval.pairable_values) == (11, 40)
    assert (nominal.units, nominal.pairable_values) == (11, 40)


def test_hand_computed_interval() -> None:
    # units (1, 2), (3, 3), (5, 4): S = 18, Q = 64, n Q - S^2 = 60; W = 1 + 0 + 1; alpha = 1 - 5 * 2 / 60
    units = {"a": {"x": 1, "y": 2}, "b": {"x": 3, "y": 3}, "c": {"x": 5, "y": 4}}
    assert A.alpha_interval(units).value == pytest.approx(1 - 1 / 6)


def test_hand_computed_nominal_and_kappa() -> None:
    # 4 claims, 2 judges: (pass, pass), (pass, fail), (fail, fail), (unclear, unclear)
    # nominal: n = 8, N = (3, 3, 2), n^2 - sum N_c^2 = 64 - 22 = 42, W = 0 + 2 + 0 + 0: alpha = 1 - 7 * 2 / 42
    # kappa: p_o = 3/4, p_e = (2*1 + 1*2 + 1*1) / 16 = 5/16: kappa = (12/16 - 5/16) / (11/16) = 7/11
    units = {
        "c1": {"x": "pass", "y": "pass"},
        "c2": {"x": "pass", "y": "fail"},
        "c3": {"x": "fail", "y": "fail"},
        "c4": {"x": "unclear", "y": "unclear"},
    }
    assert A.alpha_nominal(units, VERDICTS).value == pytest.approx(1 - 14 / 42)
    kappa = A.cohen_kappa(units, VERDICTS, "x", "y")
    assert kappa.value == pytest.approx(7 / 11)
    assert (kappa.units, kappa.pairable_values) == (4, 8)


def test_single_coder_units_change_nothing() -> None:
    units = {"a": {"x": 1, "y": 2}, "b": {"x": 3, "y": 3}, "c": {"x": 5, "y": 4}}
    more = units | {"d": {"x": 100}, "e": {"z": 0}}
    assert A.alpha_interval(more).value == A.alpha_interval(units).value
    assert A.alpha_interval(more).units == 3


def test_undefined_is_none_never_zero() -> None:
    same = {"a": {"x": 7, "y": 7}, "b": {"x": 7, "y": 7, "z": 7}}
    for fig in (A.alpha_interval(same), A.alpha_nominal(same, [7])):
        assert fig.value is None and fig.ci_low is None and fig.ci_high is None
        assert fig.units == 2  # pairable, yet every value the same: D_e = 0
    lonely = {"a": {"x": 1}, "b": {"y": 2}}
    assert A.alpha_interval(lonely) == A.Agreement("alpha_interval", None, None, None, 0, 0, A.DEFAULT_RESAMPLES)
    assert A.alpha_interval({}).value is None
    always_pass = {"c1": {"x": "pass", "y": "pass"}, "c2": {"x": "pass", "y": "pass"}}
    assert A.cohen_kappa(always_pass, VERDICTS, "x", "y").value is None  # expected agreement 1
    apart = {"c1": {"x": "pass"}, "c2": {"y": "fail"}}
    assert A.cohen_kappa(apart, VERDICTS, "x", "y").value is None  # no claim both checked


def test_perfect_and_systematic_disagreement() -> None:
    perfect = {u: {"x": v, "y": v} for u, v in enumerate([10, 40, 70, 90])}
    assert A.alpha_interval(perfect).value == pytest.approx(1.0)
    flipped = {"c1": {"x": "pass", "y": "fail"}, "c2": {"x": "fail", "y": "pass"}}
    assert A.cohen_kappa(flipped, VERDICTS, "x", "y").value == pytest.approx(-1.0)
    assert A.alpha_nominal(flipped, VERDICTS).value < 0


def test_per_unit_statistics_add_and_subtract() -> None:
    """The read model's incremental refresh: a figure from column sums of unit rows; a unit's row replaced."""
    units = units_of(TEXTBOOK)
    rows = {u: A.interval_unit(list(by.values())) for u, by in units.items()}
    totals = np.sum([r for r in rows.values() if r is not None], axis=0)
    assert float(A.alpha_interval_from(totals)) == pytest.approx(A.alpha_interval(units).value)
    changed = dict(units) | {5: {"j0": 1.0, "j1": 1.0, "j2": 1.0, "j3": 1.0}}
    old, new = rows[5], A.interval_unit([1.0, 1.0, 1.0, 1.0])
    assert old is not None and new is not None
    updated = totals - np.array(old) + np.array(new)
    assert float(A.alpha_interval_from(updated)) == pytest.approx(A.alpha_interval(changed).value)


def test_figures_per_pair_and_all() -> None:
    units = units_of(TEXTBOOK)
    figs = A.interval_figures(units, resamples=50)
    assert set(figs) == {(A.ALL_JUDGES, A.ALL_JUDGES)} | {(f"j{a}", f"j{b}") for a in range(4) for b in range(a + 1, 4)}
    pair = figs[("j1", "j2")]
    reference = krippendorff.alpha(reliability_data=[TEXTBOOK[1], TEXTBOOK[2]], level_of_measurement="interval")
    assert pair.value == pytest.approx(reference)
    claims = {"c1": {"x": "pass", "y": "pass"}, "c2": {"x": "pass", "y": "fail"}, "c3": {"x": "fail", "y": "fail"}}
    by_pair = A.nominal_figures(claims, VERDICTS, resamples=50)
    assert [f.statistic for f in by_pair[("x", "y")]] == ["alpha_nominal", "kappa"]
    assert [f.statistic for f in by_pair[(A.ALL_JUDGES, A.ALL_JUDGES)]] == ["alpha_nominal"]


def test_bootstrap_matches_a_plain_resampling_loop() -> None:
    """The vectorised bootstrap = resampling the units and asking the reference package, resample by resample."""
    units = units_of(TEXTBOOK)
    pairable = [u for u, by in units.items() if len(by) >= 2]
    resamples, seed = 200, 3
    fig = A.alpha_interval(units, resamples=resamples, seed=seed)
    picks = np.random.default_rng(seed).integers(0, len(pairable), size=(resamples, len(pairable)))
    matrix = np.array(TEXTBOOK)[:, pairable]
    values = []
    for row in picks:
        try:
            values.append(krippendorff.alpha(reliability_data=matrix[:, row], level_of_measurement="interval"))
        except (ValueError, ZeroDivisionError):
            continue
    values = [v for v in values if not math.isnan(v)]
    low, high = np.percentile(values, [2.5, 97.5])
    assert (fig.ci_low, fig.ci_high) == (pytest.approx(low), pytest.approx(high))
    assert fig.ci_low is not None and fig.ci_high is not None and fig.value is not None
    assert fig.ci_low <= fig.value <= fig.ci_high


def test_bootstrap_is_seeded_and_can_be_off() -> None:
    units = units_of(TEXTBOOK)
    assert A.alpha_interval(units, seed=1) == A.alpha_interval(units, seed=1)
    assert A.alpha_interval(units, seed=1).ci_low != A.alpha_interval(units, seed=2).ci_low
    off = A.alpha_interval(units, resamples=0)
    assert off.value is not None and off.ci_low is None and off.ci_high is None


def test_bootstrap_in_chunks_equals_one_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    stats = np.array([A.interval_unit([float(i % 7), float(i % 5), float(i % 3)]) for i in range(40)])
    whole = A.bootstrap(stats, "alpha_interval", resamples=300, seed=5)
    monkeypatch.setattr(A, "_CHUNK", 40 * 7)  # 7 resamples per chunk, not cached
    assert A.bootstrap(stats, "alpha_interval", resamples=300, seed=5) == pytest.approx(whole)


def _reference(matrix: list[list[float]], level: str) -> float | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
        except (ValueError, ZeroDivisionError):
            return None
    return None if math.isnan(value) or math.isinf(value) else float(value)


@st.composite
def reliability(draw: st.DrawFn, values: st.SearchStrategy[float]) -> list[list[float]]:
    coders = draw(st.integers(2, 4))
    n_units = draw(st.integers(1, 12))
    cell = st.one_of(values, st.just(nan))
    return [[draw(cell) for _ in range(n_units)] for _ in range(coders)]


@settings(max_examples=300, deadline=None)
@given(reliability(st.integers(0, 100).map(float)))
def test_interval_matches_krippendorff_package(matrix: list[list[float]]) -> None:
    ours = A.alpha_interval(units_of(matrix), resamples=0).value
    reference = _reference(matrix, "interval")
    if ours is None:
        assert reference is None
    else:
        assert reference is not None and ours == pytest.approx(reference, abs=1e-9)


@settings(max_examples=300, deadline=None)
@given(reliability(st.sampled_from([0.0, 1.0, 2.0])))
def test_nominal_matches_krippendorff_package(matrix: list[list[float]]) -> None:
    ours = A.alpha_nominal(units_of(matrix), [0.0, 1.0, 2.0], resamples=0).value
    reference = _reference(matrix, "nominal")
    if ours is None:
        assert reference is None
    else:
        assert reference is not None and ours == pytest.approx(reference, abs=1e-9)


labels = st.sampled_from(VERDICTS)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(labels, labels), min_size=1, max_size=60))
def test_kappa_matches_sklearn(pairs: list[tuple[str, str]]) -> None:
    units = {i: {"x": a, "y": b} for i, (a, b) in enumerate(pairs)}
    ours = A.cohen_kappa(units, VERDICTS, "x", "y", resamples=0).value
    a, b = zip(*pairs, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = cohen_kappa_score(a, b)
    if math.isnan(reference):
        assert ours is None
    else:
        assert ours is not None and ours == pytest.approx(reference, abs=1e-9)
