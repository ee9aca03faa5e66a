"""The soak's results judged against its targets, written as JSON and as one HTML page of the time series.

Targets (for a run of at least 20 minutes; a shorter one reports the figures and says the slope is not judged):
- RSS slope at most 1 MiB per hour for the worker and the projector after the first 10 minutes;
- p99 in every steady five-minute window (no fault in it) under 250 ms send -> decision and 1 s send -> row;
- every fault recovered within 30 s (both processes ready again);
- nothing lost, nothing duplicated, nothing decided twice;
- the load generator kept the rate (else the results say so: a lower rate is not the system's).
"""

from __future__ import annotations

import html
import json
import statistics
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bench.soak_observe import STEADY_WINDOW_S

SLOPE_MIB_PER_HOUR = 1.0
DECISION_P99_MS = 250.0
ROW_P99_MS = 1000.0
RECOVERY_S = 30.0
SETTLE_S = 600.0


def rss_slope(samples: list[dict[str, Any]], process: str, after_s: float = SETTLE_S) -> float | None:
    """Least-squares slope of a process's RSS (MiB per hour) after `after_s`; None with too few samples."""
    points = [(s["t_s"], s["rss_mib"][process]) for s in samples if s["t_s"] >= after_s and s["rss_mib"].get(process)]
    if len(points) < 10:
        return None
    slope, _ = statistics.linear_regression([t for t, _ in points], [m for _, m in points])
    return slope * 3600


def steady_windows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each five-minute window: its p99s, and whether a fault fell in it (or just before: recovery spills over)."""
    faults = [f["at_s"] for f in result["faults"]]
    rows = []
    keys = sorted({int(k) for w in result["windows"].values() for k in w})
    for k in keys:
        start, end = k * STEADY_WINDOW_S, (k + 1) * STEADY_WINDOW_S
        faulted = any(start - RECOVERY_S <= at < end for at in faults)
        decision = result["windows"]["decision_ms"].get(str(k), {})
        row = result["windows"]["row_ms"].get(str(k), {})
        rows.append({"window": f"{start // 60}-{end // 60} min", "fault": faulted, "decision": decision, "row": row})
    return rows


def targets(result: dict[str, Any]) -> dict[str, Any]:
    minutes = result["options"]["minutes"]
    samples = result["samples"]
    slopes = {p: rss_slope(samples, p) for p in ("worker", "projector", "broker", "postgres")}
    windows = [w for w in steady_windows(result) if not w["fault"] and w["decision"].get("n")]
    worst_decision = max((w["decision"]["p99"] for w in windows), default=None)
    worst_row = max((w["row"]["p99"] for w in windows if w["row"].get("n")), default=None)
    recoveries = [f["recovery_s"] for f in result["faults"]]
    sent = sum(s["sent"] for s in samples)
    target = sum(s["target"] for s in samples)
    short = [s["t_s"] for s in samples if s["sent"] < 0.9 * s["target"]]
    acc = result["accounting"]
    judged = minutes >= 20
    steady_memory = [slopes["worker"], slopes["projector"]]
    return {
        "rss_slope_mib_per_hour": {p: None if v is None else round(v, 2) for p, v in slopes.items()},
        "rss_slope_ok": None if not judged else all(v is not None and v <= SLOPE_MIB_PER_HOUR for v in steady_memory),
        "worst_steady_decision_p99_ms": worst_decision,
        "worst_steady_row_p99_ms": worst_row,
        "steady_windows": len(windows),
        "latency_ok": bool(windows)
        and worst_decision is not None
        and worst_decision < DECISION_P99_MS
        and (worst_row is None or worst_row < ROW_P99_MS),
        "recoveries_s": recoveries,
        "recovery_ok": all(r is not None and r < RECOVERY_S for r in recoveries),
        "rate_target": result["options"]["rate"],
        "rate_achieved": round(sent / max(1.0, samples[-1]["t_s"]), 1) if samples else 0.0,
        "rate_kept": sent >= 0.97 * target,
        "samples_below_rate": len(short),
        "nothing_lost": acc["ok"],
    }


def _figure(result: dict[str, Any]) -> go.Figure:
    s = result["samples"]
    t = [x["t_s"] / 60 for x in s]
    fig = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=(
            "latency per 5 s (ms): p50 and p99",
            "lag (records)",
            "resident memory (MiB)",
            "CPU (% of one core)",
        ),
    )
    for key, label in (("decision_ms", "send → decision"), ("row_ms", "send → row")):
        for q in ("p50", "p99"):
            fig.add_trace(go.Scatter(x=t, y=[x[key].get(q) for x in s], name=f"{label} {q}", mode="lines"), 1, 1)
    for key, label in (("worker_lag", "worker"), ("projection_lag", "projector")):
        fig.add_trace(go.Scatter(x=t, y=[x.get(key) for x in s], name=f"{label} lag", mode="lines"), 2, 1)
    for p in ("worker", "projector", "broker", "postgres"):
        fig.add_trace(go.Scatter(x=t, y=[x["rss_mib"].get(p) for x in s], name=f"{p} RSS", mode="lines"), 3, 1)
        fig.add_trace(
            go.Scatter(x=t, y=[x.get("cpu_percent", {}).get(p) for x in s], name=f"{p} CPU", mode="lines"), 4, 1
        )
    for f in result["faults"]:
        fig.add_vline(x=f["at_s"] / 60, line_dash="dot", line_color="crimson")
        fig.add_annotation(
            x=f["at_s"] / 60,
            y=1.0,
            yref="paper",
            text=f["fault"],
            showarrow=False,
            textangle=-90,
            xanchor="right",
            yanchor="top",
            font={"color": "crimson"},
        )
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_xaxes(title_text="minutes", row=4, col=1)
    fig.update_layout(height=1200, margin={"l": 60, "r": 20, "t": 60, "b": 40}, legend={"orientation": "h"})
    return fig


def _table(rows: list[tuple[str, str]]) -> str:
    return (
        "<table>"
        + "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
        + ("</table>")
    )


def page(result: dict[str, Any]) -> str:
    """One self-contained page: the targets, the faults, the accounting and the time series."""
    from plotly.offline import get_plotlyjs

    t = result["targets"]
    o = result["options"]
    head = [
        ("run", f"{o['minutes']:g} min at {o['rate']:g} events/s, faults {'on' if o['faults'] else 'off'}"),
        ("rate achieved", f"{t['rate_achieved']:g} events/s ({'kept' if t['rate_kept'] else 'NOT KEPT'})"),
        ("worst steady p99", f"decision {t['worst_steady_decision_p99_ms']} ms, row {t['worst_steady_row_p99_ms']} ms"),
        ("RSS slope after 10 min (MiB/h)", json.dumps(t["rss_slope_mib_per_hour"])),
        (
            "faults",
            "; ".join(f"{f['fault']} at {f['at_s']:.0f} s: recovered in {f['recovery_s']} s" for f in result["faults"])
            or "none",
        ),
        ("accounting", "0 lost, 0 duplicated, 0 decided twice" if t["nothing_lost"] else "FAILED"),
    ]
    figure = json.dumps(json.loads(_figure(result).to_json()))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>judgeflow soak</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:2em}th{text-align:left;padding-right:1em}"
        "pre{background:#f4f4f4;padding:1em}</style>"
        f"<script>{get_plotlyjs()}</script></head><body><h1>judgeflow soak</h1>{_table(head)}"
        f"<div id='series'></div><h2>Accounting</h2><pre>{html.escape(result['accounting']['table'])}</pre>"
        f"<script>const f = {figure}; Plotly.newPlot('series', f.data, f.layout, {{responsive: true}});</script>"
        "</body></html>"
    )


def write(result: dict[str, Any], out: Path, stem: str) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    result = {**result, "targets": targets(result)}
    json_path, html_path = out / f"{stem}.json", out / f"{stem}.html"
    json_path.write_text(json.dumps(result, indent=1) + "\n")
    html_path.write_text(page(result))
    return json_path, html_path
