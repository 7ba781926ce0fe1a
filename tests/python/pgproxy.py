"""A TCP proxy to put between Tafel and PostgreSQL: it delays, cuts and refuses.

- ``delay`` (seconds, one way) holds every chunk that long before passing it on, in order,
  so the round-trip time Tafel sees to the database grows by ``2 * delay``: the way to count
  a request's round trips to the database (latency / added round-trip time).
- ``cut()`` drops every open connection at once (a network fault, a database failover).
- ``refuse = True`` closes new connections as they come (a node cut off from the database).
- ``cut_after(marker, forward=…)`` arms a one-shot fault: the next client chunk that holds
  ``marker`` (say ``b"COMMIT"``) is passed on (``forward=True``, so the database acts on it)
  or not (``False``), and the connection is dropped before any answer comes back: once the
  database has answered it (its ReadyForQuery), so that a forwarded commit has surely been
  acted on however slowly the database runs.

Threads, not asyncio: the tests that use it are plain synchronous pytest code.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from typing import Optional


# The PostgreSQL backend's ReadyForQuery message: type, length 5, (then the status byte).
READY_FOR_QUERY = b"Z\x00\x00\x00\x05"


class _Fault:
    """A connection's fault, as both its directions see it."""

    def __init__(self) -> None:
        # Set when the fault strikes: nothing more reaches the client.
        self.deaf = threading.Event()
        # Set once the chunk that struck has been passed on to the database ...
        self.sent = threading.Event()
        # ... and once the database has answered it.
        self.answered = threading.Event()


class _Pipe:
    """One direction of one connection: read, hold ``delay``, write, in order."""

    def __init__(self, proxy: "DelayProxy", src: socket.socket, dst: socket.socket, upstream: bool, fault: _Fault):
        self.proxy, self.src, self.dst, self.upstream = proxy, src, dst, upstream
        self.fault = fault
        self.queue: deque = deque()
        self.ready = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._write, daemon=True).start()

    def _read(self) -> None:
        tail = b""
        try:
            while True:
                data = self.src.recv(65536)
                if not data:
                    break
                if not self.upstream and self.fault.sent.is_set() and READY_FOR_QUERY in tail + data:
                    self.fault.answered.set()
                tail = data[-len(READY_FOR_QUERY) :]
                last = False
                if self.upstream and self.proxy._fault_hit(data):
                    self.fault.deaf.set()
                    if not self.proxy._fault_forward:
                        self.proxy._drop(self.src, self.dst)
                        return
                    # Passed on after what came before it, then the connection drops.
                    last = True
                with self.ready:
                    self.queue.append((time.monotonic() + self.proxy.delay, data, last))
                    self.ready.notify()
                if last:
                    return
        except OSError:
            pass
        with self.ready:
            self.queue.append((0.0, None, False))
            self.ready.notify()

    def _write(self) -> None:
        try:
            while True:
                with self.ready:
                    while not self.queue:
                        self.ready.wait()
                    due, data, last = self.queue.popleft()
                if data is None:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if self.fault.deaf.is_set() and not self.upstream:
                    # Kept from the client; the other direction drops the connection
                    # once the database has answered what struck.
                    continue
                if last:
                    self.fault.sent.set()
                self.dst.sendall(data)
                if last:
                    # The database acts on it; its answer never returns to the client.
                    self.fault.answered.wait(timeout=10)
                    break
        except OSError:
            pass
        self.proxy._drop(self.src, self.dst)


class DelayProxy:
    def __init__(self, upstream_host: str, upstream_port: int, delay: float = 0.0):
        self.upstream = (upstream_host, upstream_port)
        self.delay = delay
        self.refuse = False
        self.connections = 0
        self._fault: Optional[bytes] = None
        self._fault_forward = True
        self._lock = threading.Lock()
        self._open: list = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.refuse:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._open.append((client, server))
                self.connections += 1
            fault = _Fault()
            _Pipe(self, client, server, upstream=True, fault=fault)
            _Pipe(self, server, client, upstream=False, fault=fault)

    def _fault_hit(self, data: bytes) -> bool:
        with self._lock:
            if self._fault is not None and self._fault in data:
                self._fault = None
                return True
        return False

    def _drop(self, a: socket.socket, b: socket.socket) -> None:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        with self._lock:
            self._open = [p for p in self._open if p[0] is not a and p[1] is not a]

    def cut_after(self, marker: bytes, forward: bool) -> None:
        with self._lock:
            self._fault, self._fault_forward = marker, forward

    def fault_pending(self) -> bool:
        with self._lock:
            return self._fault is not None

    def cut(self) -> None:
        with self._lock:
            pairs, self._open = self._open, []
        for client, server in pairs:
            self._drop(client, server)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()

    def url_for(self, database_url: str, plain: bool = True) -> str:
        """``database_url`` (postgresql://user@host:port/db) through this proxy; ``plain``
        without TLS, so that ``cut_after`` can see the statements."""
        from urllib.parse import urlsplit

        parts = urlsplit(database_url)
        netloc = parts.netloc.rsplit("@", 1)
        user = netloc[0] + "@" if len(netloc) == 2 else ""
        parts = parts._replace(netloc=f"{user}127.0.0.1:{self.port}")
        if plain:
            parts = parts._replace(query="&".join(q for q in (parts.query, "sslmode=disable") if q))
        return parts.geturl()
