"""The refresh's compact path (facts into typed arrays, straight to a matrix) against the dict-per-unit path the
figures are defined on: equal for every sequence of facts in the order the SQL reads them, repeated facts included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from projections import agreement
from projections.agreement_store import VERDICTS, claim_figures, lane_figures

JUDGES = ["j-a", "j-b", "j-c", "j-d"]
LANES = ["correctness", "process"]


def _lane_reference(rows: list[tuple[str, str, str, int]]) -> list[tuple[str, str, str, agreement.Agreement]]:
    by_lane: dict[str, dict[str, dict[str, object]]] = {}
    for run, judge, lane, score in rows:
        by_lane.setdefault(lane, {}).setdefault(run, {})[judge] = score
    return [
        (lane, a, b, fig)
        for lane, units in sorted(by_lane.items())
        for (a, b), fig in agreement.interval_figures(units, resamples=50, seed=7).items()
    ]


def _claim_reference(rows: list[tuple[str, str, str]]) -> list[tuple[str, str, str, agreement.Agreement]]:
    units: dict[str, dict[str, object]] = {}
    for claim, judge, verdict in rows:
        units.setdefault(claim, {})[judge] = verdict
    figures = agreement.nominal_figures(units, VERDICTS, resamples=50, seed=7)
    return [("", a, b, fig) for (a, b), figs in figures.items() for fig in figs]


lane_rows = st.lists(
    st.tuples(st.integers(0, 12), st.sampled_from(JUDGES), st.sampled_from(LANES), st.integers(0, 10)), max_size=60
).map(lambda rows: [(f"run-{r:02d}", j, lane, s) for r, j, lane, s in sorted(rows, key=lambda t: (t[0], t[1], t[2]))])
claim_rows = st.lists(
    st.tuples(st.integers(0, 15), st.sampled_from(JUDGES), st.sampled_from(VERDICTS)), max_size=60
).map(lambda rows: [(f"claim-{c:02d}", j, v) for c, j, v in sorted(rows, key=lambda t: (t[0], t[1]))])


@settings(max_examples=150, deadline=None)
@given(lane_rows)
def test_lane_figures_equal_the_dict_path(rows: list[tuple[str, str, str, int]]) -> None:
    assert lane_figures(iter(rows), resamples=50, seed=7) == _lane_reference(rows)


@settings(max_examples=150, deadline=None)
@given(claim_rows)
def test_claim_figures_equal_the_dict_path(rows: list[tuple[str, str, str]]) -> None:
    assert claim_figures(iter(rows), resamples=50, seed=7) == _claim_reference(rows)
