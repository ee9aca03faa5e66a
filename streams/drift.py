"""Drift per judge: tumbling-window statistics in two phases, and a z-test against a trailing baseline.

Phase one, inline (`DriftAccumulator`): the claim and run steps hand each check and judge output they accept
(once per claim state / run state: a redelivery the state already knows adds nothing) to a plain in-memory
accumulator, keyed by (judge, window size, window start). Nothing is consumed or produced per event: every
`flush_seconds` the worker drains the deltas as one small record per judge to `judgeflow.drift.partials`
(keyed by judge), so that topic's volume depends on the number of judges, not on traffic.

Phase two, in an agent of its own (`DriftStage`): the partials are merged per judge into a bounded state (the
open windows and the last `baseline_windows` closed ones per window size; older windows are deleted, DESIGN
decision 11). A window closes when the judge's event-time watermark passes its end + grace, or when the clock
does and no partial has touched it for the grace (a judge that went quiet); on closing, every statistic of the
window is tested against the trailing baseline and each finding is published to `judge.alerts`.

Event time is the event's own (`checked_at`, `judge_completed_at`), else its Kafka record's timestamp, so a
replay puts every event in the same window. Deltas are at-least-once: a worker that crashes after a flush and
before its offsets are committed counts those events again when they are redelivered (unless the claim or run
state that knows them survived); one that crashes before the flush loses at most one flush interval of
observations. Partials carry (producer, sequence) so the drift agent merges a redelivered partial once. Alert
ids are uuid5 of (judge, statistic, lane, window): a re-sent alert is the same row.

Every statistic is kept as moments (n, sum, sum of squares) on the 0-1 scale, so merging partials is addition
and any split of the events merges to the single-pass figures.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from schemas.drift import JudgeDriftAlert
from schemas.types import utc_timestamp
from streams.envelope import Outgoing, iso
from streams.judge_summary import TIMEOUT_MARK, JudgeSummary
from streams.stage import Clock, Inbound, State, Step
from streams.sweep_index import EVERY_TICK

DRIFT_NS = uuid.UUID("3d0f6b2a-9e51-5c47-b8a3-6f2e1d9c7a40")
CONTRADICTION_SCORE = 0.80
"""A failing verdict this confident in its score contradicts the claim (as the `judge_drift` view counts it)."""
LOW_CONFIDENCE_DEFAULT = 0.60
"""A check below this confidence is low-confidence when its rubric is unknown: the default routing `floor`
(`RoutingPolicy().floor`, under which a failing verdict goes to humans). With a rubric, its own floor."""
MIN_SD = 0.01
"""The smallest standard deviation the test divides by (a baseline of identical windows, e.g. a rate that was
always 0): there the `min_delta` rule decides."""
MAX_SENT = 16
"""Closing inputs whose alerts a state remembers, so a redelivered one re-sends them."""
TICK = b'{"kind":"tick"}'

Moments = list[float]
"""[n, sum, sum of squares] of one statistic in one window."""


@dataclass(frozen=True)
class DriftOptions:
    """Windows and detector settings (`JUDGEFLOW_DRIFT_*`)."""

    windows: tuple[int, ...] = (3600, 86400)
    """Tumbling window sizes in seconds, aligned to the epoch (a day window starts at 00:00 UTC)."""
    flush_seconds: float = 5.0
    grace_seconds: float = 300.0
    baseline_windows: int = 24
    """Closed windows kept per size and tested against (the trailing baseline)."""
    min_baseline_windows: int = 6
    z_threshold: float = 5.0
    min_delta: float = 0.05
    """The smallest move (0-1 scale) worth an alert, however significant."""
    min_window_events: int = 30
    """A window (and a baseline window) needs this many observations of a statistic to count."""
    max_open_windows: int = 48
    """Open windows per size beyond this close oldest first (bounds a replay of scattered event times)."""

    def __post_init__(self) -> None:
        if not self.windows or any(w <= 0 for w in self.windows):
            raise ValueError("drift windows must be positive")
        if self.min_baseline_windows < 2 or self.baseline_windows < self.min_baseline_windows:
            raise ValueError("drift baseline: need 2 <= min_baseline_windows <= baseline_windows")


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_windows(text: str) -> tuple[int, ...]:
    """`1h,1d` -> (3600, 86400): whole numbers with a unit s, m, h or d."""
    sizes = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = re.fullmatch(r"(\d+)([smhd])", part)
        if match is None or int(match.group(1)) == 0:
            raise ValueError(f"{part!r} is not a window size like 1h or 1d")
        sizes.append(int(match.group(1)) * _UNITS[match.group(2)])
    if not sizes:
        raise ValueError("no window size")
    return tuple(sorted(set(sizes)))


def epoch(timestamp: str | None, fallback: float) -> float:
    """Seconds since the epoch of an event's timestamp, else `fallback` (its record's timestamp).

    A validated event's text is canonical UTC; a check released from the hold carries the text it was sent
    with, which may be any RFC 3339 form (a final lower-case `z`, which Python 3.11 does not read)."""
    if timestamp is None:
        return fallback
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        try:
            return datetime.fromisoformat(utc_timestamp(timestamp)).timestamp()
        except ValueError:
            return fallback


# Phase one: inline, per event.

_N, _FAIL, _CONTRA, _LOW, _SN, _SS, _SSQ = range(7)


class DriftAccumulator:
    """Deltas since the last flush, per (judge, window size, window start). Plain dicts and floats: one
    observation costs a few dict updates per window size (no Faust, no I/O)."""

    def __init__(self, options: DriftOptions, *, producer_id: str | None = None) -> None:
        self.windows = options.windows
        self.checks: dict[tuple[str, int, float], list[float]] = {}
        self.outputs: dict[tuple[str, int, float], list[Any]] = {}
        self.max_at: dict[str, float] = {}
        self.producer = producer_id or uuid.uuid4().hex
        self.seq = 0

    def observe_check(
        self, judge: str, verdict: str, score: float | None, confidence: float, low_below: float, at: float
    ) -> None:
        """One claim check a claim state accepted (`low_below`: its rubric's floor, or the default)."""
        fail = verdict == "fail"
        contra = fail and score is not None and score >= CONTRADICTION_SCORE
        low = confidence < low_below
        for size in self.windows:
            key = (judge, size, at - at % size)
            c = self.checks.get(key)
            if c is None:
                c = self.checks[key] = [0.0] * 7
            c[_N] += 1
            if fail:
                c[_FAIL] += 1
                if contra:
                    c[_CONTRA] += 1
            if low:
                c[_LOW] += 1
            if score is not None:
                c[_SN] += 1
                c[_SS] += score
                c[_SSQ] += score * score
        if at > self.max_at.get(judge, -math.inf):
            self.max_at[judge] = at

    def observe_output(self, summary: JudgeSummary, at: float) -> None:
        """One judge output a run accepted (a failed or timed-out stub included), by its judge model."""
        judge = summary.judge_model
        failed = summary.status == "failed"
        timed_out = failed and (summary.failure_reason or "").startswith(TIMEOUT_MARK)
        low = summary.confidence == "low"
        for size in self.windows:
            key = (judge, size, at - at % size)
            c = self.outputs.get(key)
            if c is None:
                c = self.outputs[key] = [0, 0, 0, 0, {}]
            c[0] += 1
            c[1] += failed
            c[2] += timed_out
            c[3] += low
            lanes: dict[str, list[float]] = c[4]
            for lane, score in summary.lanes.items():
                x = score / 100.0
                m = lanes.get(lane)
                if m is None:
                    lanes[lane] = [1.0, x, x * x]
                else:
                    m[0] += 1
                    m[1] += x
                    m[2] += x * x
        if at > self.max_at.get(judge, -math.inf):
            self.max_at[judge] = at

    def drain(self) -> list[Outgoing]:
        """The deltas as one partial record per judge (role `drift_partials`), and a clean slate."""
        by_judge: dict[str, dict[tuple[int, float], dict[str, Moments]]] = {}
        for (judge, size, start), c in self.checks.items():
            stats = by_judge.setdefault(judge, {}).setdefault((size, start), {})
            stats.update(check_moments(c))
        for (judge, size, start), o in self.outputs.items():
            stats = by_judge.setdefault(judge, {}).setdefault((size, start), {})
            stats.update(output_moments(o))
        out = []
        for judge, windows in sorted(by_judge.items()):
            self.seq += 1
            spans = [{"size": size, "start": start, "stats": stats} for (size, start), stats in sorted(windows.items())]
            doc = {
                "kind": "partial",
                "producer": self.producer,
                "seq": self.seq,
                "judge": judge,
                "max_at": self.max_at.get(judge),
                "windows": spans,
            }
            out.append(Outgoing("drift_partials", judge.encode(), json.dumps(doc, separators=(",", ":")).encode()))
        self.checks, self.outputs, self.max_at = {}, {}, {}
        return out


def check_moments(c: list[float]) -> dict[str, Moments]:
    n = c[_N]
    return {
        "check:mean_score": [c[_SN], c[_SS], c[_SSQ]],
        "check:fail_rate": [n, c[_FAIL], c[_FAIL]],
        "check:contradiction_rate": [n, c[_CONTRA], c[_CONTRA]],
        "check:low_confidence_share": [n, c[_LOW], c[_LOW]],
    }


def output_moments(o: list[Any]) -> dict[str, Moments]:
    n, failed, timed_out, low, lanes = o
    stats = {
        "output:failure_rate": [n, failed, failed],
        "output:timeout_rate": [n, timed_out, timed_out],
        "output:low_confidence_share": [n, low, low],
    }
    for lane, m in lanes.items():
        stats[f"output:lane_mean_score:{lane}"] = list(m)
    return stats


def merge(into: dict[str, Moments], stats: dict[str, Moments]) -> None:
    """Add one partial's moments to a window's (merging is addition: any split of events sums to the same)."""
    for name, m in stats.items():
        have = into.get(name)
        if have is None:
            into[name] = [float(m[0]), float(m[1]), float(m[2])]
        else:
            have[0] += m[0]
            have[1] += m[1]
            have[2] += m[2]


# The detector.


@dataclass(frozen=True)
class Finding:
    value: float
    n: int
    baseline_mean: float
    baseline_sd: float
    baseline_windows: int
    baseline_n: int
    z: float


RATES = ("fail_rate", "contradiction_rate", "low_confidence_share", "failure_rate", "timeout_rate")
"""Statistics that are shares of events (each observation 0 or 1)."""


def detect(
    window: Moments, baseline: Iterable[Moments], options: DriftOptions, *, rate: bool = False
) -> Finding | None:
    """Two-sided z-test of a window's mean against the trailing baseline of earlier windows' means.

    Why a z-test against a trailing baseline rather than CUSUM: an alert must name one window and the figures it
    was compared with (a CUSUM's evidence is a running sum with no window of its own), windows are already
    aggregates of many events (their means are close to normal), and the baseline follows slow, legitimate
    change by itself (it trails). The sd is the larger of the spread of the baseline's window means (real
    window-to-window variation, sampling noise at their sizes included) and the sampling error this window's n
    implies under the baseline's pooled within-window variance (a small window is noisier than the typical
    one), inflated by sqrt(1 + 1/K) for the baseline mean's own error; never below `MIN_SD`. A finding needs
    |z| >= `z_threshold`, |value - baseline mean| >= `min_delta` (big enough to matter), at least
    `min_window_events` observations in the window and `min_baseline_windows` baseline windows that have as many.
    A `rate` (a share of 0/1 observations) must also pass the exact binomial tail at the same level: with few
    expected events (n * p small) the count is skewed and the normal tail alone would alert far too often.
    """
    n_w, s_w, _ = window
    if n_w < options.min_window_events:
        return None
    base = [b for b in baseline if b[0] >= options.min_window_events]
    k = len(base)
    if k < options.min_baseline_windows:
        return None
    means = [s / n for n, s, _ in base]
    mu = sum(means) / k
    between = sum((m - mu) ** 2 for m in means) / (k - 1)
    total_n = sum(n for n, _, _ in base)
    within = max(0.0, sum(ss - s * s / n for n, s, ss in base) / max(1.0, total_n - k))
    sd = max(MIN_SD, math.sqrt(max(between, within / n_w) * (1 + 1 / k)))
    value = s_w / n_w
    z = (value - mu) / sd
    if abs(z) < options.z_threshold or abs(value - mu) < options.min_delta:
        return None
    if rate:
        p = (sum(s for _, s, _ in base) + 1) / (total_n + 2)  # the baseline share, never exactly 0 or 1
        if binomial_tail(int(round(n_w)), p, int(round(s_w)), up=z > 0) > normal_tail(options.z_threshold):
            return None
    return Finding(value, int(n_w), mu, sd, k, int(total_n), z)


def normal_tail(z: float) -> float:
    """P(Z >= z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def binomial_tail(n: int, p: float, k: int, *, up: bool) -> float:
    """P(X >= k) (`up`) or P(X <= k) for X ~ Binomial(n, p), summed from k outwards until the terms vanish."""

    def log_pmf(i: int) -> float:
        return (
            math.lgamma(n + 1)
            - math.lgamma(i + 1)
            - math.lgamma(n - i + 1)
            + i * math.log(p)
            + (n - i) * math.log1p(-p)
        )

    total, i, step = 0.0, k, 1 if up else -1
    while 0 <= i <= n:
        term = math.exp(log_pmf(i))
        total += term
        if term < total * 1e-12:
            break
        i += step
    return min(1.0, total)


# Phase two: the drift agent's stage.


def _window_key(start: float) -> str:
    return repr(float(start))


class DriftStage:
    """Merge partial deltas per judge into bounded windows; test each window as it closes; publish findings."""

    name = "judge_drift"
    reads: tuple[str, ...] = ("drift_partials",)
    writes: tuple[str, ...] = ("judge_alerts",)
    keeps = "drift_state"
    does = (
        "merge the workers' windowed drift deltas per judge (open windows + the trailing baseline, older "
        "ones deleted); when a window closes, z-test each statistic against the baseline and publish findings"
    )

    def __init__(self, options: DriftOptions, *, clock: Clock) -> None:
        self.options = options
        self.clock = clock

    def handle(self, record: Inbound, stored: State | None) -> Step:
        doc = json.loads(record.value or b"{}")
        judge = (record.key or b"").decode(errors="replace")
        state: State = json.loads(json.dumps(stored)) if stored else {"partition": record.src.partition, "windows": {}}
        coords = record.src.coordinates()
        for src, alerts in state.get("sent", ()):
            if src == coords:  # a redelivered input that closed windows: the same alerts again
                return Step.emit([Outgoing("judge_alerts", judge.encode(), a.encode()) for a in alerts])
        if stored is None and doc.get("kind") != "partial":
            return Step.emit([])
        now = self.clock().timestamp()
        late = False
        if doc.get("kind") == "partial":
            seen = state.setdefault("producers", {})
            last = seen.get(doc["producer"])
            if last is not None and doc["seq"] <= last[0]:
                return Step.emit([])  # merged already
            seen[doc["producer"]] = [doc["seq"], now]
            late = self._merge(state, doc, now)
            self._forget_producers(state, now)
        alerts = self._close(state, judge, now)
        if alerts:
            state["sent"] = [*state.get("sent", []), [coords, [a.decode() for a in alerts]]][-MAX_SENT:]
        elif doc.get("kind") != "partial" and stored is not None and state == stored:
            return Step.emit([])
        out = [Outgoing("judge_alerts", judge.encode(), a) for a in alerts]
        return Step(out, state, True, late=late)

    def _merge(self, state: State, doc: dict[str, Any], now: float) -> bool:
        """Add a partial's windows; True if some of it came for a window already closed."""
        late = False
        max_at = doc.get("max_at")
        if isinstance(max_at, (int, float)):
            state["wm"] = max(state.get("wm", -math.inf), min(float(max_at), now))
        for w in doc.get("windows", ()):
            sizes = state["windows"].setdefault(str(w["size"]), {"open": {}, "closed": []})
            key = _window_key(w["start"])
            closed = sizes["closed"]
            if closed and w["start"] <= closed[-1][0]:
                late = True  # for a closed window: it joins the baseline, never tested
                match = next((c for c in closed if c[0] == w["start"]), None)
                if match is not None:
                    merge(match[1], w["stats"])
                elif w["start"] > closed[0][0] or len(closed) < self.options.baseline_windows:
                    stats: dict[str, Moments] = {}
                    merge(stats, w["stats"])
                    closed.append([float(w["start"]), stats])
                    closed.sort(key=lambda c: c[0])
                    del closed[: -self.options.baseline_windows]
                continue
            window = sizes["open"].setdefault(key, {"stats": {}})
            merge(window["stats"], w["stats"])
            window["touched"] = now
        return late

    def _forget_producers(self, state: State, now: float) -> None:
        """A producer (a worker process) not heard from for longer than the largest window + grace is gone."""
        horizon = max(self.options.windows) + self.options.grace_seconds
        state["producers"] = {p: v for p, v in state["producers"].items() if now - v[1] <= horizon}

    def due(self, state: State, now: float) -> list[tuple[int, float]]:
        """Open windows that close now: past end + grace by the watermark, or by the clock once idle for the
        grace, or beyond `max_open_windows` (oldest first). In start order."""
        grace, wm = self.options.grace_seconds, state.get("wm", -math.inf)
        out = []
        for size_key, sizes in state.get("windows", {}).items():
            size = int(size_key)
            starts = sorted(float(s) for s in sizes["open"])
            forced = set(starts[: max(0, len(starts) - self.options.max_open_windows)])
            for start in starts:
                end = start + size
                touched = sizes["open"][_window_key(start)].get("touched", now)
                if start in forced or wm >= end + grace or (now >= end + grace and now >= touched + grace):
                    out.append((size, start))
        return sorted(out, key=lambda x: (x[1], x[0]))

    def _close(self, state: State, judge: str, now: float) -> list[bytes]:
        alerts = []
        for size, start in self.due(state, now):
            sizes = state["windows"][str(size)]
            window = sizes["open"].pop(_window_key(start))
            closed = sizes["closed"]
            for name, moments in sorted(window["stats"].items()):
                rate = name.split(":")[1] in RATES
                found = detect(moments, (c[1][name] for c in closed if name in c[1]), self.options, rate=rate)
                if found is not None:
                    alerts.append(self._alert(judge, name, size, start, found, now))
            closed.append([start, window["stats"]])
            closed.sort(key=lambda c: c[0])
            del closed[: -self.options.baseline_windows]
        return alerts

    def _alert(self, judge: str, name: str, size: int, start: float, f: Finding, now: float) -> bytes:
        source, statistic, *rest = name.split(":", 2)
        lane = rest[0] if rest else None
        ident = uuid.uuid5(DRIFT_NS, "/".join((judge, source, statistic, lane or "", str(size), repr(start))))
        alert = JudgeDriftAlert(
            event_id=str(ident),
            judge=judge,
            source="claim_check" if source == "check" else "judge_output",
            statistic=statistic,  # type: ignore[arg-type]
            lane=lane,
            window_seconds=size,
            window_start=_iso(start),
            window_end=_iso(start + size),
            value=round(f.value, 6),
            n=f.n,
            baseline_mean=round(f.baseline_mean, 6),
            baseline_sd=round(f.baseline_sd, 6),
            baseline_windows=f.baseline_windows,
            baseline_n=f.baseline_n,
            z=round(f.z, 3),
            z_threshold=self.options.z_threshold,
            min_delta=self.options.min_delta,
            direction="up" if f.z > 0 else "down",
            raised_at=_iso(now),
        )
        return alert.model_dump_json().encode()

    def wake_at(self, doc: State) -> int | None:
        """A judge with open windows is looked at every tick (there are few judges); one without needs nothing."""
        return EVERY_TICK if watch(doc) else None

    def sweep(self, states: list[tuple[str, State]]) -> list[Outgoing]:
        """Tick records for the judges whose open windows the clock has closed (a judge that went quiet)."""
        now = self.clock().timestamp()
        return [Outgoing("drift_partials", key.encode(), TICK) for key, doc in states if self.due(doc, now)]


def _iso(seconds: float) -> str:
    return iso(datetime.fromtimestamp(seconds, UTC))


def watch(doc: State) -> bool:
    """A drift state needs the sweep while it has open windows."""
    return any(sizes.get("open") for sizes in (doc.get("windows") or {}).values())
