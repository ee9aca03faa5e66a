"""Calibration from reviews: hand-computed small cases, scikit-learn's calibration_curve as the reference for
the reliability bins, and properties (ECE in [0, 1], 0 when calibrated, counts add up; the grid replay and the
suggestion equal replaying the real routing with the same thresholds)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.calibration import calibration_curve

from projections.calibration import (
    DoneEstimate,
    Grid,
    JudgeVerdict,
    RoutedClaim,
    Targets,
    expected_calibration_error,
    judge_reliability,
    overturns_by_reason,
    parse_rubric_arg,
    reliability_bins,
    replay,
    replay_grid,
    suggest_thresholds,
)
from schemas.rubric import RoutingPolicy
from streams.routing import route


def test_reliability_bins_and_ece_by_hand() -> None:
    points = [(0.05, True), (0.15, False), (0.15, True), (0.95, True), (1.0, False)]
    bins = reliability_bins(points, bins=10)
    filled = [(b.lower, b.count, b.mean_confidence, b.accuracy) for b in bins if b.count]
    assert filled == [(0.0, 1, 0.05, 1.0), (0.1, 2, 0.15, 0.5), (0.9, 2, pytest.approx(0.975), 0.5)]
    assert [b.count for b in bins] == [1, 2, 0, 0, 0, 0, 0, 0, 0, 2]
    # 1/5 * |1 - 0.05| + 2/5 * |0.5 - 0.15| + 2/5 * |0.5 - 0.975|
    assert expected_calibration_error(bins) == pytest.approx(0.19 + 0.14 + 0.19)
    assert expected_calibration_error(reliability_bins([], 10)) is None


def test_judge_reliability_groups_by_judge_and_counts_unclear_as_a_verdict() -> None:
    verdicts = [JudgeVerdict("a", "pass", 0.9, "pass"), JudgeVerdict("a", "fail", 0.9, "pass"),
                JudgeVerdict("b", "unclear", 0.2, "fail"), JudgeVerdict("b", "unclear", 0.3, "unclear")]  # fmt: skip
    a, b = judge_reliability(verdicts, bins=10)
    assert (a.judge_id, a.count, a.accuracy, a.mean_confidence) == ("a", 2, 0.5, 0.9)
    assert a.ece == pytest.approx(0.4)  # one bin: |0.5 - 0.9|
    assert (b.judge_id, b.count, b.accuracy) == ("b", 2, 0.5)
    assert b.ece == pytest.approx(0.5 * 0.2 + 0.5 * 0.7)  # bins 2 and 3, one verdict each: |0 - 0.2|, |1 - 0.3|
    assert [x.count for x in b.bins if x.count] == [1, 1]


def test_overturns_by_reason_by_hand() -> None:
    claims = [
        RoutedClaim("1", "fail", 0.2, 0.3, "human_review", "fail_low_confidence", "fail", "human_review",
                    "fail_low_confidence", human="pass"),
        RoutedClaim("2", "fail", 0.1, 0.4, "human_review", "fail_low_confidence", "fail", "human_review",
                    "fail_low_confidence", human="fail"),
        RoutedClaim("3", "pass", 0.6, 0.9, "second_judge", "borderline", "unclear", "human_review", "tie_unclear",
                    human="pass"),
        RoutedClaim("4", "unclear", None, 0.1, "human_review", "unclear", "unclear", "human_review", "unclear",
                    human="unclear"),
        RoutedClaim("5", "fail", 0.1, 0.9, "human_review", "spot_sample", "fail", "human_review", "spot_sample",
                    human="fail"),
        RoutedClaim("6", "pass", 0.9, 0.9, "done", "pass_confident", "pass", "done", "pass_confident", human=None),
    ]  # fmt: skip
    rows = {r.reason: r for r in overturns_by_reason(claims)}
    assert set(rows) == {"fail_low_confidence", "tie_unclear", "unclear", "spot_sample"}  # unreviewed left out
    low = rows["fail_low_confidence"]
    assert (low.route, low.reviewed, low.decided, low.overturned, low.overturn_rate) == ("human_review", 2, 2, 1, 0.5)
    tie = rows["tie_unclear"]  # the pipeline said unclear: nothing to overturn, one resolved by the human
    assert (tie.decided, tie.overturn_rate, tie.resolved) == (0, None, 1)
    assert (rows["unclear"].resolved, rows["spot_sample"].overturn_rate) == (0, 0.0)


def test_replay_counts_routes_and_estimates_the_done_routes_overturns_from_unbiased_samples() -> None:
    policy = RoutingPolicy(spot_sample_rate=0.0)
    claims = [
        RoutedClaim("a", "pass", 0.9, 0.9, human="fail", final_route="human_review"),  # done, overturned
        RoutedClaim("b", "pass", 0.95, 0.7, human="pass", final_route="human_review"),  # done, upheld
        RoutedClaim("c", "pass", 0.9, 0.9, final_route="done"),  # done, not audited
        RoutedClaim("d", "fail", 0.2, 0.3, human="pass", final_route="human_review"),  # human (fail_low_confidence)
        RoutedClaim("e", "pass", 0.6, 0.9, human="pass"),  # second judge (borderline)
        RoutedClaim("f", "fail", 0.1, 0.9, audit="pass", final_route="done"),  # done (confident_fail), audited
        RoutedClaim("g", "pass", 0.9, 0.9),  # done, its final route still waits for a second judge
    ]
    r = replay(claims, policy)
    assert (r.claims, r.human, r.second_judge, r.done, r.reviewed_done, r.overturned_done) == (7, 1, 1, 5, 2, 1)
    e = r.estimate
    assert (e.from_done, e.audited, e.audit_overturned, e.from_people, e.reviewed, e.overturned, e.pending) == (
        2, 1, 1, 2, 2, 1, 1)  # fmt: skip
    assert (r.human_share, r.second_share) == (1 / 7, 1 / 7)
    assert r.overturn_rate is None and not e.known and not r.eligible  # 1 audit and 2 reviews: a guess
    assert "1 audit review(s) of the 2 claims the pipeline routed done" in e.why_unknown()


def test_the_done_estimate_weighs_each_part_by_its_claims() -> None:
    # 100 claims the pipeline routed done (40 audited, 4 overturned), 50 routed to people (all reviewed, 10
    # overturned): 100/150 * 0.1 + 50/150 * 0.2
    e = DoneEstimate(from_done=100, audited=40, audit_overturned=4, from_people=50, reviewed=50, overturned=10)
    assert e.known and e.rate == pytest.approx(100 / 150 * 0.1 + 50 / 150 * 0.2)
    low, high = e.interval
    assert low is not None and high is not None and low < e.rate < high
    assert DoneEstimate(from_done=100, audited=29).rate is None
    assert DoneEstimate(from_people=5, reviewed=30).rate == 0.0


def test_suggestion_by_hand_picks_the_lowest_human_share_that_meets_the_targets() -> None:
    # Low-confidence fails the humans always upheld: a lower floor sends them to done without overturns; the
    # confident passes routed done were audited and upheld.
    claims = [RoutedClaim(f"f{i}", "fail", 0.1, 0.5, human="fail", final_route="human_review") for i in range(40)]
    claims += [RoutedClaim(f"p{i}", "pass", 0.95, 0.9, audit="pass", final_route="done") for i in range(40)]
    current = RoutingPolicy(spot_sample_rate=0.0)
    s = suggest_thresholds(claims, current, Targets(max_human_share=0.0, max_overturn=0.0, max_second_share=0.0),
                           step=0.1)  # fmt: skip
    assert s is not None and s.meets_targets and s.best is not None
    assert s.current.human_share == 0.5 and s.best.human_share == 0.0 and s.best.overturn_rate == 0.0
    assert s.best.policy.floor <= 0.5  # the fails' confidence now clears the floor
    # The tie-break keeps what it need not change, closest to the current thresholds.
    assert (s.best.policy.pass_score, s.best.policy.border, s.best.policy.floor) == (0.8, 0.45, 0.5)


def test_no_suggestion_sends_to_done_what_has_too_few_audit_reviews() -> None:
    # The same claims, but the passes routed done were never audited: their overturn rate is unknown.
    claims = [RoutedClaim(f"f{i}", "fail", 0.1, 0.5, human="fail", final_route="human_review") for i in range(40)]
    claims += [RoutedClaim(f"p{i}", "pass", 0.95, 0.9, final_route="done") for i in range(40)]
    s = suggest_thresholds(claims, RoutingPolicy(spot_sample_rate=0.0), step=0.1)
    assert s is not None and s.current.overturn_rate is None
    # what may be suggested sends none of the unaudited claims to done (here: the reviewed fails only)
    assert s.best is not None and s.best.estimate.from_done == 0 and s.best.estimate.known


def test_suggestion_says_when_no_candidate_meets_the_targets() -> None:
    claims = [RoutedClaim(f"u{i}", "unclear", None, 0.5, human="pass") for i in range(3)]  # always to humans
    s = suggest_thresholds(claims, RoutingPolicy(), Targets(max_human_share=0.1), step=0.25)
    assert s is not None and not s.meets_targets and s.best is None  # all to people and off target: no pick
    assert suggest_thresholds([], RoutingPolicy()) is None


def test_rubric_argument() -> None:
    assert parse_rubric_arg("NONE") is None
    assert parse_rubric_arg("6F1C2A4E-9D4B-5C1E-8A77-0B7E5D3C2A10") == "6f1c2a4e-9d4b-5c1e-8a77-0b7e5d3c2a10"
    with pytest.raises(ValueError, match="UUID"):
        parse_rubric_arg("rubric-1")


unit = st.floats(0.0, 1.0, allow_nan=False)
points = st.lists(st.tuples(unit, st.booleans()), max_size=200)


@given(points, st.integers(1, 20))
def test_bin_counts_sum_to_n_and_ece_lies_in_unit_interval(pts: list[tuple[float, bool]], n_bins: int) -> None:
    bins = reliability_bins(pts, n_bins)
    assert len(bins) == n_bins and sum(b.count for b in bins) == len(pts)
    for b in bins:
        if b.count:
            assert b.lower <= b.mean_confidence <= b.upper and 0.0 <= b.accuracy <= 1.0  # type: ignore[operator]
    ece = expected_calibration_error(bins)
    assert (ece is None) == (not pts)
    assert ece is None or 0.0 <= ece <= 1.0


@given(st.lists(st.tuples(st.integers(1, 12), st.integers(0, 12)), min_size=1, max_size=12), st.integers(1, 15))
def test_ece_is_zero_when_every_bin_agrees_as_often_as_it_is_confident(groups: list[tuple[int, int]],
                                                                       n_bins: int) -> None:  # fmt: skip
    """Groups of n verdicts at confidence k/n, k of them agreeing: every bin (any mix of groups) is calibrated."""
    pts = [(min(k, n) / n, i < min(k, n)) for n, k in groups for i in range(n)]
    assert expected_calibration_error(reliability_bins(pts, n_bins)) == pytest.approx(0.0, abs=1e-9)


@given(st.integers(1, 20), st.lists(st.tuples(st.integers(0, 19), st.floats(0.01, 0.99), st.booleans()),
                                    min_size=2, max_size=200))  # fmt: skip
def test_bins_match_scikit_learn_calibration_curve(n_bins: int, draws: list[tuple[int, float, bool]]) -> None:
    """Away from the bin edges (sklearn puts an edge value in the lower bin, this module in the upper one)."""
    pts = [((i % n_bins + u) / n_bins, correct) for i, u, correct in draws]
    pts[0], pts[1] = (pts[0][0], True), (pts[1][0], False)  # both labels, as calibration_curve needs
    prob_true, prob_pred = calibration_curve([int(c) for _, c in pts], [p for p, _ in pts], n_bins=n_bins)
    filled = [b for b in reliability_bins(pts, n_bins) if b.count]
    assert [b.accuracy for b in filled] == pytest.approx(list(prob_true))
    assert [b.mean_confidence for b in filled] == pytest.approx(list(prob_pred))


GRID_VALUES = [0.0, 0.25, 0.45, 0.5, 0.6, 0.75, 0.8, 1.0]
claim_value = st.one_of(st.sampled_from(GRID_VALUES), unit)
claims_strategy = st.lists(
    st.builds(RoutedClaim, claim_id=st.text("abcdef0123", min_size=1, max_size=6),
              verdict=st.sampled_from(["pass", "fail", "unclear"]), score=st.one_of(st.none(), claim_value),
              confidence=claim_value, human=st.one_of(st.none(), st.sampled_from(["pass", "fail", "unclear"])),
              final_route=st.sampled_from([None, "done", "human_review"]),
              audit=st.one_of(st.none(), st.sampled_from(["pass", "fail"]))),
    max_size=25,
).filter(lambda cs: all(c.score is not None or c.verdict == "unclear" for c in cs))  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(claims_strategy, st.sampled_from([0.0, 0.1, 0.5, 1.0]), st.sampled_from([0.25, 0.2]))
def test_grid_replay_equals_routing_every_candidate(claims: list[RoutedClaim], rate: float, step: float) -> None:
    grid = Grid.around(RoutingPolicy(spot_sample_rate=rate), step)
    fast = replay_grid(claims, grid)
    assert [r.policy for r in fast] == grid.policies()
    assert fast == [replay(claims, p) for p in grid.policies()]


@settings(max_examples=40, deadline=None)
@given(claims_strategy, st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def test_suggestion_figures_are_those_of_replaying_its_thresholds(claims: list[RoutedClaim], human: float,
                                                                  overturn: float, second: float) -> None:  # fmt: skip
    current = RoutingPolicy()
    targets = Targets(human, overturn, second)
    s = suggest_thresholds(claims, current, targets, step=0.25)
    if not claims:
        assert s is None
        return
    assert s is not None
    everyone = [replay(claims, p) for p in Grid.around(current, 0.25).policies()]
    if s.best is None:  # nothing to suggest: no candidate may be, or the closest sends nothing to done, off target
        eligible = [r for r in everyone if r.eligible]
        assert not s.meets_targets and not any(targets.excess(r) == 0.0 for r in eligible)
        return
    again = replay(claims, s.best.policy)
    assert s.best == again and again.eligible
    # Routing each claim by hand with those thresholds gives the same shares.
    routes = [route(c, s.best.policy).route for c in claims]
    assert s.best.human_share == routes.count("human_review") / len(claims)
    assert s.meets_targets == (targets.excess(again) == 0.0)
    # No candidate that may be suggested and meets the targets has a lower human share than the pick.
    everyone = [r for r in everyone if r.eligible]
    meeting = [r for r in everyone if targets.excess(r) == 0.0]
    assert s.meets_targets == bool(meeting)
    if meeting:
        assert s.best.human_share == min(r.human_share for r in meeting)
    else:
        assert math.isclose(targets.excess(again), min(targets.excess(r) for r in everyone))
