"""The analysts' dashboard and the static HTML report.

One set of chart definitions (plotly figures built in Python from the
read-model views) serves both: `judgeflow dashboard` is a small read-only
aiohttp app (bound to 127.0.0.1 by default) whose page refreshes its charts
from `/api/summary` every few seconds; `judgeflow report --html` writes the
same figures into one self-contained file. Open stale alerts (work not moving
whose run or claim is still not done) sit above the charts, or one line says
there is no stale work. Evaluation runs (latest revision, notice,
contradicting lanes, route) sit beside the claim charts, from the view
`evaluation_runs_overview`. Text from the database is always HTML-escaped
(plotly escapes what it renders; tables go through html.escape).
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import psycopg

from projections.analytics import (
    AGREEMENT,
    AGREEMENT_COLUMNS,
    EMPTY_SECTIONS,
    STALE_ALERTS,
    agreement,
    agreement_cells,
    kappa_by_judge,
)
from projections.migrate import DEFAULT_SCHEMA, check_schema_name
from projections.review_figures import review_sections

log = logging.getLogger("judgeflow.dashboard")

REFRESH_SECONDS = 5
RUNS_SHOWN = 50
NOT_ROUTED = "not routed yet"
EVALUATION_RUN_COLUMNS = ("run", "status", "judges in", "score", "contradictions", "notice", "route")
EVALUATION_RUNS_QUERY = """
SELECT evaluation_run_id::text, status, revision, successful_judge_count, judge_count,
       final_overall_score::float8, contradiction_lanes, notice, route, route_reason
FROM evaluation_runs_overview
ORDER BY coalesce(routed_at, revised_at, started_at) DESC NULLS LAST, evaluation_run_id
LIMIT %s"""


def evaluation_runs(conn: psycopg.Connection, limit: int = RUNS_SHOWN) -> dict[str, Any]:
    """Counts of every evaluation run by route and the latest `limit` runs, most recent first.

    A run with no routing decision yet (provisional, or no revision at all) counts as "not routed yet"."""
    total, contradicting, noticed = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE has_contradictions), count(*) FILTER (WHERE notice IS NOT NULL) "
        "FROM evaluation_runs_overview"
    ).fetchone() or (0, 0, 0)
    by_route: dict[str, int] = dict(
        conn.execute(
            "SELECT coalesce(route, %s), count(*) FROM evaluation_runs_overview GROUP BY 1 ORDER BY 1", (NOT_ROUTED,)
        ).fetchall()
    )
    rows = [
        {
            "evaluation_run_id": i,
            "status": st,
            "revision": rev,
            "judges_in": None if n is None else f"{ok}/{n}",
            "score": score,
            "contradictions": list(lanes),
            "notice": notice,
            "route": route,
            "route_reason": why,
        }
        for i, st, rev, ok, n, score, lanes, notice, route, why in conn.execute(EVALUATION_RUNS_QUERY, (limit,))
    ]
    return {
        "total": int(total),
        "with_contradictions": int(contradicting),
        "with_notice": int(noticed),
        "by_route": {k: int(v) for k, v in by_route.items()},
        "latest": rows,
    }


def evaluation_run_cells(run: dict[str, Any]) -> tuple[str, ...]:
    """One run as the table's plain-text cells (the HTML page escapes them; the CLI prints them)."""
    status = run["status"] if run["revision"] is None else f"{run['status']} (rev {run['revision']})"
    route = "—" if run["route"] is None else f"{run['route']} ({run['route_reason']})"
    return (
        run["evaluation_run_id"],
        status,
        run["judges_in"] or "—",
        "—" if run["score"] is None else f"{run['score']:g}",
        ", ".join(run["contradictions"]) or "none",
        run["notice"] or "—",
        route,
    )


READ_MODELS = (
    "event_throughput",
    "checks",
    "claim_checks",
    "dead_letters_by_code",
    "judge_drift",
    "overturn_rate_by_judge",
    "judge_human_pairs",
    "score_distribution",
    "evaluation_run_status",
    "open_stale_alerts",
    "evaluation_runs_overview",
    "judge_agreement_by_rubric",
)
"""The tables and views the dashboard and the report read."""


@dataclass(frozen=True)
class Problem:
    """Why there is nothing to show, and the commands that fix it (shown on the page, the API and the CLI)."""

    problem: str
    fixes: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"problem": self.problem, "fixes": list(self.fixes)}

    def as_text(self) -> str:
        return "\n".join([self.problem, *(f"  {'fix:' if i == 0 else 'or: '} {f}" for i, f in enumerate(self.fixes))])


def _with_schema(command: str, schema: str) -> str:
    return f"judgeflow {command}" + ("" if schema == DEFAULT_SCHEMA else f" --schema {schema}")


def schema_problem(
    schema: str, where: str, missing: list[str], schema_exists: bool, others: list[str], command: str = "dashboard"
) -> Problem | None:
    """What is wrong with `schema` given what it lacks, and what fixes it: migrating it, or
    pointing `command` at a schema of this database that holds judgeflow's read models."""
    if not missing:
        return None
    migrate = _with_schema("migrate", schema)
    elsewhere = tuple(f"{_with_schema(command, o)}   # read models found in schema {o}" for o in others)
    if not schema_exists:
        what = f'schema "{schema}" does not exist in {where}: judgeflow\'s read models were never created there'
        return Problem(what, (f"{migrate}   # then `judgeflow projector` fills it from Kafka", *elsewhere))
    if len(missing) == len(READ_MODELS):
        what = f'schema "{schema}" in {where} holds none of judgeflow\'s read models (missing: {", ".join(missing)})'
        return Problem(what, (f"{migrate}   # then `judgeflow projector` fills it from Kafka", *elsewhere))
    what = f'schema "{schema}" in {where} lacks {", ".join(missing)}: its migrations are older than this judgeflow'
    return Problem(what, (migrate,))


def unreachable(where: str, error: Exception) -> Problem:
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return Problem(
        f"cannot reach Postgres at {where}: {first}",
        (
            "set DATABASE_URL to a running Postgres (postgresql://user@host:port/db)",
            'eval "$(judgeflow services up | grep ^export)"   # or start one on this machine',
        ),
    )


def describe_database(database_url: str) -> str:
    """host:port/db of a connection string, never its password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(database_url)
    except psycopg.ProgrammingError:
        return "DATABASE_URL (unparsable)"
    return f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


def find_problem(conn: psycopg.Connection, schema: str, where: str, command: str = "dashboard") -> Problem | None:
    """Check that `schema` holds every read model the dashboard and report read; name other
    schemas holding them (the default first, then the most recently created: the latest demo)."""
    missing = [
        r
        for (r,) in conn.execute(
            "SELECT r FROM unnest(%s::text[]) WITH ORDINALITY AS t(r, i) "
            "WHERE to_regclass(format('%%I.%%I', %s::text, r)) IS NULL ORDER BY i",
            (list(READ_MODELS), schema),
        )
    ]
    if not missing:
        return None
    exists = conn.execute("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s)", (schema,)).fetchone()
    others = [
        n
        for (n,) in conn.execute(
            "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relname = 'raw_events' AND c.relkind = 'r' AND n.nspname <> %s "
            "ORDER BY n.nspname = %s DESC, c.oid DESC LIMIT 5",
            (schema, DEFAULT_SCHEMA),
        )
    ]
    return schema_problem(schema, where, missing, bool(exists and exists[0]), others, command)


def summary(conn: psycopg.Connection) -> dict[str, Any]:
    """Everything the dashboard shows, as plain JSON-able data."""
    queues: dict[str, int] = dict(
        conn.execute("SELECT coalesce(final_route, route, 'pending'), count(*) FROM checks GROUP BY 1 ORDER BY 1")
    )
    throughput = [
        (ts.isoformat(), n)
        for ts, n in conn.execute("SELECT slot, events FROM event_throughput ORDER BY slot DESC LIMIT 90").fetchall()
    ][::-1]
    dead = conn.execute("SELECT code, events FROM dead_letters_by_code").fetchall()
    drift = {j: (float(cr), float(mc), n) for j, cr, mc, n in conn.execute("SELECT * FROM judge_drift")}
    kappa = {j: (n, k) for j, n, k in kappa_by_judge(conn)}
    overturn = {j: float(r) for j, r, _ in conn.execute("SELECT * FROM overturn_rate_by_judge")}
    judges = sorted(set(drift) | set(kappa))
    scores = conn.execute(
        "SELECT judge_model, bucket, sum(outputs)::int FROM score_distribution GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    runs: dict[str, int] = dict(conn.execute("SELECT status, count(*) FROM evaluation_run_status GROUP BY 1"))
    alerts = conn.execute(
        "SELECT kind, subject, subject_id, reason, extract(epoch FROM age)::float8 FROM open_stale_alerts "
        "ORDER BY first_seen_at, subject, subject_id, kind LIMIT 50"
    )
    return {
        "evaluations": evaluation_runs(conn),
        "queues": queues,
        "throughput": throughput,
        "dead_letters": [[c, n] for c, n in dead],
        "judges": [
            {
                "judge_id": j,
                "contradiction_rate": drift.get(j, (None,))[0],
                "mean_confidence": drift.get(j, (0, None))[1],
                "checks": drift.get(j, (0, 0, 0))[2],
                "reviewed": kappa.get(j, (0, None))[0],
                "kappa": kappa.get(j, (0, None))[1],
                "overturn_rate": overturn.get(j),
            }
            for j in judges
        ],
        "scores": [[m, int(b), int(n)] for m, b, n in scores],
        "runs": runs,
        "stale_alerts": [
            {"kind": k, "subject": s, "subject_id": i, "reason": r, "age_seconds": a} for k, s, i, r, a in alerts
        ],
        "agreement": agreement(conn),
        "judge_alerts": recent_judge_alerts(conn),
        "reviews": review_sections(conn),
    }


CLAIM_ROUTES = ("done", "second_judge", "human_review")
EVALUATION_ROUTES = ("done", "human_review")
CHART_HEIGHT = 320


def _counts_in_order(counts: dict[str, int], always: tuple[str, ...]) -> dict[str, int]:
    """`always` first (0 where absent, so an empty route still shows), then any other key."""
    return {**{k: counts.get(k, 0) for k in always}, **{k: v for k, v in counts.items() if k not in always}}


def _number(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _bars(x: list[Any], y: list[Any], text: list[str] | None = None, **kw: Any) -> go.Bar:
    """Bars with their value written outside, so a 0 (a bar of no height) is still seen."""
    return go.Bar(
        x=x, y=y, text=text if text is not None else [str(v) for v in y], textposition="outside", cliponaxis=False, **kw
    )


def _layout(title: str, **kw: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0.01, "xanchor": "left"},
        "height": CHART_HEIGHT,
        "autosize": True,
        "margin": {"l": 10, "r": 10, "t": 64, "b": 10},
        "xaxis": {"automargin": True},
        "yaxis": {"automargin": True, "rangemode": "tozero"},
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        **kw,
    }


def _dead_letters_figure(data: dict[str, Any]) -> go.Figure:
    dead = list(reversed(data["dead_letters"]))  # largest at the top
    most = max([1, *(n for _, n in dead)])  # room for the count written after the longest bar
    return go.Figure(
        _bars([n for _, n in dead], [c for c, _ in dead], text=[str(n) for _, n in dead], orientation="h"),
        layout=_layout(
            "Dead letters by code",
            xaxis={"automargin": True, "range": [0, most * 1.15]},
            yaxis={"automargin": True, "type": "category"},
        ),
    )


def _judges_figure(data: dict[str, Any]) -> go.Figure:
    judges = [j["judge_id"] for j in data["judges"]]
    rates = [j["contradiction_rate"] for j in data["judges"]]
    kappas = [j["kappa"] for j in data["judges"]]
    low = min([0.0, *(v for v in rates + kappas if v is not None)])
    return go.Figure(
        [
            _bars(judges, [v or 0.0 for v in rates], [_number(v) for v in rates], name="contradiction rate"),
            _bars(
                judges,
                [v or 0.0 for v in kappas],
                [_number(v) for v in kappas],
                name="kappa vs human",
                hovertext=["undefined: no reviews or one label" if v is None else "" for v in kappas],
            ),
        ],
        layout=_layout(
            "Judge drift and agreement with humans",
            barmode="group",
            yaxis={"automargin": True, "range": [low - 0.1, 1.15]},
        ),
    )


def _scores_figure(data: dict[str, Any]) -> go.Figure:
    models = sorted({m for m, _, _ in data["scores"]})
    buckets = [f"{b}–{b + 9}" for b in range(0, 100, 10)]
    return go.Figure(
        [
            go.Bar(
                name=m,
                x=[f"{b}–{b + 9}" for mm, b, _ in data["scores"] if mm == m],
                y=[n for mm, _, n in data["scores"] if mm == m],
            )
            for m in models
        ],
        layout=_layout(
            "Overall score distribution by judge",
            barmode="group",
            xaxis={"automargin": True, "type": "category", "categoryorder": "array", "categoryarray": buckets},
        ),
    )


def figures(data: dict[str, Any]) -> dict[str, go.Figure]:
    """Every chart, sized by its card: no fixed width (the page draws them responsive), axes that
    make room for their labels, values written on the bars."""
    runs = _counts_in_order(data["evaluations"]["by_route"], EVALUATION_ROUTES)
    queues = _counts_in_order(data["queues"], CLAIM_ROUTES)
    throughput = go.Scatter(
        x=[t for t, _ in data["throughput"]],
        y=[n for _, n in data["throughput"]],
        mode="lines+markers",
        cliponaxis=False,
    )
    return {
        "evaluations": go.Figure(_bars(list(runs), list(runs.values())), layout=_layout("Evaluation runs by route")),
        "queues": go.Figure(_bars(list(queues), list(queues.values())), layout=_layout("Claims by route (final)")),
        "throughput": go.Figure(throughput, layout=_layout("Input events per 10 s")),
        "dead_letters": _dead_letters_figure(data),
        "judges": _judges_figure(data),
        "scores": _scores_figure(data),
    }


def _table(data: dict[str, Any]) -> str:
    columns = ("judge", "checks", "contradiction rate", "mean confidence", "reviewed", "kappa", "overturn")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)

    def cell(v: Any) -> str:
        return "—" if v is None else html.escape(f"{v:.3f}" if isinstance(v, float) else str(v))

    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{cell(j[k])}</td>"
            for k in (
                "judge_id",
                "checks",
                "contradiction_rate",
                "mean_confidence",
                "reviewed",
                "kappa",
                "overturn_rate",
            )
        )
        + "</tr>"
        for j in data["judges"]
    )
    return f'<table id="judges"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _runs_table(data: dict[str, Any]) -> str:
    """The latest evaluation runs: status and revision, judges in, score, contradicting lanes, notice, route."""
    runs = data["evaluations"]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in EVALUATION_RUN_COLUMNS)
    rows = "".join(
        f"<tr data-route='{html.escape(r['route'] or NOT_ROUTED)}'>"
        + "".join(f"<td>{html.escape(c)}</td>" for c in evaluation_run_cells(r))
        + "</tr>"
        for r in runs["latest"]
    )
    caption = (
        f"Evaluation runs: {runs['total']} ({runs['with_contradictions']} with contradictions, "
        f"{runs['with_notice']} with a judge unavailable); latest {len(runs['latest'])}"
    )
    return (
        f'<table id="evaluation-runs"><caption>{html.escape(caption)}</caption><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _agreement_table(data: dict[str, Any]) -> str:
    """Agreement between judges per rubric, lane and judge pair, with its 95% interval; a figure that does not
    exist reads "undefined", never 0."""
    rows = data.get("agreement") or []
    if not rows:
        return f'<p id="agreement" class="ok">{html.escape(AGREEMENT)}: {EMPTY_SECTIONS[AGREEMENT]}</p>'
    head = "".join(f"<th>{html.escape(c)}</th>" for c in AGREEMENT_COLUMNS)
    body = "".join(
        f"<tr data-statistic='{html.escape(r['statistic'])}'>"
        + "".join(f"<td>{html.escape(c)}</td>" for c in agreement_cells(r))
        + "</tr>"
        for r in rows
    )
    return (
        f'<table id="agreement"><caption>{html.escape(AGREEMENT)}</caption><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def _reviews_tables(data: dict[str, Any]) -> str:
    """The review read-outs (`projections.review_figures`): one table per section, or its empty line."""
    out = []
    for title, (columns, rows) in (data.get("reviews") or {}).items():
        if not rows:
            out.append(f'<p class="ok">{html.escape(title)}: {html.escape(EMPTY_SECTIONS.get(title, "none"))}</p>')
            continue
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in rows)
        out.append(f"<table><caption>{html.escape(title)}</caption><thead><tr>{head}</tr></thead>"
                   f"<tbody>{body}</tbody></table>")  # fmt: skip
    return f'<div id="reviews">{"".join(out)}</div>'


def _age(seconds: float) -> str:
    """A short human age: 45s, 12m 05s, 3h 02m, 2d 04h."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600:02d}h"


def _stale_alerts(data: dict[str, Any]) -> str:
    """Open stale alerts as a table, or the empty state: "no stale work"."""
    alerts = data.get("stale_alerts") or []
    if not alerts:
        return f'<p id="stale-alerts" class="ok">{html.escape(STALE_ALERTS)}: {EMPTY_SECTIONS[STALE_ALERTS]}</p>'
    columns = ("kind", "subject", "id", "reason", "age")
    head = "".join(f"<th>{c}</th>" for c in columns)
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(v))}</td>"
            for v in (a["kind"], a["subject"], a["subject_id"], a["reason"], _age(a["age_seconds"]))
        )
        + "</tr>"
        for a in alerts
    )
    return (
        f'<div id="stale-alerts" class="alerts"><h2>{html.escape(STALE_ALERTS)} ({len(alerts)})</h2>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"
    )


def _alerts(data: dict[str, Any]) -> str:
    """The alerts above the charts: open stale work, then recent judge drift."""
    return _stale_alerts(data) + _judge_alerts(data)


JUDGE_ALERTS = "Judge drift alerts (last 7 days)"
JUDGE_ALERTS_SHOWN = 50


def recent_judge_alerts(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """The newest drift alerts (view `recent_judge_alerts`), as plain data."""
    cur = conn.execute(
        "SELECT judge, source, statistic, lane, window_seconds, window_start, value, n, baseline_mean, baseline_sd, "
        "baseline_windows, z, z_threshold, direction FROM recent_judge_alerts LIMIT %s",
        (JUDGE_ALERTS_SHOWN,),
    )
    names = [c.name for c in cur.description or ()]
    return [{**dict(zip(names, row, strict=True)), "window_start": row[5].isoformat()} for row in cur.fetchall()]


def _window(seconds: int) -> str:
    return {3600: "hour", 86400: "day"}.get(seconds) or _age(seconds)


def _judge_alerts(data: dict[str, Any]) -> str:
    """Recent judge drift alerts as a table (judge, statistic, window, its value against the baseline, z), or
    one line saying there are none."""
    alerts = data.get("judge_alerts") or []
    if not alerts:
        return f'<p id="judge-alerts" class="ok">{html.escape(JUDGE_ALERTS)}: none</p>'
    columns = ("judge", "statistic", "window", "value (n)", "baseline mean ± sd (windows)", "z", "direction")

    def cells(a: dict[str, Any]) -> tuple[str, ...]:
        statistic = a["statistic"] + (f" [{a['lane']}]" if a["lane"] else "") + f" ({a['source']})"
        return (
            a["judge"],
            statistic,
            f"{_window(a['window_seconds'])} from {a['window_start']}",
            f"{a['value']:.3f} ({a['n']})",
            f"{a['baseline_mean']:.3f} ± {a['baseline_sd']:.3f} ({a['baseline_windows']})",
            f"{a['z']:+.1f} (|z| ≥ {a['z_threshold']:g})",
            a["direction"],
        )

    head = "".join(f"<th>{c}</th>" for c in columns)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in cells(a)) + "</tr>" for a in alerts)
    return (
        f'<div id="judge-alerts" class="alerts"><h2>{html.escape(JUDGE_ALERTS)} ({len(alerts)})</h2>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"
    )


STYLE = """body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(440px,100%),1fr));gap:1rem}
.chart{border:1px solid #ddd;border-radius:6px;padding:.25rem;min-width:0;overflow:hidden}
.plot{width:100%;height:320px}
table{border-collapse:collapse;margin-top:1rem}caption{text-align:left;font-weight:600;padding:.3rem 0}
#evaluation-runs td,#evaluation-runs th{text-align:left}#evaluation-runs td:first-child{white-space:nowrap}
td,th{border:1px solid #ddd;padding:.3rem .6rem;text-align:right}
.alerts{border:1px solid #d9822b;background:#fff7ef;border-radius:6px;padding:.25rem .75rem;margin-bottom:1rem}
.problem{border:1px solid #c0392b;background:#fdf0ee;border-radius:6px;padding:.25rem .75rem;margin-bottom:1rem}
body[data-state=problem]:not([data-ready]) .grid{display:none}
.problem pre{background:#fff;border:1px solid #ddd;padding:.4rem .6rem;white-space:pre-wrap}
.alerts h2{font-size:1.1rem;margin:.4rem 0}.alerts td{text-align:left}.ok{color:#2b7a3d}"""


DRAW_JS = """
const PLOT_CONFIG = {displayModeBar: false, responsive: true};
function draw(figs) {
  for (const [name, fig] of Object.entries(figs)) Plotly.react('chart-' + name, fig.data, fig.layout, PLOT_CONFIG);
}
// Plotly follows the window; a card that changes width for another reason (a scroll bar, the grid
// reflowing) is followed here, so a chart never draws wider than its card.
const resized = new ResizeObserver(es => es.forEach(e => e.target.data && Plotly.Plots.resize(e.target)));
document.querySelectorAll('.plot').forEach(el => resized.observe(el));
"""


def _cards(names: list[str]) -> str:
    return "".join(f'<div class="chart"><div class="plot" id="chart-{n}"></div></div>' for n in names)


def _script_json(value: Any) -> str:
    """JSON to inline in a <script>: no '<' survives, so no text from the database can close the tag."""
    return json.dumps(value, default=str).replace("<", "\\u003c")


def report_html(data: dict[str, Any]) -> str:
    """A self-contained static report (plotly.js inlined once). The charts are drawn after every
    card is laid out, each as wide as its card."""
    from plotly.offline import get_plotlyjs

    figs = {k: json.loads(f.to_json()) for k, f in figures(data).items()}
    runs = html.escape(", ".join(f"{k}: {v}" for k, v in sorted(data["runs"].items())) or "none")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>judgeflow report</title>"
        f"<style>{STYLE}</style><script>{get_plotlyjs()}</script></head><body><h1>judgeflow report</h1>"
        f"<p>Evaluation runs: {runs}</p>{_alerts(data)}<div class='grid'>{_cards(list(figs))}</div>"
        f"{_runs_table(data)}{_table(data)}{_agreement_table(data)}{_reviews_tables(data)}"
        f"<script>{DRAW_JS}\nconst FIGURES = {_script_json(figs)};\n"
        "for (const [name, fig] of Object.entries(FIGURES))\n"
        "  Plotly.newPlot('chart-' + name, fig.data, fig.layout, PLOT_CONFIG);\n"
        "</script></body></html>"
    )


PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>judgeflow dashboard</title>
<style>{style}</style><script src="/static/plotly.min.js"></script></head><body>
<h1>judgeflow dashboard</h1><p><a id="calibration-link" href="/calibration">Calibration from reviews, per rubric</a>
<button id="sign-out" hidden>Sign out</button></p>
<p id="status">loading…</p><div id="problem" class="problem" role="alert" hidden></div>
<div id="alerts"></div>
<div class="grid">{divs}</div><div id="runs"></div><div id="table"></div><div id="agreement-box"></div>
<div id="reviews-box"></div>
<script>{draw}
function showProblem(p) {{
  const box = document.getElementById('problem');
  const line = document.createElement('p');
  line.textContent = p.problem;
  box.replaceChildren(line);
  if (p.fixes && p.fixes.length) {{
    const fix = document.createElement('p');
    fix.textContent = p.fixes.length > 1 ? 'To fix it, run one of these (with the same DATABASE_URL):'
                                         : 'To fix it, run (with the same DATABASE_URL):';
    box.append(fix);
    for (const f of p.fixes) {{
      const pre = document.createElement('pre');
      pre.textContent = f;
      box.append(pre);
    }}
  }}
  box.hidden = false;
  document.getElementById('status').textContent = 'no data to show; checking again every {refresh}s';
  document.body.dataset.state = 'problem';
}}
(async () => {{  // signed in (--users): a way out; /api/session answers only then
  const r = await fetch('/api/session').catch(() => null);
  if (!r || !r.ok) return;
  const s = await r.json();
  const out = document.getElementById('sign-out');
  out.hidden = false;
  out.addEventListener('click', async () => {{
    await fetch('/logout', {{method: 'POST', headers: {{'X-CSRF-Token': s.csrf}}}}).catch(() => null);
    location.href = '/login';
  }});
}})();
async function refresh() {{
  let r, d;
  try {{
    r = await fetch('/api/summary');
  }} catch (e) {{
    return showProblem({{problem: 'the dashboard server does not answer: ' + e, fixes: []}});
  }}
  try {{
    d = await r.json();
  }} catch (e) {{
    return showProblem({{problem: 'the dashboard server answered HTTP ' + r.status + ' without data', fixes: []}});
  }}
  if (!r.ok || d.problem) return showProblem(d);
  document.body.dataset.state = 'drawing';
  document.getElementById('problem').hidden = true;
  draw(d.figures);
  document.getElementById('table').innerHTML = d.table;
  document.getElementById('runs').innerHTML = d.runs;
  document.getElementById('alerts').innerHTML = d.alerts;
  document.getElementById('agreement-box').innerHTML = d.agreement;
  document.getElementById('reviews-box').innerHTML = d.reviews;
  document.getElementById('status').textContent = 'updated ' + new Date().toLocaleTimeString() +
    ' (every {refresh}s, read-only)';
  document.body.dataset.ready = '1';
  document.body.dataset.state = 'ready';
}}
refresh(); setInterval(refresh, {refresh} * 1000);
</script></body></html>"""


def make_app(database_url: str, schema: str, middlewares: Sequence[Any] = ()) -> Any:
    """The read-only aiohttp app: GET / (page), /api/summary (JSON), /static/plotly.min.js, /calibration;
    `middlewares` decide who may read it (`judgeflow.web_auth.page_guard`).

    Without the read models (no schema, an old one) or without Postgres, /api/summary answers 503
    with what is missing and the commands that fix it, and the page shows them (and keeps checking)."""
    from aiohttp import web
    from plotly.offline import get_plotlyjs

    check_schema_name(schema)
    where = describe_database(database_url)

    plotly_js = get_plotlyjs()
    names = list(
        figures(
            {
                "queues": {},
                "throughput": [],
                "dead_letters": [],
                "judges": [],
                "scores": [],
                "runs": {},
                "evaluations": {"by_route": {}},
            }
        )
    )
    page = PAGE.format(style=STYLE, refresh=REFRESH_SECONDS, divs=_cards(names), draw=DRAW_JS)

    def fetch() -> tuple[int, dict[str, Any]]:
        try:
            with psycopg.connect(database_url, options=f"-c search_path={schema}", connect_timeout=5) as conn:
                problem = find_problem(conn, schema, where)
                if problem is not None:
                    return 503, problem.as_json()
                data = summary(conn)
        except psycopg.OperationalError as exc:
            return 503, unreachable(where, exc).as_json()
        except psycopg.Error as exc:
            log.exception("dashboard query failed")
            return 500, Problem(
                f"a dashboard query failed: {str(exc).strip().splitlines()[0]}",
                ("see the output of `judgeflow dashboard` for the traceback",),
            ).as_json()
        figs = {k: json.loads(f.to_json()) for k, f in figures(data).items()}
        return 200, {
            "figures": figs,
            "table": _table(data),
            "runs": _runs_table(data),
            "alerts": _alerts(data),
            "agreement": _agreement_table(data),
            "reviews": _reviews_tables(data),
            "data": data,
        }

    async def index(_: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    async def api(_: web.Request) -> web.Response:
        import asyncio

        status, body = await asyncio.to_thread(fetch)
        return web.json_response(body, status=status, dumps=lambda o: json.dumps(o, default=str))

    async def js(_: web.Request) -> web.Response:
        return web.Response(text=plotly_js, content_type="application/javascript")

    app = web.Application(middlewares=list(middlewares))
    app.router.add_get("/", index)
    app.router.add_get("/api/summary", api)
    app.router.add_get("/static/plotly.min.js", js)
    add_calibration_routes(app, database_url, schema)
    return app


def add_calibration_routes(app: Any, database_url: str, schema: str) -> None:
    """GET /calibration (one link per rubric with reviewed claims) and /calibration?rubric=ID (that rubric's
    calibration page, computed on request by the code behind `judgeflow calibrate`)."""
    from aiohttp import web

    from judgeflow.calibration import NoReviews, compute, index_html, page_html
    from projections.calibration import reviewed_rubrics

    def render(rubric: str | None) -> tuple[int, str]:
        try:
            with psycopg.connect(database_url, options=f"-c search_path={schema}", connect_timeout=5) as conn:
                problem = find_problem(conn, schema, describe_database(database_url))
                if problem is not None:
                    return 503, f"<pre>{html.escape(problem.as_text())}</pre>"
                if rubric is None:
                    return 200, index_html(reviewed_rubrics(conn))
                return 200, page_html(compute(conn, rubric), plotly_src="/static/plotly.min.js")
        except (NoReviews, ValueError) as exc:
            return 404, f"<p>{html.escape(str(exc))}</p><p><a href='/calibration'>rubrics with reviews</a></p>"
        except psycopg.OperationalError as exc:
            return 503, f"<pre>{html.escape(unreachable(describe_database(database_url), exc).as_text())}</pre>"

    async def calibration(request: web.Request) -> web.Response:
        import asyncio

        status, text = await asyncio.to_thread(render, request.query.get("rubric"))
        return web.Response(text=text, status=status, content_type="text/html")

    app.router.add_get("/calibration", calibration)


def write_report(database_url: str, schema: str, path: Path) -> Path:
    with psycopg.connect(database_url, options=f"-c search_path={schema}") as conn:
        path.write_text(report_html(summary(conn)))
    return path


def require_read_models(database_url: str, schema: str, command: str = "report") -> None:
    """Raise ReadModelsMissing (what is missing and how to fix it) unless `schema` can be reported on."""
    where = describe_database(database_url)
    try:
        with psycopg.connect(database_url, connect_timeout=5) as conn:
            problem = find_problem(conn, check_schema_name(schema), where, command)
    except psycopg.OperationalError as exc:
        problem = unreachable(where, exc)
    if problem is not None:
        raise ReadModelsMissing(problem)


class ReadModelsMissing(RuntimeError):
    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.as_text())
        self.problem = problem
