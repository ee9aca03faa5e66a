"""The bench's half-load pass, its pure parts: the workload that fills the time, the
latency summary, the p99 per slice of input, and the measured duration's settings."""

from __future__ import annotations

import dataclasses

import pytest

from bench import pipeline
from bench.runner import FULL_HALF_LOAD_SECONDS, HALF_LOAD_SECONDS_ENV, Sizes, short_note, sizes_from_env
from streams.topics import TopicNames


def _events(runs: int, claims: int) -> int:
    return runs * 4 + claims


@pytest.mark.parametrize(("rate", "seconds"), [(1_400.0, 30.0), (1_131.0, 10.0), (587.3, 5.0), (3_000.0, 45.0)])
def test_the_mix_fills_the_time_at_the_rate_in_the_default_proportion(rate: float, seconds: float) -> None:
    runs, claims = pipeline.workload_mix(rate, seconds, 300, 3000)
    assert _events(runs, claims) / rate == pytest.approx(seconds, abs=4 / rate)
    assert _events(runs, claims) >= rate * seconds  # at least the time asked for
    assert claims / runs == pytest.approx(10, rel=0.01)


def test_the_mix_keeps_other_proportions_and_one_kind_alone() -> None:
    runs, claims = pipeline.workload_mix(1_000.0, 30.0, 100, 100)
    assert runs == claims == 6000
    assert pipeline.workload_mix(1_000.0, 30.0, 100, 0) == (7500, 0)
    assert pipeline.workload_mix(1_000.0, 30.0, 0, 500) == (0, 30_000)


def test_a_tiny_warm_up_still_has_its_minimum_of_runs() -> None:
    runs, claims = pipeline.workload_mix(1_000.0, 0.01, 300, 3000, min_runs=40)
    assert (runs, claims) == (40, 400)


def test_the_mix_builds_a_workload_of_that_many_events() -> None:
    runs, claims = pipeline.workload_mix(200.0, 3.0, 300, 3000)
    wl = pipeline.build_workload(TopicNames.with_prefix("t."), runs, claims, seed=5)
    assert len(wl.records) == 1 + _events(runs, claims)  # one rubric besides
    assert len(wl.output_of) == 3 * runs and len(wl.claim_of) == claims


def test_warm_up_and_measured_workloads_share_no_ids() -> None:
    names = TopicNames.with_prefix("t.")
    measured = pipeline.build_workload(names, 20, 200, seed=12)
    warm = pipeline.build_workload(names, 20, 200, seed=12 + pipeline.WARMUP_SEED_OFFSET)
    assert not set(measured.output_of) & set(warm.output_of)
    assert not set(measured.claim_of) & set(warm.claim_of)


def test_summary_is_nearest_rank_percentiles_and_the_max() -> None:
    values = [float(v) for v in range(1, 201)]  # 1 .. 200 ms
    assert pipeline.summary(values) == {"p50": 100.0, "p95": 190.0, "p99": 198.0, "max": 200.0}
    assert pipeline.summary([7.0]) == {"p50": 7.0, "p95": 7.0, "p99": 7.0, "max": 7.0}


def test_p99_by_slice_groups_inputs_by_send_time() -> None:
    start = 1_000.0
    samples = [(start + i * 0.01, 10.0) for i in range(3000)]  # 30 s of inputs at 10 ms
    samples[5] = (start + 0.05, 900.0)  # late ones in the first slice only
    samples[6] = (start + 0.06, 800.0)
    samples[2500] = (start + 25.0, 50.0)
    assert pipeline.p99_by_slice(samples, start, start + 29.99, 10.0) == [10.0, 10.0, 10.0]
    late = [(at, 900.0 if i < 30 else ms) for i, (at, ms) in enumerate(samples)]
    assert pipeline.p99_by_slice(late, start, start + 29.99, 10.0) == [900.0, 10.0, 10.0]


def test_p99_by_slice_puts_a_short_remainder_in_the_last_slice() -> None:
    samples = [(0.0, 1.0), (9.9, 2.0), (10.0, 3.0), (12.0, 4.0)]
    assert pipeline.p99_by_slice(samples, 0.0, 12.0, 10.0) == [4.0]  # 12 s is one slice and a short remainder
    assert pipeline.p99_by_slice(samples, 0.0, 16.0, 10.0) == [2.0, 4.0]
    assert pipeline.p99_by_slice([(3.0, 5.0)], 0.0, 0.0, 10.0) == [5.0]


def test_default_and_quick_half_load_durations() -> None:
    assert (Sizes().half_load_seconds, Sizes().half_load_warmup_seconds) == (FULL_HALF_LOAD_SECONDS, 10.0)
    assert FULL_HALF_LOAD_SECONDS >= 30
    quick = Sizes.quick()
    assert 0 < quick.half_load_seconds < FULL_HALF_LOAD_SECONDS
    assert quick.is_quick() and not Sizes().is_quick()
    assert dataclasses.replace(quick, half_load_seconds=60.0).is_quick()
    assert not dataclasses.replace(quick, runs=200).is_quick()


def test_a_shorter_pass_says_why_in_its_step_line() -> None:
    assert short_note(Sizes()) == ""
    assert "--quick" in short_note(Sizes.quick())
    assert HALF_LOAD_SECONDS_ENV in short_note(dataclasses.replace(Sizes(), half_load_seconds=12.0))
    assert short_note(dataclasses.replace(Sizes.quick(), half_load_seconds=45.0)) == ""


def test_the_measured_duration_comes_from_the_environment_when_set() -> None:
    assert sizes_from_env(Sizes(), {}) == Sizes()
    assert sizes_from_env(Sizes(), {HALF_LOAD_SECONDS_ENV: " "}) == Sizes()
    assert sizes_from_env(Sizes(), {HALF_LOAD_SECONDS_ENV: "60"}).half_load_seconds == 60.0
    assert sizes_from_env(Sizes.quick(), {HALF_LOAD_SECONDS_ENV: "2.5"}).half_load_seconds == 2.5
    for bad in ("0", "-3", "nan"):
        with pytest.raises(ValueError, match=HALF_LOAD_SECONDS_ENV):
            sizes_from_env(Sizes(), {HALF_LOAD_SECONDS_ENV: bad})
    with pytest.raises(ValueError):
        sizes_from_env(Sizes(), {HALF_LOAD_SECONDS_ENV: "half a minute"})
