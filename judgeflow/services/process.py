"""What the Kafka and Postgres launchers share: a child process with a log
file, a graceful stop signal and SIGKILL for fault injection."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


class ServiceProcess:
    process: subprocess.Popen[bytes] | None = None
    log_path: Path
    stop_signal: int = signal.SIGTERM

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the service's whole process group, for fault injection."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout: float = 30.0) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(self.stop_signal)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def write_private(path: Path, data: bytes | str) -> Path:
    """Write a file only its owner may read (keys, passwords, arguments that hold them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data.encode() if isinstance(data, str) else data)
    return path
