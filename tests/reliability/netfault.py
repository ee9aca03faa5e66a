"""A small TCP proxy that injects network faults (reliability scenario 8).

It forwards a loopback port to an upstream service on its own event loop in
a background thread, so a test can, while real clients use it:

- add latency to every chunk in both directions,
- stall all traffic (bytes wait in the proxy, as in a partition that heals
  and TCP retransmits), then let it flow again,
- reset every open connection (RST, as from a restarted middlebox).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from pathlib import Path
from typing import Any

from judgeflow.services.kafka import KafkaBroker
from judgeflow.services.ports import free_port


class FaultyProxy:
    def __init__(self, upstream_port: int, *, port: int | None = None, upstream_host: str = "127.0.0.1"):
        self.upstream = (upstream_host, upstream_port)
        self.port = port or free_port()
        self.latency_s = 0.0
        self.resets = 0
        self._loop = asyncio.new_event_loop()
        self._flowing: asyncio.Event | None = None
        self._conns: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name=f"proxy-{self.port}")
        self._server: asyncio.Server | None = None

    def __enter__(self) -> FaultyProxy:
        self._thread.start()
        self._call(self._start())
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    # -- faults ---------------------------------------------------------------------------------------

    def set_latency(self, seconds: float) -> None:
        self.latency_s = seconds

    def stall(self) -> None:
        assert self._flowing is not None
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def resume(self) -> None:
        assert self._flowing is not None
        self._loop.call_soon_threadsafe(self._flowing.set)

    def reset_all(self) -> int:
        """RST every open connection; returns how many sockets were reset."""
        return int(self._call(self._reset_all()))

    # -- forwarding -----------------------------------------------------------------------------------

    async def _start(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._reset_all()

    async def _reset_all(self) -> int:
        n = 0
        for writer in list(self._conns):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):  # already closed by its peer
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            n += 1
        self._conns.clear()
        self.resets += n
        return n

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.transport.abort()
            return
        self._conns.update((client_w, up_w))
        await asyncio.gather(self._pump(client_r, up_w), self._pump(up_r, client_w), return_exceptions=True)
        for w in (client_w, up_w):
            self._conns.discard(w)
            w.transport.abort()

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        while data := await src.read(65536):
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            await self._flowing.wait()
            dst.write(data)
            await dst.drain()
        dst.transport.abort()


def broker_with_a_faulty_listener(workdir: Path) -> tuple[KafkaBroker, int, int]:
    """A broker whose FAULTY listener is advertised at a proxy port; returns it,
    that listener's port and the port the proxy must listen on."""
    port, controller, faulty, proxied = free_port(), free_port(), free_port(), free_port()
    broker = KafkaBroker(workdir, port=port, controller_port=controller, properties={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},FAULTY://127.0.0.1:{faulty}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},"
                                f"FAULTY://127.0.0.1:{proxied}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,FAULTY:PLAINTEXT",
    })  # fmt: skip
    return broker, faulty, proxied
