"""Regression tests for the second outside security review (issue #56), each through the real
server: a web page's cross-site requests to the admin listener, credentials that may not write
(or another account's key) holding the write path's body memory, a `$select` that multiplied a
query's CPU, a change-feed long poll outliving its credential, `X-HTTP-Method` under a SAS, and
health checks when every admin slot is held. The null-`nbf` token is in test_oauth.py."""

from __future__ import annotations

import base64
import socket
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from email.utils import formatdate
from urllib.parse import parse_qsl, quote

import pytest
import requests
from azure.core.credentials import AzureNamedKeyCredential
from azure.data.tables import TableAccessPolicy, TableSasPermissions, TableServiceClient, generate_table_sas

from conftest import (
    ACCOUNT,
    KEY,
    TafelServer,
    assert_error,
    canonicalized_resource,
    embedded_only,
    shared_key_string_to_sign,
    sign,
    unique_table_name,
)

CRED = AzureNamedKeyCredential(ACCOUNT, KEY)
OTHER = "otheraccount"
OTHER_KEY = base64.b64encode(b"another account's key, 32 bytes!").decode()


def start(workdir, *args: str) -> TafelServer:
    name = uuid.uuid4().hex[:6]
    srv = TafelServer(workdir / f"data-sec2-{name}", workdir / f"tafel-sec2-{name}.log", extra_args=list(args))
    srv.start()
    return srv


def in_an_hour() -> datetime:
    return datetime.now(timezone.utc) + timedelta(hours=1)


def sas_query(sas: str) -> str:
    return "&".join(f"{k}={quote(v, safe='')}" for k, v in parse_qsl(sas))


def signed_head(method: str, account: str, key: str, path: str, extra: str) -> bytes:
    """A Shared Key request head for a raw socket (`path` starts with the account)."""
    date = formatdate(usegmt=True)
    sts = shared_key_string_to_sign(method, "", "application/json", date, canonicalized_resource(account, path, ""))
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-ms-date: {date}\r\nx-ms-version: 2019-02-02\r\n"
        f"Content-Type: application/json\r\nAuthorization: SharedKey {account}:{sign(key, sts)}\r\n{extra}\r\n"
    ).encode()


def answer_head(s: socket.socket, within: float) -> str:
    s.settimeout(within)
    return s.recv(4096).decode(errors="replace")


# --- 1. cross-site requests to the admin listener -------------------------------------------

CROSS_SITE = [
    # A form's POST from another site, as browsers send it.
    {"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
    {"Content-Type": "text/plain", "Origin": "null", "Sec-Fetch-Site": "cross-site"},
    {"Content-Type": "multipart/form-data; boundary=x", "Origin": "https://evil.example"},
    # Without the fetch metadata (an older browser): the Origin alone refuses it.
    {"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example"},
    {"Content-Type": "text/plain", "Origin": "null"},
    # Without Origin either, the form's content type does.
    {"Content-Type": "text/plain;charset=UTF-8"},
    {"Content-Type": "text/ping"},
    # Another port of this machine is another origin (a page the Table API port served).
    {"Content-Type": "application/json", "Origin": "http://127.0.0.1:10002", "Sec-Fetch-Site": "same-site"},
]


@embedded_only
def test_a_cross_site_page_cannot_restore_a_snapshot_or_change_the_admin_state(_workdir):
    srv = start(_workdir)
    try:
        admin = srv.admin_url
        table = unique_table_name("xsite")
        svc = TableServiceClient.from_connection_string(srv.conn_str)
        client = svc.create_table(table)
        assert requests.put(f"{admin}/snapshots/baseline", timeout=30).status_code == 201
        client.create_entity({"PartitionKey": "p", "RowKey": "after-baseline"})
        for headers in CROSS_SITE:
            r = requests.post(f"{admin}/snapshots/baseline/restore", data="x=1", headers=headers, timeout=30)
            assert r.status_code == 403, (headers, r.status_code, r.text)
            # A browser sends PUT and DELETE only after a preflight this listener never
            # grants; sent anyway with a browser's headers, they are refused too.
            if "Origin" in headers or "Sec-Fetch-Site" in headers:
                r = requests.put(f"{admin}/faults", json={"rules": []}, headers={**headers, "Content-Type": "application/json"}, timeout=30)
                assert r.status_code == 403, (headers, r.status_code)
                r = requests.delete(f"{admin}/accounts/{ACCOUNT}/data", headers=headers, timeout=30)
                assert r.status_code == 403, (headers, r.status_code)
        # Nothing was rolled back or emptied, and the snapshot is still there.
        assert client.get_entity("p", "after-baseline")["RowKey"] == "after-baseline"
        names = [s["name"] for s in requests.get(f"{admin}/snapshots", timeout=30).json()["snapshots"]]
        assert names == ["baseline"]
        # The explorer's own calls (same origin) and a script's (no browser headers) go on.
        own = {"Origin": f"http://127.0.0.1:{srv.admin_port}", "Sec-Fetch-Site": "same-origin"}
        assert requests.put(f"{admin}/faults", json={"rules": []}, headers=own, timeout=30).status_code == 200
        assert requests.post(f"{admin}/snapshots/baseline/restore", timeout=30).status_code == 200
        with pytest.raises(Exception):
            client.get_entity("p", "after-baseline")
        r = requests.post(
            f"{admin}/snapshots/baseline/restore", headers={"Content-Type": "application/json"}, timeout=30
        )
        assert r.status_code == 200
    finally:
        srv.stop()


# --- 2. the body budget: decided from the head, and shared per account and credential ------


def test_a_read_only_sas_or_a_body_on_a_read_is_refused_before_its_body(server):
    table = unique_table_name("nobody")
    svc = TableServiceClient.from_connection_string(server.conn_str)
    svc.create_table(table)
    read_only = sas_query(generate_table_sas(CRED, table, permission=TableSasPermissions(read=True), expiry=in_an_hour()))
    s = socket.create_connection(("127.0.0.1", server.port))
    try:
        s.sendall(
            f"POST /{ACCOUNT}/{table}?{read_only} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-ms-version: 2019-02-02\r\n"
            f"Content-Type: application/json\r\nContent-Length: {4 << 20}\r\n\r\n".encode()
        )
        head = answer_head(s, 5)
        assert head.startswith("HTTP/1.1 403") and "AuthorizationPermissionMismatch" in head, head[:300]
    finally:
        s.close()
    s = socket.create_connection(("127.0.0.1", server.port))
    try:
        s.sendall(signed_head("GET", ACCOUNT, KEY, f"/{ACCOUNT}/{table}()", f"Content-Length: {4 << 20}\r\n"))
        head = answer_head(s, 5)
        assert head.startswith("HTTP/1.1 400") and "InvalidInput" in head, head[:300]
    finally:
        s.close()


def test_credentials_that_may_not_write_and_another_accounts_key_do_not_stall_writes(_workdir):
    """70 connections each declare 4 MiB: a read-only SAS, reads with a Content-Length, and
    another account's key sending all of its body but the last byte. With a 64 MiB budget they
    made an authorized write to another table wait for the body timeout; now the first two are
    refused from the head and the other account holds at most its quarter."""
    srv = start(
        _workdir,
        "--account", f"{ACCOUNT}:{KEY}",
        "--account", f"{OTHER}:{OTHER_KEY}",
        "--max-body-memory-mb", "64",
        "--body-timeout", "8",
    )
    held: list[socket.socket] = []
    try:
        table = unique_table_name("victim")
        client = TableServiceClient.from_connection_string(srv.conn_str).create_table(table)
        read_only = sas_query(generate_table_sas(CRED, table, permission=TableSasPermissions(read=True), expiry=in_an_hour()))
        size = 4 << 20

        def hold(head: bytes, body: bytes):
            s = socket.create_connection(("127.0.0.1", srv.port))
            held.append(s)
            try:
                s.sendall(head + body)
            except OSError:
                pass  # closed by the test's end, or refused at once

        threads = []
        for i in range(70):
            kind = i % 3
            if kind == 0:
                head = (
                    f"POST /{ACCOUNT}/{table}?{read_only} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-ms-version: 2019-02-02\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
                ).encode()
                body = b""
            elif kind == 1:
                head = signed_head("GET", ACCOUNT, KEY, f"/{ACCOUNT}/{table}()", f"Content-Length: {size}\r\n")
                body = b""
            else:
                head = signed_head("POST", OTHER, OTHER_KEY, f"/{OTHER}/anytable", f"Content-Length: {size}\r\n")
                body = b" " * (size - 1)
            th = threading.Thread(target=hold, args=(head, body), daemon=True)
            th.start()
            threads.append(th)
        time.sleep(2)
        started = time.monotonic()
        client.create_entity({"PartitionKey": "p", "RowKey": "r", "V": "x" * 30_000})
        batch = [("create", {"PartitionKey": "b", "RowKey": str(i), "V": "y" * 20_000}) for i in range(50)]
        client.submit_transaction(batch)
        took = time.monotonic() - started
        assert took < 4.0, f"an authorized write waited {took:.1f} s behind bodies it should not share memory with"
    finally:
        for s in held:
            s.close()
        srv.stop()


# --- 3. $select ------------------------------------------------------------------------------


def test_a_select_longer_than_an_entity_can_be_is_refused_and_a_repetitive_one_is_cheap(server, raw):
    table = unique_table_name("select")
    client = TableServiceClient.from_connection_string(server.conn_str).create_table(table)
    wide = {f"p{i}": i for i in range(250)}
    for start_ in range(0, 1000, 100):
        client.submit_transaction(
            [("create", {"PartitionKey": "p", "RowKey": f"{r:04}", **wide}) for r in range(start_, start_ + 100)]
        )
    too_many = ",".join(f"n{i}" for i in range(256))
    r = raw.get(f"/{table}()", query={"$select": too_many})
    assert_error(r, 400, "InvalidInput")
    assert raw.get(f"/{table}()", query={"$select": ",".join(f"n{i}" for i in range(255))}).status_code == 200
    # 10,000 names of which 60 differ: each property of each entity is looked up once, not
    # against the whole list (8 s for 1,000 entities before, past the 5 s page limit).
    names = ",".join(f"p{i % 60}" for i in range(10_000))
    started = time.monotonic()
    r = raw.get(f"/{table}()", query={"$select": names})
    took = time.monotonic() - started
    assert r.status_code == 200, r.text[:300]
    rows = r.json()["value"]
    assert len(rows) == 1000 and set(rows[0]) == {"odata.etag"} | {f"p{i}" for i in range(60)}
    assert took < 3.0, f"a repetitive $select took {took:.1f} s"


# --- 4. a change-feed long poll outliving its credential -------------------------------------


@pytest.fixture(scope="module")
def feed_server(_workdir):
    srv = start(_workdir, "--change-retention", "1h")
    yield srv
    srv.stop()


def poll(srv: TafelServer, table: str, sas: str, after: str, out: dict):
    t0 = time.monotonic()
    url = f"{srv.url}/$changes?{sas}&table={table}&after={after}&wait=30"
    out["resp"] = requests.get(url, headers={"x-ms-version": "2019-02-02"}, timeout=60)
    out["took"] = time.monotonic() - t0


def feed_head(srv: TafelServer) -> str:
    r = srv.raw.get("/$changes", query={"after": "latest"}, accept=None)
    assert r.status_code == 200, r.text
    return r.headers["x-tafel-head"]


def test_a_long_poll_ends_with_403_when_its_policy_is_removed(feed_server):
    srv = feed_server
    table = unique_table_name("feedpolicy")
    client = TableServiceClient.from_connection_string(srv.conn_str).create_table(table)
    client.set_table_access_policy({"feed": TableAccessPolicy(permission="r", expiry=in_an_hour())})
    sas = sas_query(generate_table_sas(CRED, table, policy_id="feed"))
    out: dict = {}
    th = threading.Thread(target=poll, args=(srv, table, sas, feed_head(srv), out))
    th.start()
    time.sleep(1)
    assert th.is_alive(), "the poll answered before anything was written"
    client.set_table_access_policy({})
    client.create_entity({"PartitionKey": "p", "RowKey": "secret"})
    th.join(40)
    r = out["resp"]
    assert_error(r, 403, "AuthenticationFailed")
    assert "secret" not in r.text


def test_a_long_poll_ends_with_403_when_its_sas_expires(feed_server):
    srv = feed_server
    table = unique_table_name("feedexpiry")
    client = TableServiceClient.from_connection_string(srv.conn_str).create_table(table)
    expiry = datetime.now(timezone.utc) + timedelta(seconds=3)
    sas = sas_query(generate_table_sas(CRED, table, permission=TableSasPermissions(read=True), expiry=expiry))
    out: dict = {}
    th = threading.Thread(target=poll, args=(srv, table, sas, feed_head(srv), out))
    th.start()
    time.sleep(max(0.0, (expiry - datetime.now(timezone.utc)).total_seconds()) + 1.5)
    assert th.is_alive(), "the poll answered before anything was written"
    client.create_entity({"PartitionKey": "p", "RowKey": "late"})
    th.join(40)
    assert_error(out["resp"], 403, "AuthenticationFailed")
    # With the credential still good, the same poll delivers.
    good = sas_query(generate_table_sas(CRED, table, permission=TableSasPermissions(read=True), expiry=in_an_hour()))
    out = {}
    th = threading.Thread(target=poll, args=(srv, table, good, feed_head(srv), out))
    th.start()
    time.sleep(1)
    client.create_entity({"PartitionKey": "p", "RowKey": "seen"})
    th.join(40)
    assert out["resp"].status_code == 200 and '"seen"' in out["resp"].text, out["resp"].text


# --- 5. X-HTTP-Method and the admin listener's health under load ----------------------------


def test_a_sas_is_checked_against_the_tunnelled_verb_not_the_post(server, raw):
    table = unique_table_name("tunnel")
    client = TableServiceClient.from_connection_string(server.conn_str).create_table(table)
    client.create_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})
    add_update = sas_query(
        generate_table_sas(CRED, table, permission=TableSasPermissions(add=True, update=True), expiry=in_an_hour())
    )
    url = f"{server.url}/{table}(PartitionKey='p',RowKey='r')?{add_update}"
    headers = {"x-ms-version": "2019-02-02", "X-HTTP-Method": "DELETE", "If-Match": "*"}
    r = requests.post(url, headers=headers, timeout=30)
    assert_error(r, 403, "AuthorizationPermissionMismatch")
    assert client.get_entity("p", "r")["V"] == 1
    # As on Azure, Shared Key signs the verb sent (POST) and the tunnelled DELETE is applied.
    r = raw.post(f"/{table}(PartitionKey='p',RowKey='r')", headers={"X-HTTP-Method": "DELETE", "If-Match": "*"})
    assert r.status_code == 204, r.text
    # A SAS that may delete deletes through the tunnel too.
    client.create_entity({"PartitionKey": "p", "RowKey": "r2"})
    deleter = sas_query(generate_table_sas(CRED, table, permission=TableSasPermissions(delete=True), expiry=in_an_hour()))
    r = requests.post(f"{server.url}/{table}(PartitionKey='p',RowKey='r2')?{deleter}", headers=headers, timeout=30)
    assert r.status_code == 204, r.text


def test_health_is_answered_while_unfinished_heads_hold_every_admin_slot(server):
    held = []
    try:
        for _ in range(64):
            s = socket.create_connection(("127.0.0.1", server.admin_port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            held.append(s)
        time.sleep(0.5)
        for path in ("/health", "/ready"):
            started = time.monotonic()
            r = requests.get(f"{server.admin_url}{path}", timeout=10)
            took = time.monotonic() - started
            assert r.status_code == 200, (path, r.status_code)
            assert took < 2.5, f"{path} waited {took:.1f} s behind unfinished heads"
        # Anything else on a spare connection is told to come back, not served.
        r = requests.get(f"{server.admin_url}/metrics", timeout=10)
        assert r.status_code == 503, r.status_code
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 15
    while requests.get(f"{server.admin_url}/metrics", timeout=10).status_code != 200:
        assert time.monotonic() < deadline, "the admin listener did not recover"
        time.sleep(0.2)


def test_a_verb_the_route_refuses_is_answered_after_authentication(server):
    # A request that proves no credential learns nothing from its verb: 403 first,
    # whether the verb is sent or tunnelled through X-HTTP-Method.
    url = f"{server.url}/anytable"
    bad_key = {"x-ms-version": "2019-02-02", "Authorization": f"SharedKey {ACCOUNT}:AAAA"}
    r = requests.post(url, headers={**bad_key, "X-HTTP-Method": "BOGUS"}, timeout=30)
    assert_error(r, 403, "AuthenticationFailed")
    r = requests.request("BOGUS", url, headers=bad_key, timeout=30)
    assert_error(r, 403, "AuthenticationFailed")
