"""Built-in sign-in for judgeflow's pages (DESIGN decision 15): a users file, a login page, a session cookie,
a CSRF token on every POST, and failed logins limited.

- The users file (`--users FILE`) has one `name:hash` line per user; the hash is argon2id, made by
  `judgeflow users add NAME --file FILE` (argon2-cffi). A file another user can read or write is refused.
- A sign-in sets `judgeflow_session`: a random token (HttpOnly, SameSite=Strict, Path=/; Secure when the
  request came over TLS or `--cookie-secure` says a TLS proxy is in front). Sessions live in the process and
  end after 12 hours, at sign-out, or when the process restarts.
- Every POST but the sign-in itself must carry the session's token in `X-CSRF-Token` (the pages read it from
  `GET /api/session`); the sign-in form carries a token of its own, checked against a cookie.
- Five failed sign-ins for one name, or twenty from one address, within 15 minutes: further attempts are
  refused (429) until the window passes, the right password included.
"""

from __future__ import annotations

import html
import ipaddress
import os
import secrets
import stat
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

SESSION_COOKIE = "judgeflow_session"
LOGIN_COOKIE = "judgeflow_login"
CSRF_HEADER = "X-CSRF-Token"
SESSION_SECONDS = 12 * 3600
FAILURES_PER_NAME = 5
FAILURES_PER_ADDRESS = 20
FAILURE_WINDOW_SECONDS = 15 * 60
OPEN_PATHS = frozenset({"/login", "/metrics"})
"""Served without a session: the sign-in itself, and the Prometheus scrape (counts only, read-only)."""

USER_HEADER = "X-Forwarded-User"
_HASHER = PasswordHasher()
_DUMMY = _HASHER.hash(secrets.token_urlsafe(16))
"""Verified against for an unknown name, so that a wrong name takes as long as a wrong password."""


class UsersFileError(ValueError):
    """The users file is missing, readable by others, or has a line that is not `name:argon2-hash`."""


def hash_password(password: str) -> str:
    if len(password) < 12:
        raise ValueError("a password needs 12 characters or more")
    return _HASHER.hash(password)


def load_users(path: Path) -> dict[str, str]:
    """name -> argon2 hash, from a file only its owner can read and write."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise UsersFileError(f"users file {path}: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsersFileError(f"users file {path} is open to other users (mode {stat.filemode(mode)}): chmod 600 it")
    users: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, hashed = line.partition(":")
        if not sep or not name or not hashed.startswith("$argon2"):
            raise UsersFileError(f"users file {path}, line {number}: expected name:$argon2id$...")
        users[name] = hashed
    return users


def add_user(path: Path, name: str, password: str) -> None:
    """Add or replace `name` in the users file (created with mode 600)."""
    if ":" in name or not name.strip() or not name.isprintable():
        raise ValueError(f"user name {name!r}: printable, without ':'")
    users = load_users(path) if path.exists() else {}
    users[name] = hash_password(password)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.writelines(f"{n}:{h}\n" for n, h in users.items())


@dataclass
class FailedLogins:
    """Failed sign-ins per name and per address within a sliding window. The clock is a parameter."""

    clock: Callable[[], float] = time.monotonic
    window: float = FAILURE_WINDOW_SECONDS
    _seen: dict[str, deque[float]] = field(default_factory=dict)

    def _recent(self, key: str) -> deque[float]:
        times = self._seen.setdefault(key, deque())
        while times and times[0] <= self.clock() - self.window:
            times.popleft()
        return times

    def blocked(self, name: str, address: str) -> bool:
        return (
            len(self._recent("name:" + name)) >= FAILURES_PER_NAME
            or len(self._recent("addr:" + address)) >= FAILURES_PER_ADDRESS
        )

    def failed(self, name: str, address: str) -> None:
        for key in ("name:" + name, "addr:" + address):
            self._recent(key).append(self.clock())


@dataclass(frozen=True)
class Session:
    user: str
    csrf: str
    expires: float


@dataclass
class SignIn:
    """Users, sessions and the failed-login limit of one page server."""

    users: dict[str, str]
    cookie_secure: bool = False
    clock: Callable[[], float] = time.monotonic
    failures: FailedLogins = field(default_factory=FailedLogins)
    sessions: dict[str, Session] = field(default_factory=dict)

    def verify(self, name: str, password: str) -> bool:
        hashed = self.users.get(name)
        try:
            return _HASHER.verify(hashed or _DUMMY, password) and hashed is not None
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False

    def open_session(self, user: str) -> tuple[str, Session]:
        token = secrets.token_urlsafe(32)
        session = Session(user, secrets.token_urlsafe(32), self.clock() + SESSION_SECONDS)
        self.sessions[token] = session
        return token, session

    def session_of(self, request: web.Request) -> Session | None:
        token = request.cookies.get(SESSION_COOKIE)
        session = self.sessions.get(token) if token else None
        if session is None:
            return None
        if session.expires <= self.clock():
            del self.sessions[token]  # type: ignore[arg-type]
            return None
        return session

    def _secure(self, request: web.Request) -> bool:
        return self.cookie_secure or request.secure

    def middleware(self) -> Any:
        """Sign-in pages, and a session (and, for a POST, its CSRF token) for everything else."""

        @web.middleware
        async def signed_in(request: web.Request, handler: Any) -> web.StreamResponse:
            if request.path == "/login":
                return await (self._login(request) if request.method == "POST" else self._login_page(request))
            if request.path == "/logout" and request.method == "POST":
                return await self._logout(request)
            if request.path in OPEN_PATHS:
                response: web.StreamResponse = await handler(request)
                return response
            session = self.session_of(request)
            if session is None:
                if request.method == "GET" and not request.path.startswith("/api/"):
                    raise web.HTTPFound("/login")
                return web.json_response({"code": "NOT_SIGNED_IN", "message": "sign in first (/login)"}, status=401)
            if request.path == "/api/session":
                return web.json_response({"user": session.user, "csrf": session.csrf})
            if request.method not in ("GET", "HEAD") and not secrets.compare_digest(
                request.headers.get(CSRF_HEADER, ""), session.csrf
            ):
                return web.json_response(
                    {"code": "CSRF_TOKEN", "message": f"a POST needs the session's {CSRF_HEADER} header"}, status=403
                )
            request["user"] = session.user
            response = await handler(request)
            return response

        return signed_in

    async def _login_page(self, request: web.Request, message: str = "", status: int = 200) -> web.Response:
        # The browser's own token while it has one: a second load (another tab, the favicon redirected here)
        # must not invalidate the form already shown.
        held = request.cookies.get(LOGIN_COOKIE, "")
        token = held if len(held) >= 32 else secrets.token_urlsafe(32)
        body = LOGIN_PAGE.format(csrf=html.escape(token), message=html.escape(message))
        response = web.Response(text=body, content_type="text/html", status=status)
        response.set_cookie(LOGIN_COOKIE, token, httponly=True, samesite="Strict", secure=self._secure(request))
        return response

    async def _login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        name, password = str(form.get("user", "")), str(form.get("password", ""))
        expected = request.cookies.get(LOGIN_COOKIE, "")
        if not expected or not secrets.compare_digest(str(form.get("csrf", "")), expected):
            return await self._login_page(request, "The form expired: sign in again.", 403)
        address = request.remote or "?"
        if self.failures.blocked(name, address):
            return await self._login_page(request, "Too many failed sign-ins: wait 15 minutes.", 429)
        if not self.verify(name, password):
            self.failures.failed(name, address)
            return await self._login_page(request, "Wrong name or password.", 401)
        token, _ = self.open_session(name)
        response = web.HTTPFound("/")
        response.set_cookie(
            SESSION_COOKIE, token, httponly=True, samesite="Strict", secure=self._secure(request),
            max_age=SESSION_SECONDS,
        )  # fmt: skip
        response.del_cookie(LOGIN_COOKIE)
        raise response

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        session = self.session_of(request)
        if session is None or not secrets.compare_digest(request.headers.get(CSRF_HEADER, ""), session.csrf):
            return web.json_response({"code": "CSRF_TOKEN", "message": "sign out from the page"}, status=403)
        self.sessions.pop(request.cookies.get(SESSION_COOKIE, ""), None)
        response = web.json_response({})
        response.del_cookie(SESSION_COOKIE)
        return response


LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>judgeflow: sign in</title>
<style>body{{font:15px/1.45 system-ui,sans-serif;background:#f6f7f9;color:#1d2330}}
form{{max-width:22rem;margin:4rem auto;background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:1.2rem}}
label{{display:block;margin:.6rem 0}} input{{box-sizing:border-box;width:100%;font:inherit;padding:.3rem}}
.error{{color:#8a1c17}}</style>
</head><body><form method="post" action="/login"><h1>Sign in</h1><p class="error" id="message">{message}</p>
<input type="hidden" name="csrf" value="{csrf}">
<label>Name <input name="user" autocomplete="username" required autofocus></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required></label>
<button type="submit">Sign in</button></form></body></html>
"""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def trusted_proxy(proxies: frozenset[str]) -> Any:
    """A middleware that serves only requests from the listed proxy addresses naming a user in
    `X-Forwarded-User` (as oauth2-proxy does); anything else gets 401 NOT_SIGNED_IN."""

    @web.middleware
    async def from_proxy(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path not in OPEN_PATHS:
            user = (request.headers.get(USER_HEADER) or "").strip()
            if request.remote not in proxies or not user:
                return web.json_response(
                    {"code": "NOT_SIGNED_IN", "message": "served only through the authenticating proxy"}, status=401
                )
            request["user"] = user
        response: web.StreamResponse = await handler(request)
        return response

    return from_proxy


def page_guard(host: str, users: Path | None, proxies: tuple[str, ...], cookie_secure: bool = False) -> list[Any]:
    """The middlewares that make a page server know who its users are: sign-in with a users file, or a
    trusted proxy; none only on a loopback bind. Raises ValueError (one line) for any other bind."""
    if users is not None and proxies:
        raise ValueError("--users or --trusted-proxy, not both")
    if users is not None:
        return [SignIn(load_users(users), cookie_secure).middleware()]
    if proxies:
        return [trusted_proxy(frozenset(proxies))]
    if not is_loopback(host):
        raise ValueError(
            f"refusing to serve on {host} without authentication: bind to 127.0.0.1, sign users in with "
            "--users FILE, or put it behind an authenticating proxy named with --trusted-proxy"
        )
    return []
