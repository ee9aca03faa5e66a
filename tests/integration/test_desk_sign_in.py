"""The review desk behind its own sign-in (`judgeflow review --users FILE`), over HTTP on real Kafka and
Postgres: no session, no page and no API; a wrong password, an unknown name, a forged form and a POST without
the CSRF token are refused and publish nothing; repeated failures lock the name out; the signed-in user is the
reviewer of record, whatever header a client sends. And the command refuses a public bind without sign-in."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from judgeflow.desk.api import ReviewPublisher, make_desk_app
from judgeflow.desk.leases import LeaseStore
from judgeflow.desk.reviewer import USER_HEADER, ReviewerIdentity
from judgeflow.desk.serve import desk_pool
from judgeflow.services.ports import free_port
from judgeflow.web_auth import CSRF_HEADER, FAILURES_PER_NAME, SESSION_COOKIE, SignIn, add_user, load_users
from tests.integration.test_review_desk import open_items, to_people
from tests.scaffold import Pipeline
from tests.support import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PASSWORD = "a long reviewer password"


@asynccontextmanager
async def signed_desk(p: Pipeline, users: Path) -> AsyncIterator[str]:
    pool = desk_pool(p.database_url, p.schema)
    await pool.open(wait=True)
    publish = ReviewPublisher(p.bootstrap, p.prefix, {})
    app = make_desk_app(LeaseStore(pool), publish, ReviewerIdentity(signed_in=True), SignIn(load_users(users)))
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
        await publish.close()
        await pool.close()


async def sign_in(http: aiohttp.ClientSession, base: str, user: str, password: str) -> tuple[int, list[str]]:
    """The sign-in as the login page's form sends it: its status and the cookies it set."""
    async with http.get(f"{base}/login") as page:
        token = re.search(r'name="csrf" value="([^"]+)"', await page.text())
    assert token is not None
    form = {"csrf": token.group(1), "user": user, "password": password}
    async with http.post(f"{base}/login", data=form, allow_redirects=False) as r:
        return r.status, r.headers.getall("Set-Cookie", [])


def test_only_a_signed_in_user_reviews_and_is_the_reviewer_of_record(pipeline: Pipeline, tmp_path: Path) -> None:
    p = pipeline
    users = tmp_path / "users.txt"
    add_user(users, "ana", PASSWORD)
    add_user(users, "ben", PASSWORD)
    with p.worker(), p.projector(JUDGEFLOW_REVIEW_OVERLAP="0"):
        [claim] = to_people(p, 1, seed=51)
        p.wait_projected(None, 120, "1 review item", also=lambda: open_items(p) == 1)

        async def run() -> None:
            async with signed_desk(p, users) as base:
                jar = aiohttp.CookieJar(unsafe=True)
                async with aiohttp.ClientSession(cookie_jar=jar) as http:
                    async with http.get(f"{base}/", allow_redirects=False) as r:
                        assert (r.status, r.headers["Location"]) == (302, "/login")
                    async with http.post(f"{base}/api/review/next", headers={USER_HEADER: "ana"}) as r:
                        assert (r.status, (await r.json())["code"]) == (401, "NOT_SIGNED_IN")
                    # a forged form (no sign-in cookie of its own) is refused
                    async with http.post(f"{base}/login", data={"csrf": "x", "user": "ana", "password": PASSWORD},
                                         allow_redirects=False) as r:  # fmt: skip
                        assert r.status == 403
                    assert (await sign_in(http, base, "nobody", PASSWORD))[0] == 401
                    for _ in range(FAILURES_PER_NAME):
                        assert (await sign_in(http, base, "ben", "not the password at all"))[0] == 401
                    assert (await sign_in(http, base, "ben", PASSWORD))[0] == 429  # locked out, right password or not
                    status, cookies = await sign_in(http, base, "ana", PASSWORD)
                    [session_cookie] = [c for c in cookies if c.startswith(SESSION_COOKIE + "=")]
                    assert status == 302 and "HttpOnly" in session_cookie and "SameSite=Strict" in session_cookie
                    async with http.get(f"{base}/api/session") as r:
                        session = await r.json()
                    assert session["user"] == "ana" and session["csrf"]
                    async with http.post(f"{base}/api/review/next") as r:  # no CSRF token
                        assert (r.status, (await r.json())["code"]) == (403, "CSRF_TOKEN")
                    token = {CSRF_HEADER: session["csrf"], USER_HEADER: "mallory"}  # a forged user header too
                    async with http.post(f"{base}/api/review/next", headers=token) as r:
                        leased = await r.json()
                    assert leased["item"]["claim_id"] == claim
                    lease = leased["lease_id"]
                    async with http.post(f"{base}/api/review/{lease}/blind", json={"verdict": "fail"},
                                         headers=token) as r:  # fmt: skip
                        assert r.status == 200
                    async with http.post(f"{base}/api/review/{lease}/submit", json={"final_verdict": "fail"},
                                         headers=token) as r:  # fmt: skip
                        assert r.status == 200, await r.text()
                    async with http.post(f"{base}/logout", headers=token) as r:
                        assert r.status == 200
                    async with http.post(f"{base}/api/review/next", headers=token) as r:
                        assert r.status == 401  # the session ended with the sign-out

        asyncio.run(run())
        p.wait_projected(None, 60, "the review", also=lambda: p.count("SELECT count(*) FROM reviews") == 1)
        with p.connect() as conn:
            assert conn.execute("SELECT reviewer FROM reviews").fetchall() == [("ana",)]


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (["--as", "ana", "--host", "0.0.0.0"], "without authentication"),
        (["--users", "{users}", "--as", "ana"], "goes without --as"),
        (["--users", "{missing}"], "No such file"),
    ],
)
def test_the_desk_refuses_to_start_without_a_safe_way_to_know_the_reviewer(
    tmp_path: Path, args: list[str], refusal: str
) -> None:
    users = tmp_path / "users.txt"
    add_user(users, "ana", PASSWORD)
    argv = [a.format(users=users, missing=tmp_path / "missing.txt") for a in args]
    done = subprocess.run(
        [sys.executable, "-m", "judgeflow.cli", "review", *argv, "--port", str(free_port())],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"},
    )
    assert done.returncode == 2 and refusal in done.stderr, done.stderr


def test_the_dashboard_serves_only_signed_in_analysts_or_its_proxy(pipeline: Pipeline, tmp_path: Path) -> None:
    """`judgeflow dashboard --users FILE` and `--trusted-proxy`: no session, no data; and a public bind without
    either refuses to start."""
    from tests.support import judgeflow_server

    p = pipeline
    users = tmp_path / "analysts.txt"
    add_user(users, "ana", PASSWORD)
    env = {"DATABASE_URL": p.database_url}
    signed = ["dashboard", "--schema", p.schema, "--users", str(users)]
    proxied = ["dashboard", "--schema", p.schema, "--trusted-proxy", "127.0.0.1"]
    with judgeflow_server(signed, env, "the dashboard") as base, judgeflow_server(proxied, env, "its twin") as twin:

        async def run() -> None:
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
                async with http.get(f"{base}/", allow_redirects=False) as r:
                    assert (r.status, r.headers["Location"]) == (302, "/login")
                async with http.get(f"{base}/api/summary") as r:
                    assert (r.status, (await r.json())["code"]) == (401, "NOT_SIGNED_IN")
                assert (await sign_in(http, base, "ana", "wrong password, twelve+"))[0] == 401
                assert (await sign_in(http, base, "ana", PASSWORD))[0] == 302
                async with http.get(f"{base}/api/summary") as r:
                    assert r.status == 200 and "figures" in await r.json()
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{twin}/api/summary") as r:  # from the proxy's address, but naming nobody
                    assert r.status == 401
                async with http.get(f"{twin}/api/summary", headers={USER_HEADER: "ana"}) as r:
                    assert r.status == 200

        asyncio.run(run())
    done = subprocess.run(
        [sys.executable, "-m", "judgeflow.cli", "dashboard", "--host", "0.0.0.0", "--port", str(free_port())],
        cwd=REPO, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", **env},
    )  # fmt: skip
    assert done.returncode == 2 and "without authentication" in done.stderr, done.stderr
