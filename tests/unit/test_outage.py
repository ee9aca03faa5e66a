"""The outage policy and the quiet logs, on fake clocks: what health says, when to exit, how many lines."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from judgeflow.quiet_logs import RepeatFilter
from streams.outage import BROKER, POSTGRES, Reachability, span
from streams.watchdog import WatchdogState


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reach(clock: Clock, caplog: pytest.LogCaptureFixture, **kw: float) -> Reachability:
    caplog.set_level(logging.INFO, "test.outage")
    return Reachability(
        clock=clock,
        wall=lambda: datetime(2026, 12, 6, 12, 0, 0, tzinfo=UTC),
        log=logging.getLogger("test.outage"),
        **kw,
    )


def test_an_outage_is_one_line_when_it_starts_one_per_interval_and_one_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    r = reach(clock, caplog, log_every=60.0)
    for _ in range(10 * 60 * 128):  # ten minutes of attempts, 128 a second (an exact step: no float drift)
        r.failed(BROKER, "broker 127.0.0.1:9092", ConnectionRefusedError("refused"))
        clock.now += 1 / 128
    r.succeeded(BROKER)
    lines = [rec.getMessage() for rec in caplog.records]
    assert len(lines) == 1 + 10 + 1 - 1  # start, one a minute (the tenth minute ends with the outage), end
    assert lines[0].startswith("broker 127.0.0.1:9092 unreachable (ConnectionRefusedError: refused)")
    assert lines[5] == (
        "broker 127.0.0.1:9092 unreachable for 5m 00s (since 12:00:00 UTC), 38,401 attempts "
        "(last: ConnectionRefusedError: refused)"
    )
    assert lines[-1] == "broker 127.0.0.1:9092 reachable again after 10m 00s, 76,800 failed attempts"
    assert r.down() == {}


def test_health_during_an_outage_not_ready_at_once_not_live_after_the_stall_deadline_lag_unknown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    r = reach(clock, caplog, stall_seconds=30.0)
    caught_up = WatchdogState(checked_at=clock.now, assigned=4, topic_partitions=4, lag=0, reason="lag 0 on 4")
    assert caught_up.live and caught_up.ready and r.judge(caught_up) is caught_up
    r.failed(BROKER, "broker 127.0.0.1:9092", "refused")
    r.failed(POSTGRES, "Postgres 127.0.0.1:5432/db", "refused")
    early = r.judge(caught_up)
    assert early.live and not early.ready and early.lag is None
    assert early.reason == (
        "broker 127.0.0.1:9092 unreachable for 0s (since 12:00:00 UTC); "
        "Postgres 127.0.0.1:5432/db unreachable for 0s (since 12:00:00 UTC)"
    )
    clock.now += 30
    late = r.judge(caught_up)
    assert not late.live and not late.ready and late.detail()["unreachable"] == [BROKER, POSTGRES]
    r.succeeded(BROKER)
    assert r.judge(caught_up).lag == 0  # Postgres alone: the broker's lag is known again
    r.succeeded(POSTGRES)
    assert r.judge(caught_up) is caught_up


def test_the_outage_exit_comes_after_the_window_and_never_when_it_is_zero(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    r = reach(clock, caplog, exit_seconds=120.0)
    never = reach(clock, caplog, exit_seconds=0.0)
    for x in (r, never):
        x.failed(POSTGRES, "Postgres h:5432/db", "gone")
    clock.now += 119
    assert r.exit_reason() is None
    clock.now += 1
    reason = r.exit_reason()
    assert reason is not None and "Postgres h:5432/db unreachable for 2m 00s" in reason
    assert "JUDGEFLOW_OUTAGE_EXIT_SECONDS=120" in reason
    clock.now += 10_000
    assert never.exit_reason() is None


def test_span_reads_like_people_write_it() -> None:
    assert [span(s) for s in (0, 45.9, 60, 300, 3599, 3600, 3725)] == [
        "0s",
        "45s",
        "1m 00s",
        "5m 00s",
        "59m 59s",
        "1h 00m",
        "1h 02m",
    ]


def test_the_repeat_filter_lets_the_first_through_then_one_per_interval_with_the_count() -> None:
    clock = Clock()
    f = RepeatFilter(every=60.0, clock=clock)

    def rec(name: str, msg: str, *args: object) -> logging.LogRecord:
        return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)

    passed = []
    for _ in range(4800):  # ten minutes, 8 a second (an exact step), two kinds of line
        for r in (
            rec("aiokafka.client", "Unable connect to node with id %s: %s", 1, "refused"),
            rec("aiokafka.cluster", "Unable to update metadata from %s", [1]),
        ):
            if f.filter(r):
                passed.append(r.getMessage())
        clock.now += 0.125
    assert len(passed) == 2 * 10
    assert passed[0] == "Unable connect to node with id 1: refused"
    assert passed[2] == "Unable connect to node with id 1: refused [and 479 more like it in the last 1m 00s]"
    own = rec("judgeflow.projector", "set aside %s", "x")
    assert all(f.filter(own) for _ in range(5))  # judgeflow's own lines are never held back here


def test_lines_that_differ_only_in_their_numbers_are_one_kind() -> None:
    clock = Clock()
    f = RepeatFilter(every=60.0, clock=clock)
    passed = []
    for size in range(100, 700):  # Faust formats these itself: a new text each time
        r = logging.LogRecord(
            "faust.producer", logging.WARNING, __file__, 1, f"producer buffer full size {size}", (), None
        )
        if f.filter(r):
            passed.append(r.getMessage())
        clock.now += 0.5
    assert len(passed) == 5 and passed[1] == "producer buffer full size 220 [and 119 more like it in the last 1m 00s]"
