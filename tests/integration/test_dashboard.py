"""The dashboard in a real headless browser (Debian's Chromium, driven by
Playwright with the system browser), after a demo-sized pipeline run."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

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

    port = _free_port()
    env = {**os.environ, "DATABASE_URL": database_url}
    server = subprocess.Popen([sys.executable, "-m", "judgeflow.cli", "dashboard", "--schema", demo_schema,
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
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "dashboard.png"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
                "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"])  # fmt: skip
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            page.goto(f"http://127.0.0.1:{port}/")
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
        import urllib.error
        import urllib.request

        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/summary", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=5)
        assert info.value.code == 405
    finally:
        server.terminate()
        server.wait(10)
