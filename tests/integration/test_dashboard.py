"""The dashboard in a real headless browser (Debian's Chromium, driven by
Playwright with the system browser), after a demo-sized pipeline run."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import ARTIFACTS as ARTIFACT_PATHS
from tests.support import REPO

pytestmark = pytest.mark.integration
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = REPO / "artifacts"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync"]  # fmt: skip


@contextmanager
def dashboard(database_url: str, schema: str) -> Iterator[str]:
    """`judgeflow dashboard --schema SCHEMA` on a free port, until it answers; yields its address."""
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": database_url}
    server = subprocess.Popen([sys.executable, "-m", "judgeflow.cli", "dashboard", "--schema", schema,
                               "--port", str(port)], env=env, cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
                assert time.monotonic() < deadline, "dashboard did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


def _get_json(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


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
    from playwright.sync_api import sync_playwright

    with dashboard(database_url, demo_schema) as base:
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "dashboard.png"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            page.goto(f"{base}/")
            page.wait_for_selector("body[data-ready='1']", timeout=30_000)
            bars = page.locator("#chart-queues .bars .point path").count()
            traces = page.locator(".js-plotly-plot .trace").count()
            judges = page.locator("#judges tbody tr").count()
            runs = page.locator("#evaluation-runs tbody tr").count()
            page.screenshot(path=str(shot), full_page=True)
            browser.close()
        ARTIFACT_PATHS["dashboard screenshot"] = str(shot)
        assert bars >= 2 and traces >= 6 and judges >= 2 and runs == 8
        # Read-only: nothing but GET is routed.
        req = urllib.request.Request(f"{base}/api/summary", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=5)
        assert info.value.code == 405


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed")
def test_dashboard_without_read_models_says_what_is_missing_and_the_fix_works(database_url: str) -> None:
    """A new user's first run: no schema yet. The API and the page name it and the command that
    fixes it; after running that very command the page shows data without a reload."""
    from playwright.sync_api import sync_playwright

    schema = f"fresh_{uuid.uuid4().hex[:10]}"
    try:
        with dashboard(database_url, schema) as base:
            status, body = _get_json(f"{base}/api/summary")
            assert status == 503, body
            assert f'schema "{schema}" does not exist' in body["problem"]
            fix = body["fixes"][0].split("#")[0].strip()
            assert fix == f"judgeflow migrate --schema {schema}"
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
                page = browser.new_page(viewport={"width": 1300, "height": 900})
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
                browser.close()
            assert _get_json(f"{base}/api/summary")[0] == 200
        report = subprocess.run([sys.executable, "-m", "judgeflow.cli", "report", "--schema", f"{schema}_not"],
                                cwd=REPO, env={**os.environ, "DATABASE_URL": database_url}, capture_output=True,
                                text=True, timeout=120)  # fmt: skip
        assert report.returncode == 1 and "Traceback" not in report.stderr
        assert f"fix: judgeflow migrate --schema {schema}_not" in report.stderr
        assert f"or:  judgeflow report --schema {schema}" in report.stderr
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
