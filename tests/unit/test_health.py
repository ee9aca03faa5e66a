"""The progress watchdog's decisions (fake clock, no broker) and the in-loop
health server over a real socket on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter

from judgeflow.health import HealthServer
from streams.watchdog import Action, ProgressWatchdog, WatchdogState

A, B = ("t.checks", 0), ("t.checks", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def dog(stall: float = 60, recovery: float = 30, ready_lag: int = 0) -> tuple[ProgressWatchdog, Clock]:
    clock = Clock()
    return ProgressWatchdog(stall, recovery, ready_lag=ready_lag, clock=clock), clock


def test_a_partition_with_lag_and_no_progress_stalls_after_the_setting_then_exits_after_the_recovery() -> None:
    w, clock = dog(stall=60, recovery=30)
    assert w.observe({A: 5, B: 10}, {A: 10, B: 10}, 8).action is Action.NONE
    clock.now += 59
    s = w.observe({A: 5, B: 10}, {A: 10, B: 10}, 8)
    assert (s.action, s.stalled, s.live) == (Action.NONE, (), True)
    assert s.last_progress_seconds == 59
    clock.now += 1
    s = w.observe({A: 5, B: 10}, {A: 10, B: 10}, 8)
    assert (s.action, s.stalled, s.live, s.ready, s.stalled_count) == (Action.RECOVER, (A,), False, False, 1)
    assert "t.checks[0]" in s.reason and "t.checks[1]" not in s.reason
    clock.now += 29
    assert w.observe({A: 5, B: 10}, {A: 10, B: 10}, 8).action is Action.NONE  # recovery under way: once only
    clock.now += 1
    assert w.observe({A: 5, B: 10}, {A: 10, B: 10}, 8).action is Action.EXIT


def test_progress_or_catching_up_resets_the_clock_and_the_recovery() -> None:
    w, clock = dog(stall=60, recovery=30)
    w.observe({A: 5}, {A: 10}, 4)
    clock.now += 50
    assert w.observe({A: 6}, {A: 10}, 4).action is Action.NONE  # moved: quiet time starts again
    clock.now += 59
    assert w.observe({A: 6}, {A: 10}, 4).stalled == ()
    clock.now += 1
    assert w.observe({A: 6}, {A: 10}, 4).action is Action.RECOVER
    clock.now += 10
    s = w.observe({A: 7}, {A: 10}, 4)  # the rebuilt consumer commits again
    assert (s.action, s.stalled, s.recovering_seconds) == (Action.NONE, (), None)
    clock.now += 1000
    s = w.observe({A: 10}, {A: 10}, 4)  # idle and caught up for ages is not a stall
    assert (s.action, s.live, s.ready, s.lag, s.last_progress_seconds) == (Action.NONE, True, True, 0, 0)
    clock.now += 1000
    assert w.observe({A: 10}, {A: 10}, 4).action is Action.NONE


def test_new_records_on_an_idle_partition_get_the_full_stall_time() -> None:
    w, clock = dog(stall=60)
    w.observe({A: 10}, {A: 10}, 4)
    clock.now += 500
    w.observe({A: 10}, {A: 10}, 4)
    clock.now += 5
    assert w.observe({A: 10}, {A: 12}, 4).stalled == ()  # records arrived 5 s ago, not 505


def test_no_partition_assigned_while_the_topics_have_some_is_a_stall() -> None:
    w, clock = dog(stall=60, recovery=30)
    assert w.observe({}, {}, 0).action is Action.NONE  # no topics yet: nothing to be assigned
    clock.now += 100
    assert w.observe({}, {}, 0).live
    s = w.observe({}, {}, 48)
    assert (s.action, s.live, s.ready, s.reason) == (Action.NONE, True, False, "no partition assigned yet")
    clock.now += 60
    s = w.observe({}, {}, 48)
    assert (s.action, s.unassigned_stall, s.stalled_count, s.live) == (Action.RECOVER, True, 48, False)
    assert "48" in s.reason
    clock.now += 30
    assert w.observe({}, {}, 48).action is Action.EXIT


def test_a_rebuild_that_reassigns_without_progress_still_ends_in_exit() -> None:
    w, clock = dog(stall=60, recovery=30)
    w.observe({A: 5}, {A: 10}, 4)
    clock.now += 60
    assert w.observe({A: 5}, {A: 10}, 4).action is Action.RECOVER
    clock.now += 5
    assert w.observe({}, {}, 4).action is Action.NONE  # rebuilding: nothing assigned for a moment
    clock.now += 5
    assert w.observe({A: 5}, {A: 10}, 4).action is Action.NONE  # reassigned at the same stored offset
    clock.now += 20
    assert w.observe({A: 5}, {A: 10}, 4).action is Action.EXIT


def test_readiness_needs_assignment_known_ends_and_lag_within_the_setting() -> None:
    w, clock = dog(ready_lag=100)
    assert not w.state.ready and w.state.live  # before the first check
    assert not w.observe({A: 0}, {A: None}, 4).ready  # end offsets unknown
    assert not w.observe({A: 0, B: 0}, {A: 60, B: 60}, 4).ready  # 120 behind
    s = w.observe({A: 0, B: 20}, {A: 60, B: 60}, 4)
    assert s.ready and s.lag == 100 and s.detail()["lag"] == 100


def test_an_old_verdict_is_reported_dead() -> None:
    w, clock = dog()
    s = w.observe({A: 10}, {A: 10}, 4)
    assert s.stale(clock.now + 10, 15) is s
    old = s.stale(clock.now + 16, 15)
    assert not old.live and not old.ready and "16s" in old.reason


def test_settings_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ProgressWatchdog(0, 10)


def test_stall_settings_come_from_the_environment() -> None:
    from judgeflow.config import ConfigError, load_settings

    s = load_settings({"JUDGEFLOW_STALL_SECONDS": "5", "JUDGEFLOW_STALL_RECOVERY_SECONDS": "7",
                       "JUDGEFLOW_READY_LAG": "0"})  # fmt: skip
    assert (s.stall_seconds, s.stall_recovery_seconds, s.ready_lag) == (5, 7, 0)
    for bad in ({"JUDGEFLOW_STALL_SECONDS": "0"}, {"JUDGEFLOW_READY_LAG": "-1"}):
        with pytest.raises(ConfigError):
            load_settings(bad)


@dataclass
class FakeStatus:
    live: bool
    ready: bool

    def detail(self) -> dict[str, Any]:
        return {"reason": f"live={self.live} ready={self.ready}"}


async def get(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    if not request.startswith(b"HEAD"):  # HEAD announces the length of the body it leaves out
        assert int(headers["Content-Length"]) == len(body)
    return int(lines[0].split()[1]), headers, body


def test_health_server_answers_from_the_loop_with_the_providers_verdict() -> None:
    registry = CollectorRegistry()
    Counter("judgeflow_test_things_total", "things", registry=registry).inc(3)
    current = {"status": FakeStatus(live=True, ready=False)}

    async def run() -> None:
        async with HealthServer(lambda: current["status"], port=0, registry=registry) as server:
            assert server.port > 0

            async def fetch(path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
                return await get(server.port, f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())

            code, headers, body = await fetch("/healthz")
            assert code == 200 and headers["Content-Type"] == "application/json"
            assert json.loads(body) == {"reason": "live=True ready=False"}
            code, _, body = await fetch("/readyz")
            assert code == 503 and json.loads(body)["reason"] == "live=True ready=False"
            current["status"] = FakeStatus(live=False, ready=True)
            assert (await fetch("/healthz"))[0] == 503
            assert (await fetch("/readyz?verbose=1"))[0] == 200
            code, headers, body = await fetch("/metrics")
            assert code == 200 and headers["Content-Type"].startswith("text/plain")
            assert b"judgeflow_test_things_total 3.0" in body
            assert (await fetch("/"))[0] == 404
            assert (await fetch("/healthz/extra"))[0] == 404
            assert (await fetch("/healthz", "POST"))[0] == 405
            code, _, body = await fetch("/healthz", "HEAD")
            assert code == 503 and body == b""
            assert (await get(server.port, b"garbage\r\n\r\n"))[0] == 400

            def broken() -> WatchdogState:
                raise RuntimeError("no state")

            server.status = broken
            code, _, body = await fetch("/healthz")
            assert code == 503 and "no state" in json.loads(body)["reason"]

    asyncio.run(run())


def test_health_server_serves_a_watchdog_state() -> None:
    w, clock = dog(stall=60, recovery=30)
    w.observe({A: 5}, {A: 10}, 4)
    clock.now += 60
    w.observe({A: 5}, {A: 10}, 4)

    async def run() -> None:
        async with HealthServer(lambda: w.state, port=0) as server:
            code, _, body = await get(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            doc = json.loads(body)
            assert code == 503 and doc["stalled_partitions"] == ["t.checks[0]"] and doc["live"] is False
            assert b"judgeflow_stalled_partitions" in (await get(server.port, b"GET /metrics HTTP/1.0\r\n\r\n"))[2]

    import judgeflow.metrics  # noqa: F401  (registers the gauges in the default registry)

    asyncio.run(run())
