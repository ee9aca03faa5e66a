"""/healthz, /readyz and /metrics from inside the process's event loop.

prometheus_client's own server runs in a thread: it answers 200 on every path
even while the event loop is wedged. This one is an aiohttp server on the
loop itself, so an answer at all proves the loop turns, and the verdicts come
from a status provider the process plugs in (the projector's or the worker's
watchdog state; anything with `live`, `ready` and `detail()`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

from aiohttp import web
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


class HealthServer:
    """/healthz, /readyz and /metrics on aiohttp, on the running loop.

    GET /healthz: 200 when `status().live`, else 503; GET /readyz: 200 when
    `status().ready`, else 503; both with the status's detail as JSON.
    GET /metrics: the Prometheus text of `registry`. Anything else: 404; another method: 405.
    """

    def __init__(
        self, status: StatusProvider, *, host: str = "127.0.0.1", port: int = 0, registry: CollectorRegistry = REGISTRY
    ):
        self.status = status
        self.host = host
        self.port = port
        self.registry = registry
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        """Bind and serve; return the port (a free one when constructed with 0)."""
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self.port

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

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

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        code, ctype, body = self.respond(request.method, request.path)
        response = web.Response(status=code, body=body, headers={"Content-Type": ctype, "Cache-Control": "no-store"})
        response.force_close()  # one request per connection: a probe holds nothing open
        return response


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
