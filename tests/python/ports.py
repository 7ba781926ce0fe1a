"""Free loopback ports for test servers (no dependencies: `python3 tests/python/ports.py`
prints one, for shell scripts)."""

from __future__ import annotations

import random
import socket
from pathlib import Path


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port free now, below the kernel's ephemeral range: a port the kernel hands out
    (bind to 0) is also where outgoing connections (to PostgreSQL, between servers) take
    theirs, and one of them took a port between our check and the server's bind."""
    high = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(20000, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in 20000..{high}")


if __name__ == "__main__":
    print(free_port())
