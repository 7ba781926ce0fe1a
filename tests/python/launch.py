"""Starting the tafel binary with a command line of the test's own (Azurite's flags, no
`serve`, no --data-dir), where TafelServer's fixed one does not fit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Optional, Sequence

from conftest import ACCOUNT, KEY, tafel_binary


class Launched:
    def __init__(self, args: Sequence[str], port: int, cwd: Path, env: Optional[dict] = None):
        self.port = port
        self.log_path = Path(cwd) / "tafel.out"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("TAFEL_", "AZURITE_"))}
        full_env.update(env or {})
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(tafel_binary()), *args], cwd=str(cwd), env=full_env,
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
        )

    def wait_listening(self, timeout: float = 30) -> float:
        """Seconds until the port accepts a connection."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tafel exited with {self.proc.returncode}:\n{self.output()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return time.monotonic() - start
            except OSError:
                time.sleep(0.01)
        self.stop()
        raise RuntimeError(f"tafel did not listen within {timeout}s:\n{self.output()}")

    def conn_str(self, account: str = ACCOUNT, key: str = KEY, scheme: str = "http", host: str = "127.0.0.1") -> str:
        return (
            f"DefaultEndpointsProtocol={scheme};AccountName={account};AccountKey={key};"
            f"TableEndpoint={scheme}://{host}:{self.port}/{account};"
        )

    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGINT, timeout: float = 20) -> int:
        """SIGINT: stops at once (SIGTERM would drain for --drain-seconds first)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        self._log.close()
        return self.proc.returncode


def run_tafel(*args: str, cwd: Optional[Path] = None, env: Optional[dict] = None, timeout: float = 60) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("TAFEL_", "AZURITE_"))}
    full_env.update(env or {})
    return subprocess.run([str(tafel_binary()), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(cwd) if cwd else None, env=full_env, stdin=subprocess.DEVNULL)
