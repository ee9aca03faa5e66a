"""Drift per judge without a broker: the inline accumulator, partial merging, window closing, the detector and its
bounds. The stream here goes accumulator -> partial records -> `DriftStage.handle`, as the worker wires it."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.drift import JudgeDriftAlert
from streams.claims import ClaimStage
from streams.drift import (
    TICK,
    DriftAccumulator,
    DriftOptions,
    DriftStage,
    binomial_tail,
    detect,
    merge,
    normal_tail,
    parse_windows,
    watch,
)
from streams.envelope import Outgoing, SourceRef
from streams.judge_summary import JudgeSummary
from streams.stage import Inbound

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
HOUR = 3600
JUDGES = ("j1", "j2", "j3", "j4", "j5")
LANES = ("accuracy", "clarity", "depth", "safety")


class Pipeline:
    """Accumulator and drift stage wired as in the worker, with a clock the test moves (live: event time)."""

    def __init__(self, options: DriftOptions | None = None) -> None:
        self.options = options or DriftOptions()
        self.acc = DriftAccumulator(self.options, producer_id="test")
        self.now = T0
        self.stage = DriftStage(self.options, clock=lambda: datetime.fromtimestamp(self.now, UTC))
        self.states: dict[str, dict[str, Any]] = {}
        self.alerts: list[JudgeDriftAlert] = []
        self.offset = 0

    def deliver(self, record: Outgoing) -> list[Outgoing]:
        self.offset += 1
        key = (record.key or b"").decode()
        step = self.stage.handle(Inbound("drift_partials", record.key, record.value,
                                         SourceRef("judgeflow.drift.partials", 0, self.offset, record.key)),
                                 self.states.get(key))  # fmt: skip
        if step.changed and step.state is not None:
            self.states[key] = step.state
        self.alerts += [JudgeDriftAlert.model_validate_json(r.value) for r in step.records]
        return step.records

    def flush(self) -> None:
        for record in self.acc.drain():
            self.deliver(record)

    def close_all(self, later: float = 30 * 86400) -> None:
        """The clock moves far past every window: the sweep ticks each judge."""
        self.now += later
        for record in self.stage.sweep(list(self.states.items())):
            self.deliver(record)


def output(rng: random.Random, judge: str, i: int, lane_shift: float = 0.0) -> JudgeSummary:
    failed = rng.random() < 0.05
    timed_out = failed and rng.random() < 0.5
    lanes = {} if failed else {lane: max(0, min(100, round(rng.gauss(70, 10) + lane_shift))) for lane in LANES}
    return JudgeSummary(judge_run_id=str(i), judge_model=judge, status="failed" if failed else "complete",
                        lanes=lanes, confidence=rng.choice(["low", "medium", "medium", "high"]),
                        failure_reason=("timeout: x" if timed_out else "SCHEMA") if failed else None)  # fmt: skip


def stream(pipe: Pipeline, seed: int, events: int, hours: float, *, shift_at: float | None = None,
           flush_every: int = 1000) -> None:  # fmt: skip
    """A seeded mix of claim checks and judge outputs from five judges, evenly over `hours` from T0; from
    `shift_at` on, judge j1's lane scores are 10 points (0.10) higher."""
    rng = random.Random(seed)
    step = hours * HOUR / events
    for i in range(events):
        at = T0 + i * step
        pipe.now = at
        judge = rng.choice(JUDGES)
        if rng.random() < 0.5:
            score = min(1.0, max(0.0, rng.gauss(0.7, 0.15)))
            verdict = "fail" if rng.random() < 0.2 else ("unclear" if rng.random() < 0.05 else "pass")
            if verdict == "fail" and rng.random() < 0.25:
                score = max(score, 0.85)
            pipe.acc.observe_check(judge, verdict, score, rng.uniform(0.3, 1.0), 0.6, at)
        else:
            shifted = shift_at is not None and judge == "j1" and at >= shift_at
            pipe.acc.observe_output(output(rng, judge, i, 10.0 if shifted else 0.0), at)
        if i % flush_every == 0:
            pipe.flush()
    pipe.flush()


def test_windows_tumble_at_their_boundaries() -> None:
    acc = DriftAccumulator(DriftOptions(windows=(HOUR, 86400)))
    for at in (T0 + HOUR - 0.001, T0 + HOUR, T0 + 2 * HOUR - 0.001, T0 + 86400):
        acc.observe_check("j", "pass", 0.9, 0.9, 0.6, at)
    hours = sorted((start, c[0]) for (_, size, start), c in acc.checks.items() if size == HOUR)
    days = sorted((start, c[0]) for (_, size, start), c in acc.checks.items() if size == 86400)
    assert hours == [(T0, 1), (T0 + HOUR, 2), (T0 + 86400, 1)]
    assert days == [(T0, 3), (T0 + 86400, 1)]
    [record] = acc.drain()
    doc = json.loads(record.value)
    assert record.key == b"j" and doc["seq"] == 1 and len(doc["windows"]) == 5
    assert acc.drain() == [] and not acc.checks  # cleared


def test_checks_count_fails_contradictions_and_low_confidence() -> None:
    acc = DriftAccumulator(DriftOptions(windows=(HOUR,)))
    acc.observe_check("j", "fail", 0.85, 0.9, 0.6, T0)  # a contradiction (fail, score >= 0.80)
    acc.observe_check("j", "fail", 0.2, 0.5, 0.6, T0)  # low confidence
    acc.observe_check("j", "unclear", None, 0.7, 0.75, T0)  # low for its rubric's floor
    stats = json.loads(acc.drain()[0].value)["windows"][0]["stats"]
    assert stats["check:fail_rate"] == [3, 2, 2]
    assert stats["check:contradiction_rate"] == [3, 1, 1]
    assert stats["check:low_confidence_share"] == [3, 2, 2]
    assert stats["check:mean_score"] == pytest.approx([2, 1.05, 0.85**2 + 0.04])


observation = st.tuples(
    st.sampled_from(JUDGES[:2]), st.booleans(), st.floats(0, 1), st.floats(0, 1),
    st.floats(0, 3 * 86400), st.integers(0, 100),
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(observation, min_size=1, max_size=60), st.lists(st.integers(0, 60), max_size=5))
def test_merged_partials_equal_single_pass_statistics(obs: list[Any], cuts: list[int]) -> None:
    """Any split of the events into flushes (one accumulator or several workers) merges to the same moments."""

    def feed(acc: DriftAccumulator, part: list[Any]) -> None:
        for judge, is_check, score, conf, offset, lane in part:
            if is_check:
                acc.observe_check(judge, "fail" if score < 0.5 else "pass", score, conf, 0.6, T0 + offset)
            else:
                acc.observe_output(JudgeSummary(judge_run_id="x", judge_model=judge, lanes={"a": lane, "b": 100 - lane},
                                                confidence="low" if conf < 0.3 else "high"), T0 + offset)  # fmt: skip

    def merged(records: list[Outgoing]) -> dict[tuple[str, int, float], dict[str, list[float]]]:
        out: dict[tuple[str, int, float], dict[str, list[float]]] = {}
        for r in records:
            doc = json.loads(r.value)
            for w in doc["windows"]:
                merge(out.setdefault((doc["judge"], w["size"], w["start"]), {}), w["stats"])
        return out

    single = DriftAccumulator(DriftOptions())
    feed(single, obs)
    whole = merged(single.drain())
    bounds = [0, *sorted(c % (len(obs) + 1) for c in cuts), len(obs)]
    records = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        acc = DriftAccumulator(DriftOptions())
        feed(acc, obs[lo:hi])
        records += acc.drain()
    parts = merged(records)
    assert parts.keys() == whole.keys()
    for key, stats in whole.items():
        assert parts[key].keys() == stats.keys()
        for name, moments in stats.items():
            assert parts[key][name] == pytest.approx(moments, rel=1e-9, abs=1e-9)


SHIFT_AT = T0 + 100 * HOUR
EVENTS_PER_JUDGE_OUTPUTS_PER_HOUR = 50  # 100k events over 200 h, half outputs, five judges


def test_a_ten_point_lane_shift_alerts_at_the_first_window_after_it() -> None:
    """Stated detection delay: with ~50 outputs of the judge per hour (lane sd 0.10), a 0.10 shift in its lane
    scores is alerted when the first hour window after the shift closes: within 1 window, ~50 shifted outputs."""
    pipe = Pipeline()
    stream(pipe, seed=7, events=100_000, hours=200, shift_at=SHIFT_AT)
    pipe.close_all()
    lanes = [a for a in pipe.alerts if a.statistic == "lane_mean_score"]
    assert lanes and {a.judge for a in lanes} == {"j1"}
    first = min(datetime.fromisoformat(a.window_start).timestamp() for a in lanes)
    assert first == SHIFT_AT  # the shift's own window (it starts on an hour here)
    assert len(lanes) >= 3  # most of its four lanes
    a = lanes[0]
    assert a.window_seconds == HOUR and a.direction == "up" and a.source == "judge_output"
    assert a.value - a.baseline_mean >= 0.05 and a.z >= a.z_threshold == 5.0
    assert a.n >= 30 and a.baseline_windows == 24 and a.lane in LANES
    assert [x for x in pipe.alerts if x.statistic != "lane_mean_score"] == []


def test_a_seeded_stationary_stream_of_100k_events_raises_no_alert() -> None:
    pipe = Pipeline()
    stream(pipe, seed=11, events=100_000, hours=200)
    pipe.close_all()
    assert pipe.alerts == []
    closed = sum(len(s["closed"]) for st_ in pipe.states.values() for s in st_["windows"].values())
    assert closed == len(JUDGES) * (24 + 9)  # every judge tested: 24 hour windows kept, 9 days


def test_state_stays_bounded_old_windows_are_deleted() -> None:
    pipe = Pipeline(DriftOptions(baseline_windows=8, min_baseline_windows=4))
    stream(pipe, seed=3, events=20_000, hours=100)
    for state in pipe.states.values():
        hours, days = state["windows"][str(HOUR)], state["windows"]["86400"]
        assert len(hours["closed"]) == 8 and len(hours["open"]) <= 2
        assert [c[0] for c in hours["closed"]] == sorted(c[0] for c in hours["closed"])
        assert hours["closed"][-1][0] >= T0 + 90 * HOUR  # the newest ones kept
        assert len(days["closed"]) <= 8
        assert len(json.dumps(state)) < 60_000
    pipe.close_all()
    assert not any(watch(s) for s in pipe.states.values())  # nothing open: the sweep stops looking


def test_a_window_closes_by_watermark_or_by_the_clock_once_idle() -> None:
    pipe = Pipeline(DriftOptions(windows=(HOUR,), grace_seconds=60))
    pipe.acc.observe_check("j", "pass", 0.9, 0.9, 0.6, T0 + 10)
    pipe.flush()
    assert pipe.stage.due(pipe.states["j"], T0 + HOUR + 59) == []
    assert pipe.stage.due(pipe.states["j"], T0 + HOUR + 60) == [(HOUR, T0)]  # the clock, idle for the grace
    pipe.acc.observe_check("j", "pass", 0.9, 0.9, 0.6, T0 + 10 * HOUR)  # an event time ahead of the clock
    pipe.now = T0 + 20
    pipe.flush()
    assert pipe.states["j"]["wm"] == T0 + 20  # never past the clock: a bogus future time closes nothing
    assert len(pipe.states["j"]["windows"][str(HOUR)]["open"]) == 2
    pipe.acc.observe_check("j", "pass", 0.9, 0.9, 0.6, T0 + HOUR + 61)  # the watermark passes end + grace
    pipe.now = T0 + HOUR + 61  # the window was just touched: the clock alone would wait for it to go idle
    pipe.flush()
    state = pipe.states["j"]["windows"][str(HOUR)]
    assert [c[0] for c in state["closed"]] == [T0] and sorted(state["open"]) == [repr(T0 + HOUR), repr(T0 + 10 * HOUR)]


def test_a_redelivered_partial_is_merged_once_and_a_redelivered_close_resends_its_alerts() -> None:
    opts = DriftOptions(windows=(HOUR,), min_baseline_windows=2, baseline_windows=4, min_window_events=2)
    pipe = Pipeline(opts)
    for h in range(3):
        for score in (0.5, 0.52, 0.48):
            pipe.acc.observe_check("j", "pass", score, 0.9, 0.6, T0 + h * HOUR)
        pipe.flush()
    assert pipe.acc.drain() == []
    for score in (0.9, 0.92):
        pipe.acc.observe_check("j", "pass", score, 0.9, 0.6, T0 + 3 * HOUR)
    [record] = pipe.acc.drain()
    pipe.deliver(record)
    before = json.dumps(pipe.states["j"])
    pipe.offset -= 1  # the same coordinates again: a redelivery
    assert pipe.deliver(record) == [] and json.dumps(pipe.states["j"]) == before
    pipe.now = T0 + 5 * HOUR
    [tick] = pipe.stage.sweep(list(pipe.states.items()))
    assert tick.value == TICK
    first = pipe.deliver(tick)
    assert [JudgeDriftAlert.model_validate_json(r.value).statistic for r in first] == ["mean_score"]
    pipe.offset -= 1
    assert pipe.deliver(tick) == first  # same bytes, same event id
    alert = pipe.alerts[0]
    assert alert.n == 2 and alert.value == pytest.approx(0.91) and alert.baseline_mean == pytest.approx(0.5)


def test_the_detector_needs_enough_windows_events_and_a_move_that_matters() -> None:
    opts = DriftOptions(min_baseline_windows=3, baseline_windows=5, min_window_events=10, z_threshold=4)
    base = [[100.0, 50.0 + d, 50.0 + d] for d in (-3, 0, 3, 1)]  # shares around 0.5
    assert detect([100, 80, 80], base, opts, rate=True) is not None
    assert detect([100, 80, 80], base[:2], opts, rate=True) is None  # too few baseline windows
    assert detect([9, 8, 8], base, opts, rate=True) is None  # too few events in the window
    assert detect([100, 53, 53], base, opts, rate=True) is None  # within noise
    flat = [[1000.0, 500.0, 250.0 + 0.0001 * i] for i in range(4)]  # identical windows: sd floor, min_delta rules
    assert detect([1000, 540, 292], flat, opts) is None
    assert detect([1000, 560, 320], flat, opts) is not None


def test_rare_rates_need_the_exact_binomial_tail() -> None:
    """A 2% rate over baseline windows of 50: 6 of 45 passes the normal z but not the binomial tail at z=5."""
    opts = DriftOptions(min_baseline_windows=6, z_threshold=5)
    base = [[50.0, float(c), float(c)] for c in (1, 1, 0, 2, 1, 1, 0, 1, 2, 1, 1, 1)]
    window = [45.0, 6.0, 6.0]
    assert detect(window, base, opts, rate=False) is not None
    assert detect(window, base, opts, rate=True) is None
    assert binomial_tail(45, 0.02, 6, up=True) > normal_tail(5)
    assert binomial_tail(10, 0.5, 10, up=True) == pytest.approx(0.5**10)
    assert binomial_tail(10, 0.5, 0, up=False) == pytest.approx(0.5**10)


def test_window_sizes_parse_from_settings() -> None:
    assert parse_windows("1h,1d") == (3600, 86400)
    assert parse_windows("15m, 1h") == (900, 3600)
    for bad in ("", "1x", "0h", "h"):
        with pytest.raises(ValueError):
            parse_windows(bad)


def claim_check(judge: str, score: float, checked_at: str | None) -> bytes:
    return json.dumps({"schema_version": "1.0", "claim_id": "c1", "judge_id": judge, "source_id": "s",
                       "verdict": "fail", "score": score, "confidence": 0.5, "reason": "r", "passage_quote": None,
                       "passage": "p", "claim_text": "t", "checked_at": checked_at}).encode()  # fmt: skip


def test_the_claim_step_observes_each_accepted_check_once_at_its_own_time() -> None:
    acc = DriftAccumulator(DriftOptions(windows=(HOUR,)))
    stage = ClaimStage(lambda _: None, clock=lambda: datetime(2026, 3, 1, tzinfo=UTC), retention=timedelta(days=1),
                       max_payload_bytes=1_000_000, drift=acc)  # fmt: skip
    state = None
    for judge, checked_at, offset in (("a", "2026-01-01T00:30:00Z", 1), ("a", "2026-01-01T00:30:00Z", 1),
                                      ("b", None, 2)):  # fmt: skip
        src = SourceRef("judge.checks", 0, offset, b"c1")
        record = Inbound("checks", b"c1", claim_check(judge, 0.9, checked_at), src, timestamp=T0 + 2 * HOUR)
        step = stage.handle(record, state)
        state = step.state if step.changed else state
    # "a" once (its redelivery adds nothing) in its checked_at hour; "b" at its record's timestamp
    assert {(j, start): c[:3] for (j, _, start), c in acc.checks.items()} == {
        ("a", T0): [1, 1, 1], ("b", T0 + 2 * HOUR): [1, 1, 1]}  # fmt: skip
