"""Regression tests for the holes an outside security review found (issue #42), each through
the real server: a Shared Key replay through `Date`, unauthenticated clients holding the body
budget, unbounded header memory, a quadratic `$filter`, account enumeration, and the admin
listener answering any `Host`. The token checks (audience, issuer, `nbf`) are in test_oauth.py."""

from __future__ import annotations

import base64
import resource
import socket
import threading
import time
import uuid
from email.utils import formatdate

import pytest
import requests
from azure.data.tables import TableServiceClient

from conftest import (
    ACCOUNT,
    KEY,
    TafelServer,
    assert_error,
    canonicalized_resource,
    shared_key_lite_string_to_sign,
    shared_key_string_to_sign,
    sign,
    unique_table_name,
)

MONTH_AGO = formatdate(time.time() - 30 * 86400, usegmt=True)


def start(workdir, *args: str) -> TafelServer:
    name = uuid.uuid4().hex[:6]
    srv = TafelServer(workdir / f"data-sec-{name}", workdir / f"tafel-sec-{name}.log", extra_args=list(args))
    srv.start()
    return srv


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


# --- 1. Shared Key replay through Date --------------------------------------------------


def test_a_signature_over_an_old_date_header_is_not_revived_by_a_fresh_x_ms_date(server, raw):
    """A captured request's signed `Date`, a month old, beside a fresh `x-ms-date`: Azure signs
    and skew-checks x-ms-date when present, so the old signature no longer matches (403)."""
    table = unique_table_name("replay")
    assert raw.create_table(table).status_code == 201
    resource_ = canonicalized_resource(ACCOUNT, f"/{ACCOUNT}/Tables('{table}')", "")
    for scheme, sts in [
        ("SharedKey", shared_key_string_to_sign("DELETE", "", "", MONTH_AGO, resource_)),
        # Lite does not sign the verb: a captured GET's signature, replayed as a DELETE.
        ("SharedKeyLite", shared_key_lite_string_to_sign(MONTH_AGO, resource_)),
    ]:
        headers = {
            "Date": MONTH_AGO,
            "x-ms-date": formatdate(usegmt=True),
            "x-ms-version": "2019-02-02",
            "Accept": "application/json;odata=minimalmetadata",
            "Authorization": f"{scheme} {ACCOUNT}:{sign(KEY, sts)}",
        }
        r = requests.delete(f"{server.url}/Tables('{table}')", headers=headers, timeout=30)
        assert_error(r, 403, "AuthenticationFailed")
    # The old date alone is refused for its age.
    sts = shared_key_string_to_sign("DELETE", "", "", MONTH_AGO, resource_)
    headers = {"Date": MONTH_AGO, "x-ms-version": "2019-02-02", "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}"}
    assert_error(requests.delete(f"{server.url}/Tables('{table}')", headers=headers, timeout=30), 403, "AuthenticationFailed")
    assert raw.get(f"/Tables('{table}')").status_code == 200, "the table is still there"
    # A fresh Date alone, with no x-ms-date, is what is signed and it passes.
    now = formatdate(usegmt=True)
    sts = shared_key_string_to_sign("DELETE", "", "", now, resource_)
    headers = {"Date": now, "x-ms-version": "2019-02-02", "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}"}
    assert requests.delete(f"{server.url}/Tables('{table}')", headers=headers, timeout=30).status_code == 204


def test_a_signature_over_a_decoded_path_is_not_taken_for_a_path_that_decodes_to_it(server, raw):
    """Tolerating clients that sign the decoded path must not let a signature made for
    `…'a%27'` (signed as sent) authenticate `…'a%2527'`, another entity."""
    table = unique_table_name("decoded")
    assert raw.create_table(table).status_code == 201
    date = formatdate(usegmt=True)
    signed_path = f"/{ACCOUNT}/{table}(PartitionKey='p',RowKey='a%27')"
    sts = shared_key_string_to_sign("GET", "", "", date, canonicalized_resource(ACCOUNT, signed_path, ""))
    headers = {"x-ms-date": date, "x-ms-version": "2019-02-02", "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}"}
    other = f"http://127.0.0.1:{server.port}/{ACCOUNT}/{table}(PartitionKey='p',RowKey='a%2527')"
    assert_error(requests.get(other, headers=headers, timeout=30), 403, "AuthenticationFailed")


# --- 2. unauthenticated clients and the body budget -------------------------------------


def test_unauthenticated_clients_declaring_large_bodies_do_not_stall_writes(_workdir):
    """70 sockets send POST heads declaring 4 MiB bodies, unsigned, and no body. They used to
    hold the whole body budget (here 64 MiB) until the body timeout; credentials are now
    checked from the head, so they hold nothing and a signed insert is answered at once (the
    body timeout is 3 s here; before, the insert waited for it)."""
    srv = start(_workdir, "--max-body-memory-mb", "64", "--body-timeout", "3")
    held = []
    try:
        table = unique_table_name("budget")
        svc = TableServiceClient.from_connection_string(srv.conn_str)
        client = svc.create_table(table)
        for _ in range(70):
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.sendall(
                f"POST /{ACCOUNT}/{table} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {4 << 20}\r\n\r\n".encode()
            )
            held.append(s)
        time.sleep(0.3)
        started = time.monotonic()
        client.create_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})
        took = time.monotonic() - started
        assert took < 2.0, f"an authenticated write waited {took:.1f} s behind unauthenticated bodies"
        # The unauthenticated ones are answered 403 once their (absent) body stops coming.
        held[0].settimeout(10)
        head = held[0].recv(4096).decode(errors="replace")
        assert head.startswith("HTTP/1.1 403"), head[:200]
    finally:
        for s in held:
            s.close()
        srv.stop()


# --- 3. header memory --------------------------------------------------------------------


def test_heads_that_never_end_hold_bounded_memory_and_give_it_back(_workdir):
    """800 connections each send most of a huge header line and never finish it. One head is
    capped at 64 KiB (431 beyond), all heads together at --max-header-memory-mb: the server's
    memory stays bounded, ordinary requests are still served, and the memory comes back."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    srv = start(_workdir, "--max-header-memory-mb", "8")
    conns = []
    try:
        pid = srv.proc.pid
        before = rss_kib(pid)
        pad = b"a" * (60 * 1024)

        def attack(n):
            for _ in range(n):
                try:
                    s = socket.create_connection(("127.0.0.1", srv.port))
                    s.sendall(b"GET /" + ACCOUNT.encode() + b"/Tables HTTP/1.1\r\nHost: x\r\nX-Pad: " + pad)
                    conns.append(s)
                except OSError:
                    pass  # a connection the server shed

        threads = [threading.Thread(target=attack, args=(100,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(1.0)
        during = rss_kib(pid)
        grown_mib = (during - before) / 1024
        # Unbounded, 800 x 60 KiB = 47 MiB of heads alone (it was 1 MiB each before).
        assert grown_mib < 32, f"the server grew {grown_mib:.0f} MiB holding unfinished heads"
        # A real client is still served meanwhile.
        started = time.monotonic()
        assert srv.raw.get("/Tables").status_code == 200
        assert time.monotonic() - started < 1.0
        # One head past 64 KiB is refused outright: 431, or the connection reset by the
        # close that follows it before the client reads it.
        try:
            r = requests.get(f"http://127.0.0.1:{srv.port}/{ACCOUNT}/Tables", headers={"X-Big": "b" * (70 * 1024)}, timeout=30)
            assert r.status_code == 431
        except requests.ConnectionError:
            pass
        for s in conns:
            s.close()
        conns.clear()
        deadline = time.monotonic() + 10
        while rss_kib(pid) > before + 16 * 1024 and time.monotonic() < deadline:
            time.sleep(0.2)
        after = rss_kib(pid)
        assert after < before + 16 * 1024, f"still {(after - before) / 1024:.0f} MiB above the start after the clients left"
    finally:
        for s in conns:
            s.close()
        srv.stop()


# --- 4. a filter whose planning was quadratic --------------------------------------------


def test_a_filter_of_many_partitions_and_many_row_key_exclusions_is_planned_at_once(server, raw):
    """`(PartitionKey eq 'k0' or … ×500) and RowKey ne 'r0' and … ×1300` (~50 KB on the
    wire): planning split every partition's range at each `ne`, minutes of CPU per request.
    Now at once, and with the right rows."""
    table = unique_table_name("quadratic")
    assert raw.create_table(table).status_code == 201
    for pk, rk in [("k5", "r5"), ("k5", "keep"), ("k499", "keep2"), ("zz", "keep")]:
        assert raw.insert(table, {"PartitionKey": pk, "RowKey": rk}).status_code == 201
    partitions = " or ".join(f"PartitionKey eq 'k{i}'" for i in range(500))
    rows = " and ".join(f"RowKey ne 'r{i}'" for i in range(1300))
    flt = f"({partitions}) and {rows}"
    started = time.monotonic()
    got = raw.query_all(table, {"$filter": flt})
    took = time.monotonic() - started
    assert sorted((e["PartitionKey"], e["RowKey"]) for e in got) == [("k499", "keep2"), ("k5", "keep")]
    assert took < 10, f"took {took:.1f} s"


# --- 7. smaller ones ----------------------------------------------------------------------


def test_an_unknown_account_is_refused_exactly_as_a_wrong_key(server, raw):
    """The answer for an account that does not exist must not differ from a bad signature for
    one that does (account enumeration)."""
    wrong = base64.b64encode(b"not the key" * 4).decode()
    real = raw.get("/Tables", key=wrong)
    ghost = raw.get("/Tables", account="zzzghost", key=wrong)
    for r in (real, ghost):
        assert_error(r, 403, "AuthenticationFailed")

    def detail(r):
        return r.text.replace(r.headers.get("x-ms-request-id", "?"), "").split("Time:")[0]

    assert detail(real) == detail(ghost)
    assert "zzzghost" not in ghost.text and "exist" not in ghost.text


def test_the_admin_listener_answers_only_local_host_names_without_a_token(server):
    """A DNS-rebinding page reaches 127.0.0.1 under its own name: it must not read /metrics
    (account and table names) or /explorer.json. Health checks stay open."""
    url = server.admin_url
    assert requests.get(f"{url}/metrics", timeout=10).status_code == 200
    assert requests.get(f"{url}/metrics", headers={"Host": "localhost:1"}, timeout=10).status_code == 200
    for path in ("/metrics", "/explorer.json", "/"):
        r = requests.get(f"{url}{path}", headers={"Host": f"rebind.example:{server.admin_port}"}, timeout=10)
        assert r.status_code == 403, (path, r.status_code)
        assert ACCOUNT not in r.text
    for path in ("/health", "/ready"):
        assert requests.get(f"{url}{path}", headers={"Host": "rebind.example"}, timeout=10).status_code == 200


def test_the_admin_listener_serves_a_bounded_number_of_connections(server):
    """Idle connections to the admin port are held to its own cap (64, and 8 spares that answer
    only health checks), not to the open-file
    limit the Table API port relies on."""
    pid = server.proc.pid

    def fds():
        import os

        return len(os.listdir(f"/proc/{pid}/fd"))

    before = fds()
    idle = []
    try:
        for _ in range(200):
            idle.append(socket.create_connection(("127.0.0.1", server.admin_port)))
        time.sleep(0.5)
        assert fds() - before <= 78, f"{fds() - before} more open files for 200 idle admin connections"
    finally:
        for s in idle:
            s.close()
    # Once they go, the listener serves again.
    deadline = time.monotonic() + 10
    while True:
        try:
            if requests.get(f"{server.admin_url}/health", timeout=2).status_code == 200:
                break
        except requests.RequestException:
            pass
        assert time.monotonic() < deadline, "the admin listener did not recover"
        time.sleep(0.1)
