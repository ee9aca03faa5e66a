"""/healthz, /readyz and /metrics from inside the process's event loop.

prometheus_client's own server runs in a thread: it answers 200 on every path
even while the event loop is wedged. This one is an asyncio server on the
loop itself, so an answer at all proves the loop turns, and the verdicts come
from a status provider the process plugs in (the projector's or the worker's
watchdog state; anything with `live`, `ready` and `detail()`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

log = logging.getLogger("judgeflow.health")


class Status(Protocol):
    """A process's self-assessment, e.g. `streams.watchdog.WatchdogState`."""

    @property
    def live(self) -> bool: ...

    @property
    def ready(self) -> bool: ...

    def detail(self) -> dict[str, Any]: ...


StatusProvider = Callable[[], Status]

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error",
            503: "Service Unavailable"}  # fmt: skip


class HealthServer:
    """A tiny HTTP/1.1 server (one request per connection) on the running loop.

    GET /healthz: 200 when `status().live`, else 503; GET /readyz: 200 when
    `status().ready`, else 503; both with the status's detail as JSON.
    GET /metrics: the Prometheus text of `registry`. Anything else: 404.
    """

    def __init__(self, status: StatusProvider, *, host: str = "127.0.0.1", port: int = 0,
                 registry: CollectorRegistry = REGISTRY):  # fmt: skip
        self.status = status
        self.host = host
        self.port = port
        self.registry = registry
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        """Bind and serve; return the port (a free one when constructed with 0)."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> HealthServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        """Status code, content type and body for one request (no I/O: testable alone)."""
        path = path.split("?", 1)[0]
        if path not in ("/healthz", "/readyz", "/metrics"):
            return 404, "application/json", b'{"error": "not found"}\n'
        if method not in ("GET", "HEAD"):
            return 405, "application/json", b'{"error": "GET only"}\n'
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        try:
            status = self.status()
            ok = status.live if path == "/healthz" else status.ready
            body = dict(status.detail())
        except Exception as exc:  # a broken provider is itself unhealthy, and says why
            ok, body = False, {"live": False, "ready": False, "reason": f"status provider failed: {exc!r}"}
        return (200 if ok else 503), "application/json", (json.dumps(body, default=str) + "\n").encode()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                method, path, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
                code, ctype, body = self.respond(method, path)
            except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
                code, ctype, body, method = 400, "application/json", b'{"error": "bad request"}\n', "GET"
            headers = (
                f"HTTP/1.1 {code} {_REASONS[code]}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
            )
            writer.write(headers.encode("latin-1") + (b"" if method == "HEAD" else body))
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def serve_health_from_env(status: StatusProvider, default_host: str = "127.0.0.1") -> HealthServer | None:
    """Start the server on `JUDGEFLOW_METRICS_PORT` (host `JUDGEFLOW_METRICS_HOST`,
    else `default_host`) when that is set; must run inside the loop it serves."""
    port = os.environ.get("JUDGEFLOW_METRICS_PORT")
    if not port:
        return None
    host = os.environ.get("JUDGEFLOW_METRICS_HOST", default_host)
    server = HealthServer(status, host=host, port=int(port))
    await server.start()
    log.info("health and metrics on http://%s:%s/{healthz,readyz,metrics}", host, server.port)
    return server
