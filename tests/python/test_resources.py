"""Bounded resources (docs/reliability.md, "Resource bounds"): a flood of 4 MiB bodies, 10,000
idle connections, clients that send a byte a second, and pages of megabyte entities keep the
server's memory under 1 GiB and leave other requests answered; the limits are configurable."""

from __future__ import annotations

import asyncio
import resource
import socket
import threading
import time
import uuid

import pytest
import requests
from azure.data.tables import TableServiceClient

from email.utils import formatdate

from conftest import ACCOUNT, BACKEND, KEY, TafelServer, canonicalized_resource, shared_key_string_to_sign, sign

GIB_KB = 1024 * 1024
BIG = b"x" * (4 * 1024 * 1024)

# The HTTP limits do not depend on the store: run them once, on the embedded one.
http_only = pytest.mark.skipif(BACKEND != "embedded", reason="HTTP limits, the same on either backend")


def rss_kb(pid: int, field: str) -> int:
    """VmRSS (now) or VmHWM (peak) of a process, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def raise_open_files(n: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < n:
        pytest.skip(f"needs {n} open files, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, n), hard))


def start(tmp_path, *args: str) -> TafelServer:
    srv = TafelServer(tmp_path / f"data-{uuid.uuid4().hex[:6]}", tmp_path / f"tafel-{uuid.uuid4().hex[:6]}.log",
                      extra_args=list(args))
    srv.start()
    return srv


def signed_head(method: str, path: str, port: int, length: int, extra: str = "") -> bytes:
    """A request head signed with Shared Key (the body is not signed), so the server takes
    its body: an unsigned one is refused from the head, before any body memory is held."""
    date = formatdate(usegmt=True)
    sts = shared_key_string_to_sign(method, "", "application/json", date, canonicalized_resource(ACCOUNT, path, ""))
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"x-ms-date: {date}\r\nx-ms-version: 2019-02-02\r\nAuthorization: SharedKey {ACCOUNT}:{sign(KEY, sts)}\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode()


async def post_big(port: int) -> int:
    """A signed POST of a 4 MiB body (not JSON): the server reads it all, within its body
    budget, before it answers 400. Sent from one shared buffer (asyncio's stream writer
    would copy it)."""
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, ("127.0.0.1", port))
        head = signed_head("POST", f"/{ACCOUNT}/Tables", port, len(BIG), "Connection: close\r\n")
        await loop.sock_sendall(sock, head)
        await loop.sock_sendall(sock, BIG)
        answer = await asyncio.wait_for(loop.sock_recv(sock, 256), 120)
        return int(answer.split()[1])
    finally:
        sock.close()


@http_only
def test_a_thousand_concurrent_4_mib_bodies_stay_within_memory_and_reads_go_on(tmp_path):
    raise_open_files(4096)
    srv = start(tmp_path)
    try:
        with TableServiceClient.from_connection_string(srv.conn_str) as svc:
            table = svc.create_table("reads")
            table.create_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})
            # Point reads during the flood: they carry no body, so never wait for body memory.
            latencies: list[float] = []
            stop = threading.Event()

            def read_loop() -> None:
                while not stop.is_set():
                    t = time.monotonic()
                    assert table.get_entity("p", "r")["V"] == 1
                    latencies.append(time.monotonic() - t)
                    time.sleep(0.05)

            reader = threading.Thread(target=read_loop)
            reader.start()

            async def flood() -> list:
                return await asyncio.gather(*(post_big(srv.port) for _ in range(1000)), return_exceptions=True)

            started = time.monotonic()
            try:
                statuses = asyncio.run(flood())
            finally:
                stop.set()
                reader.join()
            took = time.monotonic() - started
        failures = [s for s in statuses if not isinstance(s, int)]
        assert not failures, failures[:3]
        assert set(statuses) == {400}, sorted(set(statuses))
        peak = rss_kb(srv.proc.pid, "VmHWM")
        print(f"1000 x 4 MiB in {took:.1f} s; peak RSS {peak // 1024} MiB; "
              f"reads meanwhile: {len(latencies)}, max {max(latencies) * 1000:.0f} ms")
        # 4 GiB were sent; the server held at most its body budget (256 MiB) of them.
        assert peak < GIB_KB, f"peak RSS {peak // 1024} MiB"
        assert latencies and max(latencies) < 2.0, f"a read waited {max(latencies):.1f} s"
    finally:
        srv.stop()


@http_only
def test_ten_thousand_idle_connections_stay_within_memory_and_requests_go_on(tmp_path):
    raise_open_files(10_500)
    srv = start(tmp_path)
    idle = []
    try:
        before = rss_kb(srv.proc.pid, "VmRSS")
        for _ in range(10_000):
            s = socket.create_connection(("127.0.0.1", srv.port))
            idle.append(s)
        # One complete request on some of them, as a keep-alive client leaves them.
        for s in idle[:100]:
            s.sendall(f"GET /devstoreaccount1/Tables HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n\r\n".encode())
        for s in idle[:100]:
            assert s.recv(64).startswith(b"HTTP/1.1 ")
        time.sleep(1)
        with TableServiceClient.from_connection_string(srv.conn_str) as svc:
            t = time.monotonic()
            svc.create_table("busy")
            assert time.monotonic() - t < 2.0
        now = rss_kb(srv.proc.pid, "VmRSS")
        print(f"10,000 idle connections: RSS {before // 1024} -> {now // 1024} MiB")
        assert now < GIB_KB, f"RSS {now // 1024} MiB"
    finally:
        for s in idle:
            s.close()
        srv.stop()


@http_only
def test_connections_past_max_connections_wait_to_be_accepted(tmp_path):
    srv = start(tmp_path, "--max-connections", "20")
    idle = []
    try:
        idle = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(20)]
        time.sleep(0.3)
        with pytest.raises(requests.exceptions.Timeout):
            requests.get(f"{srv.url}/Tables", timeout=1.0)
        # One goes: the one waiting in the backlog is accepted and answered.
        idle.pop().close()
        r = requests.get(f"{srv.url}/Tables", timeout=5.0)
        assert r.status_code == 403  # served (unsigned), not refused
    finally:
        for s in idle:
            s.close()
        srv.stop()


@http_only
def test_a_body_sent_a_byte_a_second_times_out_and_others_are_served(tmp_path):
    srv = start(tmp_path, "--body-timeout", "2", "--header-timeout", "2")
    try:
        slow = socket.create_connection(("127.0.0.1", srv.port))
        slow.sendall(signed_head("PUT", f"/{ACCOUNT}/t(PartitionKey='p',RowKey='r')", srv.port, 100))
        slow.settimeout(0.0)
        started = time.monotonic()
        answer = b""
        while time.monotonic() - started < 10 and not answer:
            try:
                slow.send(b"{")
            except OSError:
                break
            # Meanwhile the server answers others at once.
            t = time.monotonic()
            assert requests.get(f"{srv.url}/Tables", timeout=2).status_code == 403
            # Well under the 2 s body timeout a blocked answer would wait for.
            assert time.monotonic() - t < 1.5
            time.sleep(1)
            try:
                answer = slow.recv(4096)
            except BlockingIOError:
                pass
        took = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 500"), answer[:200]
        assert b"OperationTimedOut" in answer
        assert 1.5 < took < 5, took

        # A head sent a byte at a time: the connection is closed at the header timeout.
        head = socket.create_connection(("127.0.0.1", srv.port))
        head.sendall(b"GET /devstoreaccount1/Tables HTTP/1.1\r\nHo")
        head.settimeout(6)
        t = time.monotonic()
        rest = head.recv(4096)  # b"" (closed) or a 408, never a hang
        assert time.monotonic() - t < 5
        assert rest == b"" or rest.startswith(b"HTTP/1.1 408"), rest[:100]
    finally:
        srv.stop()


def test_a_page_of_megabyte_entities_ends_early_with_a_continuation(server, table_name):
    # 40 entities of ~1 MiB (16 binary properties of 64 KiB): a page holds ~16 MiB of them.
    with TableServiceClient.from_connection_string(server.conn_str) as svc:
        table = svc.create_table(table_name)
        blob = b"\x01" * (64 * 1024 - 16)
        for i in range(40):
            table.create_entity({"PartitionKey": "p", "RowKey": f"{i:03d}",
                                 **{f"B{j}": blob for j in range(15)}})
        sizes, rows = [], []
        for page in table.query_entities("PartitionKey eq 'p'", select=["RowKey", "B0"],
                                         results_per_page=1000).by_page():
            items = list(page)
            sizes.append(len(items))
            rows += [e["RowKey"] for e in items]
        # $select trims what is sent, not what is held: pages are cut by the stored rows' size.
        assert rows == [f"{i:03d}" for i in range(40)]
        assert 2 <= len(sizes) <= 4, sizes
