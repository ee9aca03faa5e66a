"""`judgeflow calibrate` and the dashboard's calibration page: the figures of projections.calibration shown as
rich tables, a plotly reliability plot and one HTML page. It only suggests thresholds; nothing here writes a
rubric."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import psycopg
from rich.console import Console
from rich.table import Table

from projections.calibration import (
    DEFAULT_BINS,
    DEFAULT_STEP,
    MIN_SAMPLE,
    NO_RUBRIC,
    Calibration,
    Replay,
    Targets,
    calibrate,
    load,
    parse_rubric_arg,
    reviewed_rubrics,
)

SUGGESTS_ONLY = (
    "These thresholds are a suggestion only: calibrate changes no rubric. To use them, publish a new "
    "rubric version whose `routing` carries them."
)
RULE = (
    "Rule: replay every routed first-judge check of the rubric through the routing function with each candidate "
    "(pass_score, floor, border) on the grid; among candidates meeting every target, the lowest human share wins "
    "(then the lowest overturn rate, the lowest second-judge share, the one closest to the current thresholds); "
    "if none meets every target, the one with the smallest total excess over the targets."
)
SAMPLE_CAVEAT = (
    "Human and second-judge shares are of every routed first-judge check of the rubric. The overturn rate is "
    "estimated for the claims a policy sends straight to done (human verdict differs from the first judge's), "
    "from samples unbiased for them: the audit sample (JUDGEFLOW_REVIEW_AUDIT_SHARE) for claims the pipeline "
    f"routed done, the reviews for claims it routed to people; it is unknown while either has fewer than "
    f"{MIN_SAMPLE} reviews, and a policy whose rate is unknown is never suggested."
)


class NoReviews(LookupError):
    """No human review of a claim checked under the rubric: nothing to calibrate."""


@dataclass(frozen=True)
class Options:
    bins: int = DEFAULT_BINS
    step: float = DEFAULT_STEP
    targets: Targets = Targets()


def compute(conn: psycopg.Connection, rubric_arg: str, options: Options | None = None) -> Calibration:
    """Every figure for one rubric (a rubric_version_id or 'none'); raises NoReviews when nothing was reviewed
    and ValueError for a rubric argument that is not a UUID or 'none'."""
    options = options or Options()
    rubric = parse_rubric_arg(rubric_arg)
    loaded = load(conn, rubric)
    if not loaded.verdicts:
        others = ", ".join(f"{r} ({n} reviewed)" for r, _, n in reviewed_rubrics(conn)) or "none"
        raise NoReviews(
            f"no human reviews of claims checked under rubric {loaded.rubric}; rubrics with reviewed claims: {others}"
        )
    return calibrate(
        loaded.rubric,
        loaded.rubric_name,
        loaded.policy,
        loaded.verdicts,
        loaded.claims,
        bins=options.bins,
        targets=options.targets,
        step=options.step,
        scale=loaded.scale,
    )


def _n(v: float | None, digits: int = 3) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def _title(cal: Calibration) -> str:
    name = f" ({cal.rubric_name})" if cal.rubric_name else ""
    return f"rubric {cal.rubric}{name}" if cal.rubric != NO_RUBRIC else "checks without a rubric"


def _policy_cells(r: Replay) -> list[str]:
    p, e = r.policy, r.estimate
    low, high = e.interval
    rate = _n(r.overturn_rate) if r.overturn_rate is not None or not r.done else "unknown"
    return [
        f"{p.pass_score:g}",
        f"{p.floor:g}",
        f"{p.border:g}",
        _n(r.human_share),
        _n(r.second_share),
        f"{r.done}",
        rate,
        "" if low is None or high is None else f"[{low:.3f}, {high:.3f}]",
        f"{e.audited}/{e.from_done} audited, {e.reviewed}/{e.from_people} reviewed",
    ]


POLICY_COLUMNS = (
    "",
    "pass_score",
    "floor",
    "border",
    "human share",
    "second-judge share",
    "to done",
    "done overturn rate",
    "95% CI",
    "sampled",
)
JUDGE_COLUMNS = ("judge_id", "reviewed verdicts", "agreement", "mean confidence", "ECE")
BIN_COLUMNS = ("confidence bin", "count", "mean confidence", "agreement", "gap")
REASON_COLUMNS = ("final reason", "route", "reviewed", "decided", "overturned", "overturn rate", "unclear resolved")


def tables(cal: Calibration, *, bins: bool = True) -> list[tuple[str, tuple[str, ...], list[list[str]]]]:
    """Every table as (title, columns, rows of text): one source for the terminal and the HTML page.

    `bins=False` leaves out the per-judge reliability tables (the demo's short summary)."""
    out: list[tuple[str, tuple[str, ...], list[list[str]]]] = [
        (
            f"Judges vs human review, {_title(cal)}: {cal.reviewed_claims} reviewed claims",
            JUDGE_COLUMNS,
            [[j.judge_id, str(j.count), _n(j.accuracy), _n(j.mean_confidence), _n(j.ece)] for j in cal.judges],
        )
    ]
    for j in cal.judges if bins else []:
        rows = [
            [
                f"[{b.lower:.2f}, {b.upper:.2f}{']' if b.upper >= 1 else ')'}",
                str(b.count),
                _n(b.mean_confidence),
                _n(b.accuracy),
                "" if b.accuracy is None or b.mean_confidence is None else f"{b.accuracy - b.mean_confidence:+.3f}",
            ]
            for b in j.bins
        ]
        out.append((f"Reliability of {j.judge_id} (ECE {_n(j.ece)})", BIN_COLUMNS, rows))
    out.append(
        (
            "Overturn rate by route reason (reviewed claims)",
            REASON_COLUMNS,
            [
                [
                    r.reason,
                    r.route,
                    str(r.reviewed),
                    str(r.decided),
                    str(r.overturned),
                    _n(r.overturn_rate),
                    str(r.resolved),
                ]
                for r in cal.overturns
            ],
        )
    )
    s = cal.suggestion
    if s is not None:
        out.append(
            (
                f"Suggested routing thresholds ({s.candidates} candidates replayed over "
                f"{s.current.claims} routed checks)",
                POLICY_COLUMNS,
                [["current", *_policy_cells(s.current)]]
                + ([["suggested", *_policy_cells(s.best)]] if s.best is not None else []),
            )
        )
    return out


def verdict_lines(cal: Calibration) -> list[str]:
    """What the suggestion means, in words (targets met or not), then the rule, the sample and the disclaimer."""
    s = cal.suggestion
    if s is None:
        return []
    t = s.targets
    goal = (
        f"targets: human share <= {t.max_human_share:g}, overturn rate <= {t.max_overturn:g}, "
        f"second-judge share <= {t.max_second_share:g}"
    )
    if s.best is None:
        why = s.current.estimate.why_unknown() if not s.current.estimate.known else "it is known for none"
        head = (
            "no suggestion: no candidate that sends claims to done has a known overturn rate for them and meets "
            f"the targets; for the current thresholds: {why}. Review more of the audit sample, or raise "
            "JUDGEFLOW_REVIEW_AUDIT_SHARE"
        )
    elif s.meets_targets:
        head = "the suggested thresholds meet every target"
    else:
        head = "no candidate meets every target; the closest is shown"
    return [*cal.notes, f"{goal}: {head}", RULE, SAMPLE_CAVEAT, SUGGESTS_ONLY]


def print_calibration(cal: Calibration, console: Console, *, bins: bool = True) -> None:
    for title, columns, rows in tables(cal, bins=bins):
        table = Table(title=title, title_justify="left")
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*row)
        console.print(table)
    for line in verdict_lines(cal):
        console.print(line, highlight=False, markup=False)


def figure(cal: Calibration) -> go.Figure:
    """Per judge, each non-empty bin's mean confidence against its observed agreement with humans, and the
    diagonal a perfectly calibrated judge lies on."""
    traces: list[Any] = [
        go.Scatter(
            x=[0, 1],
            y=[0, 1],
            mode="lines",
            name="perfectly calibrated",
            line={"dash": "dash", "color": "#888"},
            hoverinfo="skip",
        )
    ]
    for j in cal.judges:
        shown = [b for b in j.bins if b.count]
        traces.append(
            go.Scatter(
                x=[b.mean_confidence for b in shown],
                y=[b.accuracy for b in shown],
                mode="lines+markers",
                name=f"{j.judge_id} (ECE {_n(j.ece)}, n={j.count})",
                marker={"size": [6 + min(18, b.count**0.5 * 2) for b in shown]},
                text=[f"bin [{b.lower:.2f}, {b.upper:.2f}]: {b.count} verdicts" for b in shown],
                hovertemplate="%{text}<br>mean confidence %{x:.3f}<br>agreement %{y:.3f}<extra></extra>",
            )
        )
    return go.Figure(
        traces,
        layout={
            "title": {"text": f"Reliability: confidence vs agreement with human review, {_title(cal)}", "x": 0.01},
            "xaxis": {"title": {"text": "mean confidence in bin"}, "range": [0, 1.02], "constrain": "domain"},
            "yaxis": {
                "title": {"text": "share agreeing with the human verdict"},
                "range": [0, 1.02],
                "scaleanchor": "x",
            },
            "height": 560,
            "legend": {"orientation": "h", "y": -0.2},
            "margin": {"l": 60, "r": 20, "t": 60, "b": 40},
        },
    )


STYLE = """body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:1rem 0}caption{text-align:left;font-weight:600;padding:.3rem 0}
td,th{border:1px solid #ddd;padding:.3rem .6rem;text-align:right}td:first-child,th:first-child{text-align:left}
.note{background:#f4f7fb;border:1px solid #c9d6e8;border-radius:6px;padding:.5rem .8rem}"""


def _html_table(title: str, columns: tuple[str, ...], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><caption>{html.escape(title)}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page_html(cal: Calibration, plotly_src: str | None = None) -> str:
    """One page: the plot, every table, the rule and the disclaimer. plotly.js is inlined unless `plotly_src`
    (a URL) is given; text from the database is escaped (plotly escapes what it draws; JSON has no '<')."""
    from plotly.offline import get_plotlyjs

    script = (
        f'<script src="{html.escape(plotly_src)}"></script>' if plotly_src else f"<script>{get_plotlyjs()}</script>"
    )
    fig = figure(cal).to_json().replace("<", "\\u003c")
    notes = "".join(f"<p>{html.escape(line)}</p>" for line in verdict_lines(cal))
    body = "".join(_html_table(*t) for t in tables(cal))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>judgeflow calibration: "
        f"{html.escape(_title(cal))}</title><style>{STYLE}</style>{script}</head><body>"
        f"<h1>Calibration from reviews: {html.escape(_title(cal))}</h1><div id='reliability'></div>"
        f"<div class='note' id='suggestion'>{notes}</div>{body}"
        f"<script>const FIG = {fig};\nPlotly.newPlot('reliability', FIG.data, FIG.layout, "
        "{displayModeBar: false, responsive: true});</script></body></html>"
    )


def index_html(rubrics: list[tuple[str, str | None, int]]) -> str:
    """The dashboard's list of rubrics with reviewed claims, one calibration link each."""
    items = "".join(
        f'<li><a href="/calibration?rubric={html.escape(r)}">{html.escape(r if r != NO_RUBRIC else "no rubric")}'
        f"{' (' + html.escape(n) + ')' if n else ''}</a>: {k} reviewed claims</li>"
        for r, n, k in rubrics
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>judgeflow calibration</title>"
        f"<style>{STYLE}</style></head><body><h1>Calibration from reviews</h1>"
        f"<p><a href='/'>dashboard</a></p><ul id='rubrics'>{items or '<li>no reviewed claims yet</li>'}</ul>"
        "</body></html>"
    )
