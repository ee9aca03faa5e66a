"""Cohen's kappa against scikit-learn's implementation on random label pairs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from projections.analytics import cohen_kappa

labels = st.sampled_from(["pass", "fail", "unclear"])


@given(st.lists(st.tuples(labels, labels), min_size=1, max_size=60))
def test_matches_sklearn(pairs: list[tuple[str, str]]) -> None:
    ours = cohen_kappa(pairs)
    a, b = zip(*pairs, strict=True)
    if len(set(a)) == 1 and set(a) == set(b):
        assert ours is None  # expected agreement is 1: undefined, never 0
        return
    reference = cohen_kappa_score(a, b)
    if math.isnan(reference):
        assert ours is None
    else:
        assert ours == pytest.approx(reference, abs=1e-9)


def test_undefined_cases_are_none_not_zero() -> None:
    assert cohen_kappa([]) is None
    assert cohen_kappa([("pass", "pass")] * 5) is None
    assert cohen_kappa([("pass", "fail"), ("fail", "pass")]) == pytest.approx(-1.0)
    assert cohen_kappa([("pass", "pass"), ("fail", "fail")]) == pytest.approx(1.0)
