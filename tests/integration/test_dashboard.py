"""The dashboard in a real headless browser (Debian's Chromium, driven by
Playwright with the system browser), after a demo-sized pipeline run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from tests.conftest import ARTIFACTS as ARTIFACT_PATHS
from tests.scaffold import fresh_schema
from tests.support import REPO, judgeflow_server

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.integration
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = REPO / "artifacts"


BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync"]  # fmt: skip


@contextmanager
def browser_page(width: int, height: int) -> Iterator[Page]:
    """A new page of headless Chromium (the system browser, through Playwright) in a `width` x `height` window;
    the browser is closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


@contextmanager
def dashboard(database_url: str, schema: str) -> Iterator[str]:
    """`judgeflow dashboard --schema SCHEMA` on a free port, until it answers; yields its address."""
    with judgeflow_server(["dashboard", "--schema", schema], {"DATABASE_URL": database_url}, "dashboard") as base:
        yield base


def _get_json(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


PROBE = """() => [...document.querySelectorAll('.chart')].map(card => {
  const box = el => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const plot = card.querySelector('.js-plotly-plot');
  return {
    chart: plot ? plot.id.replace('chart-', '') : null, card: box(card),
    ticks: [...card.querySelectorAll('.xtick text, .ytick text')].map(t => [t.textContent, box(t)]),
    bars: [...card.querySelectorAll('.trace.bars .point')].map(g => {
      const path = g.querySelector('path'), text = g.querySelector('text');
      return {path: path ? box(path) : null, text: text ? text.textContent : '', text_box: text ? box(text) : null};
    }),
    markers: [...card.querySelectorAll('.trace.scatter path.point')].map(box),
  };
})"""


def _inside(rect: list[float], card: list[float]) -> bool:
    """Drawn (not empty) and wholly within the card, to the pixel."""
    left, top, right, bottom = rect
    return right > left and bottom > top and left >= card[0] - 1 and top >= card[1] - 1 and \
        right <= card[2] + 1 and bottom <= card[3] + 1  # fmt: skip


def expected_categories(database_url: str, schema: str) -> dict[str, Any]:
    """What the data holds, asked of the read models directly: the labels each chart must show
    and how many bars or points it must draw."""
    with psycopg.connect(database_url, options=f"-c search_path={schema}") as conn:

        def col(q: str) -> list[str]:
            return [str(r[0]) for r in conn.execute(q)]

        judges = col("SELECT DISTINCT judge_id FROM claim_checks")
        buckets = conn.execute("SELECT DISTINCT judge_model, bucket FROM score_distribution").fetchall()
        return {
            "evaluations": {"ticks": col("SELECT DISTINCT route FROM routing_decisions WHERE subject = 'evaluation'")},
            "queues": {"ticks": col("SELECT DISTINCT coalesce(final_route, route, 'pending') FROM checks")},
            "dead_letters": {"ticks": col("SELECT code FROM dead_letters_by_code"), "bars": len(
                col("SELECT code FROM dead_letters_by_code"))},
            "judges": {"ticks": judges, "bars": 2 * len(judges)},  # contradiction rate and kappa, even at 0
            "scores": {"ticks": sorted({f"{int(b)}–{int(b) + 9}" for _, b in buckets}), "bars": len(buckets)},
            "throughput": {"markers": len(col("SELECT DISTINCT date_bin('10 seconds', received_at, "
                                                "TIMESTAMPTZ 'epoch') FROM raw_events"))},
        }  # fmt: skip


def charts_out_of_bounds(probe: list[dict[str, Any]], expected: dict[str, Any]) -> list[str]:
    """Every way the drawn charts fail to show the data inside their cards (empty when all is seen)."""
    drawn = {c["chart"]: c for c in probe}
    faults = [f"chart {name} missing" for name in expected if name not in drawn]
    for name, want in expected.items():
        if name not in drawn:
            continue
        c = drawn[name]
        shown = {text for text, rect in c["ticks"] if _inside(rect, c["card"])}
        faults += [f"{name}: label {t!r} not within its card" for t in want.get("ticks", []) if t not in shown]
        seen = [
            b
            for b in c["bars"]
            if (b["text"].strip() and _inside(b["text_box"], c["card"]))
            or (b["path"] and _inside(b["path"], c["card"]))
        ]
        if "bars" in want and (len(seen) != want["bars"] or len(c["bars"]) != want["bars"]):
            faults.append(
                f"{name}: {len(seen)} of {len(c['bars'])} bars seen within the card, {want['bars']} in the data"
            )
        if name in ("evaluations", "queues"):  # every bar of a category in the data, 0 or not
            faults += [f"{name}: a bar not within its card" for b in c["bars"] if b not in seen]
        if "markers" in want:
            inside = [m for m in c["markers"] if _inside(m, c["card"])]
            if len(inside) != want["markers"]:
                faults.append(f"{name}: {len(inside)} points within the card, {want['markers']} in the data")
    return faults


@pytest.fixture(scope="module")
def demo_schema(kafka_bootstrap: str, database_url: str) -> str:
    """Run the demo on the session's services; its read models stay in the schema it prints."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, "DATABASE_URL": database_url}
    out = subprocess.run([sys.executable, "-m", "judgeflow.cli", "demo", "--runs", "8", "--claims", "120"],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=400)  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    [schema] = [line.split()[1] for line in out.stdout.splitlines() if line.startswith("schema ")]
    return schema


def test_report_html_is_self_contained_and_escaped(database_url: str, demo_schema: str, tmp_path: Path) -> None:
    with psycopg.connect(database_url, autocommit=True, options=f"-c search_path={demo_schema}") as conn:
        conn.execute("INSERT INTO reviews (review_id, claim_id, reviewer, final_verdict, created_at) VALUES "
                     "(gen_random_uuid(), '<script>alert(1)</script>', 'x', 'pass', now())")  # fmt: skip
    out = tmp_path / "report.html"
    env = {**os.environ, "DATABASE_URL": database_url}
    args = ["report", "--schema", demo_schema, "--html", str(out)]
    done = subprocess.run([sys.executable, "-m", "judgeflow.cli", *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert "Plotly.newPlot" in page and "Judge drift and agreement with humans" in page
    assert "<script>alert(1)</script>" not in page
    # The demo's 8 runs: run 5 has a contradicting judge (routed to humans), run 3 a judge that never answers.
    assert "Evaluation runs: 8 (1 with contradictions, 1 with a judge unavailable)" in " ".join(done.stdout.split())
    assert page.count("<tr data-route=") == 8 and "<tr data-route='human_review'>" in page
    assert "1 judge unavailable" in page and "(spread " in page and "human_review (contradictions)" in page


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
def test_dashboard_loads_with_non_empty_charts_in_headless_chromium(database_url: str, demo_schema: str) -> None:
    with dashboard(database_url, demo_schema) as base:
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "dashboard.png"
        with browser_page(1400, 1800) as page:
            page.goto(f"{base}/")
            page.wait_for_selector("body[data-ready='1']", timeout=30_000)
            bars = page.locator("#chart-queues .bars .point path").count()
            traces = page.locator(".js-plotly-plot .trace").count()
            judges = page.locator("#judges tbody tr").count()
            runs = page.locator("#evaluation-runs tbody tr").count()
            faults = charts_out_of_bounds(page.evaluate(PROBE), expected_categories(database_url, demo_schema))
            page.screenshot(path=str(shot), full_page=True)
        ARTIFACT_PATHS["dashboard screenshot"] = str(shot)
        assert bars >= 2 and traces >= 6 and judges >= 2 and runs == 8
        assert faults == []
        # Read-only: nothing but GET is routed.
        req = urllib.request.Request(f"{base}/api/summary", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=5)
        assert info.value.code == 405


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
def test_an_analyst_signs_in_and_out_of_the_dashboard(database_url: str, demo_schema: str, tmp_path: Path) -> None:
    """`dashboard --users FILE` in Chromium: the sign-in form's fields fit inside it, the charts come after
    sign-in, and Sign out ends the session (the page asks to sign in again)."""
    from playwright.sync_api import expect

    from judgeflow.web_auth import add_user

    users = tmp_path / "analysts.txt"
    add_user(users, "ana", "a long analyst password")
    command = ["dashboard", "--schema", demo_schema, "--users", str(users)]
    with judgeflow_server(command, {"DATABASE_URL": database_url}, "dashboard") as base, browser_page(900, 900) as page:
        page.goto(f"{base}/")
        expect(page).to_have_url(f"{base}/login")
        form = page.locator("form").bounding_box()
        fields = [page.locator(f"input[name={n}]").bounding_box() for n in ("user", "password")]
        assert form and all(f and f["x"] + f["width"] <= form["x"] + form["width"] for f in fields), (form, fields)
        page.fill("input[name=user]", "ana")
        page.fill("input[name=password]", "a long analyst password")
        page.click("button[type=submit]")
        page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        expect(page.locator("#sign-out")).to_be_visible()
        page.click("#sign-out")
        expect(page).to_have_url(f"{base}/login")
        page.goto(f"{base}/")
        expect(page).to_have_url(f"{base}/login")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
def test_dashboard_without_read_models_says_what_is_missing_and_the_fix_works(database_url: str) -> None:
    """A new user's first run: no schema yet. The API and the page name it and the command that
    fixes it; after running that very command the page shows data without a reload."""
    with fresh_schema(database_url, "fresh", migrate=False) as schema:  # named, not made: the user's first run
        with dashboard(database_url, schema) as base:
            status, body = _get_json(f"{base}/api/summary")
            assert status == 503, body
            assert f'schema "{schema}" does not exist' in body["problem"]
            fix = body["fixes"][0].split("#")[0].strip()
            assert fix == f"judgeflow migrate --schema {schema}"
            with browser_page(1300, 900) as page:
                page.goto(f"{base}/")
                page.wait_for_selector("body[data-state='problem']", timeout=30_000)
                shown = page.locator("#problem").inner_text()
                assert page.locator("#status").inner_text() != "loading…"
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "dashboard-no-schema.png"), full_page=True)
                assert f'schema "{schema}" does not exist' in shown and fix in shown
                done = subprocess.run([sys.executable, "-m", "judgeflow.cli", *fix.split()[1:]], cwd=REPO,
                                      env={**os.environ, "DATABASE_URL": database_url}, capture_output=True,
                                      text=True, timeout=120)  # fmt: skip
                assert done.returncode == 0, done.stderr
                page.wait_for_selector("body[data-state='ready']", timeout=30_000)
                assert page.locator("#problem").is_hidden()
                assert "Evaluation runs: 0" in page.locator("#evaluation-runs caption").inner_text()
            assert _get_json(f"{base}/api/summary")[0] == 200
        report = subprocess.run([sys.executable, "-m", "judgeflow.cli", "report", "--schema", f"{schema}_not"],
                                cwd=REPO, env={**os.environ, "DATABASE_URL": database_url}, capture_output=True,
                                text=True, timeout=120)  # fmt: skip
        assert report.returncode == 1 and "Traceback" not in report.stderr
        assert f"fix: judgeflow migrate --schema {schema}_not" in report.stderr
        assert f"or:  judgeflow report --schema {schema}" in report.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
@pytest.mark.parametrize("width", [1300, 1900])
def test_report_charts_show_every_category_within_their_cards(database_url: str, demo_schema: str, tmp_path: Path,
                                                              width: int) -> None:  # fmt: skip
    """The static report at two window widths: each chart is drawn inside its card, with every
    route, code, judge and score bucket of the data visible, a zero value included."""
    out = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "judgeflow.cli", "report", "--schema", demo_schema, "--html",
                           str(out)], env={**os.environ, "DATABASE_URL": database_url}, cwd=REPO,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    expected = expected_categories(database_url, demo_schema)
    with browser_page(width, 1000) as page:
        page.goto(out.as_uri())
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 12")
        probe = page.evaluate(PROBE)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"report-{width}.png"), full_page=True)
    assert sorted(c["chart"] for c in probe) == sorted(expected)
    assert charts_out_of_bounds(probe, expected) == []
