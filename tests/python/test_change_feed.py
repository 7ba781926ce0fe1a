"""The change feed (`GET /{account}/$changes`, docs/change-feed.md) through the real
binary: every kind of write appears once, in order, with the right body; a batch's
changes share their transaction id and appear all or none; SAS scoping; the long poll;
retention's 410; the feed off (409); and a kill -9 under writes loses and invents nothing."""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qsl

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.data.tables import (
    AccountSasPermissions,
    EdmType,
    EntityProperty,
    ResourceTypes,
    TableSasPermissions,
    TableServiceClient,
    UpdateMode,
    generate_account_sas,
    generate_table_sas,
)
from azure.data.tables import TableTransactionError

from conftest import ACCOUNT, KEY, TafelServer, embedded_only, unique_table_name
from rawhttp import assert_error
from test_tls import tls_dir  # noqa: F401 - a fixture: the development certificate

CRED = AzureNamedKeyCredential(ACCOUNT, KEY)


@pytest.fixture(scope="module")
def feed_server(_workdir):
    name = uuid.uuid4().hex[:8]
    srv = TafelServer(_workdir / f"feed-{name}", _workdir / f"feed-{name}.log", extra_args=["--change-retention", "1h"])
    srv.start()
    yield srv
    srv.stop()


def changes(srv, auth="SharedKey", extra=None, **params):
    """One page of the feed: (lines, response)."""
    query = {k: str(v) for k, v in params.items()}
    query.update(extra or {})
    r = srv.raw.get("/$changes", query=query, auth=auth, accept=None)
    if r.status_code != 200:
        return None, r
    assert r.headers["content-type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in r.text.splitlines() if line]
    return lines, r


def all_changes(srv, table=None, after="0"):
    out = []
    while True:
        params = {"after": after}
        if table:
            params["table"] = table
        lines, r = changes(srv, **params)
        assert lines is not None, (r.status_code, r.text)
        out += lines
        if not lines:
            return out
        after = r.headers["x-tafel-next-after"]


def head(srv) -> str:
    _, r = changes(srv, after="latest")
    assert r.status_code == 200, r.text
    return r.headers["x-tafel-head"]


def test_every_kind_of_write_appears_once_in_order_with_its_body(feed_server):
    srv = feed_server
    start = head(srv)
    name = unique_table_name("feed")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        t = svc.create_table(name)
        created = t.create_entity({"PartitionKey": "p", "RowKey": "a", "N": 1, "Big": EntityProperty(2**40, EdmType.INT64), "S": "x"})
        replaced = t.update_entity({"PartitionKey": "p", "RowKey": "a", "S": "y"}, mode=UpdateMode.REPLACE)
        merged = t.update_entity({"PartitionKey": "p", "RowKey": "a", "M": True}, mode=UpdateMode.MERGE)
        upsert_new = t.upsert_entity({"PartitionKey": "p", "RowKey": "b", "F": 1.5}, mode=UpdateMode.REPLACE)
        upsert_old = t.upsert_entity({"PartitionKey": "p", "RowKey": "b", "G": "g"}, mode=UpdateMode.MERGE)
        t.delete_entity("p", "a")
        svc.delete_table(name)
    got = [c for c in all_changes(srv, after=start) if c["table"] == name]
    assert [c["op"] for c in got] == [
        "createTable", "insert", "replace", "merge", "insert", "merge", "delete", "deleteTable"
    ]
    positions = [int(c["position"]) for c in got]
    assert positions == sorted(set(positions)), positions
    for c in got:
        assert c["txn"] == c["position"]  # each a write of its own
    assert "entity" not in got[0] and "PartitionKey" not in got[0] and "etag" not in got[0]
    ins = got[1]
    assert (ins["PartitionKey"], ins["RowKey"]) == ("p", "a")
    e = ins["entity"]
    assert e["N"] == 1 and e["S"] == "x"
    assert e["Big"] == str(2**40) and e["Big@odata.type"] == "Edm.Int64"
    assert e["Timestamp@odata.type"] == "Edm.DateTime" and e["Timestamp"] == ins["time"]
    assert "odata.id" not in e and "odata.editLink" not in e and "odata.metadata" not in e
    assert ins["etag"] == created["etag"]
    assert got[2]["entity"].get("N") is None and got[2]["entity"]["S"] == "y"
    assert got[2]["etag"] == replaced["etag"]
    assert got[3]["entity"]["S"] == "y" and got[3]["entity"]["M"] is True
    assert got[3]["etag"] == merged["etag"]
    assert got[4]["entity"]["F"] == 1.5 and got[4]["etag"] == upsert_new["etag"]
    assert got[5]["entity"]["F"] == 1.5 and got[5]["entity"]["G"] == "g" and got[5]["etag"] == upsert_old["etag"]
    assert "entity" not in got[6] and "etag" not in got[6] and got[6]["RowKey"] == "a"
    # The table filter gives the same changes, and after=latest none.
    assert [c["position"] for c in all_changes(srv, table=name.upper(), after=start)] == [c["position"] for c in got]
    lines, r = changes(srv, after="latest")
    assert lines == [] and r.headers["x-tafel-next-after"] == r.headers["x-tafel-head"]


def test_a_batch_shares_one_txn_and_a_failed_one_records_nothing(feed_server):
    srv = feed_server
    name = unique_table_name("feedbatch")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        t = svc.create_table(name)
        start = head(srv)
        t.submit_transaction([("create", {"PartitionKey": "p", "RowKey": str(i), "V": i}) for i in range(5)])
        after_ok = head(srv)
        with pytest.raises(TableTransactionError):
            t.submit_transaction(
                [("create", {"PartitionKey": "p", "RowKey": "new"}), ("create", {"PartitionKey": "p", "RowKey": "0"})]
            )
        assert head(srv) == after_ok
    got = all_changes(srv, table=name, after=start)
    assert [c["op"] for c in got] == ["insert"] * 5
    assert {c["txn"] for c in got} == {got[0]["position"]}
    assert [int(c["position"]) for c in got] == list(range(int(got[0]["position"]), int(got[0]["position"]) + 5))
    assert sorted(c["RowKey"] for c in got) == [str(i) for i in range(5)]


def sas_query(sas: str) -> dict:
    return dict(parse_qsl(sas))


def test_a_table_sas_reads_only_its_tables_changes(feed_server):
    srv = feed_server
    mine, other = unique_table_name("feedsas"), unique_table_name("feedother")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        svc.create_table(mine).create_entity({"PartitionKey": "p", "RowKey": "1"})
        svc.create_table(other).create_entity({"PartitionKey": "p", "RowKey": "2"})
    expiry = datetime.now(timezone.utc) + timedelta(hours=1)
    sas = sas_query(generate_table_sas(CRED, mine, permission=TableSasPermissions(read=True), expiry=expiry))
    lines, r = changes(srv, auth=None, extra=sas, table=mine)
    assert lines is not None, r.text
    assert {c["table"] for c in lines} == {mine} and any(c["op"] == "insert" for c in lines)
    _, r = changes(srv, auth=None, extra=sas, table=other)
    assert r.status_code == 403, r.text
    _, r = changes(srv, auth=None, extra=sas)
    assert r.status_code == 403, r.text
    # Without read permission, not even its own table.
    add_only = sas_query(generate_table_sas(CRED, mine, permission=TableSasPermissions(add=True), expiry=expiry))
    _, r = changes(srv, auth=None, extra=add_only, table=mine)
    assert_error(r, 403, "AuthorizationPermissionMismatch")
    # An account SAS with read on objects reads every table.
    acct = sas_query(
        generate_account_sas(CRED, ResourceTypes(object=True), AccountSasPermissions(read=True), expiry=expiry)
    )
    lines, r = changes(srv, auth=None, extra=acct)
    assert lines is not None, r.text
    assert {mine, other} <= {c["table"] for c in all_changes(srv)}
    # Anonymous: refused as any unsigned Table request.
    _, r = changes(srv, auth=None)
    assert r.status_code in (401, 403), r.text


def test_long_poll_wakes_on_a_write(feed_server):
    srv = feed_server
    name = unique_table_name("feedpoll")
    assert srv.raw.create_table(name).status_code == 201
    start = head(srv)
    result = {}

    def poll():
        t0 = time.monotonic()
        result["lines"], result["resp"] = changes(srv, after=start, table=name, wait=30)
        result["took"] = time.monotonic() - t0

    th = threading.Thread(target=poll)
    th.start()
    time.sleep(1)
    assert th.is_alive(), "the long poll answered before anything was written"
    assert srv.raw.insert(name, {"PartitionKey": "p", "RowKey": "r"}).status_code == 201
    th.join(40)
    assert [c["op"] for c in result["lines"]] == ["insert"], result
    assert result["took"] < 20, result["took"]
    # Nothing to wait for: an empty page once the wait is up.
    t0 = time.monotonic()
    lines, r = changes(srv, after="latest", wait=1)
    assert lines == [] and time.monotonic() - t0 >= 0.9


def test_bad_parameters_are_400(feed_server):
    for params in ({"after": "x"}, {"after": "-1"}, {"after": str(2**64)}, {"limit": "0"}, {"limit": "1001"},
                   {"wait": "61"}, {"wait": "nan"}, {"since": "yesterday"}, {"table": ""},
                   {"after": "1", "since": "2026-01-01T00:00:00Z"}):
        _, r = changes(feed_server, **params)
        assert_error(r, 400, "InvalidQueryParameterValue")
    # A time past every change is an empty page, not an error.
    lines, r = changes(feed_server, since="9999-12-31T23:59:59Z")
    assert r.status_code == 200 and lines == [], r.text


def test_a_position_ahead_of_the_head_is_410(feed_server):
    _, r = changes(feed_server, after=str(10**12))
    assert_error(r, 410, "ChangePositionExpired")


def test_since_starts_at_a_time(feed_server):
    srv = feed_server
    name = unique_table_name("feedsince")
    assert srv.raw.create_table(name).status_code == 201
    assert srv.raw.insert(name, {"PartitionKey": "p", "RowKey": "old"}).status_code == 201
    time.sleep(0.05)
    mark = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    time.sleep(0.05)
    assert srv.raw.insert(name, {"PartitionKey": "p", "RowKey": "new"}).status_code == 201
    lines, r = changes(srv, since=mark, table=name)
    assert [c["RowKey"] for c in lines] == ["new"], r.text


def test_the_feed_off_is_409(server):
    _, r = changes(server)
    assert_error(r, 409, "ChangeFeedNotEnabled")


def test_a_position_dropped_by_retention_is_410(_workdir):
    name = uuid.uuid4().hex[:8]
    srv = TafelServer(_workdir / f"ret-{name}", _workdir / f"ret-{name}.log", extra_args=["--change-retention", "2s"])
    srv.start()
    try:
        table = unique_table_name("ret")
        assert srv.raw.create_table(table).status_code == 201
        for i in range(3):
            assert srv.raw.insert(table, {"PartitionKey": "p", "RowKey": str(i)}).status_code == 201
        lines, _ = changes(srv, after="0")
        assert len(lines) == 4
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            _, r = changes(srv, after="0")
            if r.status_code == 410:
                break
            time.sleep(0.5)
        assert_error(r, 410, "ChangePositionExpired")
        assert "after=latest" in r.text and "oldest" in r.text
        # Reading from the head goes on working.
        lines, r = changes(srv, after="latest")
        assert r.status_code == 200 and lines == []
    finally:
        srv.kill9()


def settled(read, within=10.0):
    """`read()` once two reads half a second apart agree (or `within` seconds pass)."""
    deadline = time.monotonic() + within
    before = read()
    while True:
        time.sleep(0.5)
        now = read()
        if now == before or time.monotonic() > deadline:
            return now
        before = now


def test_kill9_under_writes_loses_and_invents_nothing(_workdir):
    from test_durability import kill9_while_writing

    name = uuid.uuid4().hex[:8]
    srv = TafelServer(_workdir / f"crash-{name}", _workdir / f"crash-{name}.log", extra_args=["--change-retention", "1h"])
    srv.start()
    try:
        raw = srv.raw
        table = unique_table_name("feedcrash")
        assert raw.create_table(table).status_code == 201
        acked = set()
        lock = threading.Lock()

        def writer(w, stop):
            i = 0
            while not stop.is_set() and i < 5000:
                rk = f"{w:02d}-{i:05d}"
                try:
                    r = raw.insert(table, {"PartitionKey": f"w{w}", "RowKey": rk}, headers={"Prefer": "return-no-content"}, timeout=10)
                except Exception:  # noqa: BLE001 - the server goes away mid-request
                    return
                if r.status_code == 204:
                    with lock:
                        acked.add((f"w{w}", rk))
                i += 1

        assert kill9_while_writing(srv, writer, 8, lambda: len(acked) >= 400)
        srv.start()
        # On PostgreSQL the killed node's database sessions outlive it until the database
        # notices: a write it had sent whole (its COMMIT with it), waiting on a lock, still
        # commits after the restart, at a later position. Read once that has settled.
        feed = settled(lambda: [c for c in all_changes(srv, table=table) if c["op"] == "insert"])
        keys = [(c["PartitionKey"], c["RowKey"]) for c in feed]
        assert len(keys) == len(set(keys)), "a change appears twice"
        positions = [int(c["position"]) for c in feed]
        assert positions == sorted(positions)
        data = {(e["PartitionKey"], e["RowKey"]) for e in raw.query_all(table)}
        assert acked <= set(keys), f"{len(acked - set(keys))} acknowledged writes missing from the feed"
        assert set(keys) == data, "the feed and the data disagree"
        # And the feed goes on after the restart, without reusing a position.
        assert raw.insert(table, {"PartitionKey": "after", "RowKey": "1"}).status_code == 201
        last = all_changes(srv, table=table, after=str(positions[-1]))
        assert [c["RowKey"] for c in last] == ["1"] and int(last[0]["position"]) > positions[-1]
    finally:
        srv.kill9()


def test_a_bearer_token_reads_as_its_role_allows(_workdir, tls_dir):  # noqa: F811 - tls_dir is a fixture
    from test_oauth import ROLES, SIGNING_KEY, call, jwks, mint, start

    keys = _workdir / "feed-jwks.json"
    keys.write_text(json.dumps(jwks(SIGNING_KEY)))
    roles = _workdir / "feed-roles.toml"
    roles.write_text(ROLES)
    srv = start(_workdir, tls_dir, "--oauth", "strict", "--oauth-jwks", str(keys), "--oauth-roles", str(roles),
                "--change-retention", "1h")
    try:
        owner = mint(appid="admin-app")
        for t in ("ordersonly", "elsewhere"):
            assert call(srv, "/Tables", owner, "POST", json={"TableName": t},
                        headers={"Content-Type": "application/json"}).status_code == 201
        reader, team, nobody = mint(oid="reader"), mint(oid="x", groups=["orders-team"]), mint(oid="nobody")
        r = call(srv, "/$changes", reader)
        assert r.status_code == 200 and len(r.text.splitlines()) == 2, r.text
        assert call(srv, "/$changes?table=ordersonly", team).status_code == 200
        assert call(srv, "/$changes?table=elsewhere", team).status_code == 403
        assert call(srv, "/$changes", team).status_code == 403
        assert call(srv, "/$changes", nobody).status_code == 403
    finally:
        srv.stop()


@embedded_only
def test_a_snapshot_restore_never_reuses_a_feed_position(_workdir):
    import requests

    name = uuid.uuid4().hex[:8]
    srv = TafelServer(_workdir / f"snap-{name}", _workdir / f"snap-{name}.log",
                      extra_args=["--change-retention", "1h", "--admin-token", "feedtoken"])
    srv.start()
    try:
        def admin(method, path):
            return requests.request(method, srv.admin_url + path, headers={"Authorization": "Bearer feedtoken"}, timeout=60)

        def undone(after):
            _, r = changes(srv, after=after)
            assert_error(r, 410, "ChangePositionExpired")
            assert "restored to a snapshot" in r.text, r.text

        table = unique_table_name("snap")
        assert srv.raw.create_table(table).status_code == 201
        assert admin("PUT", "/snapshots/base").status_code == 201
        saved = int(head(srv))
        for i in range(3):
            assert srv.raw.insert(table, {"PartitionKey": "p", "RowKey": str(i)}).status_code == 201
        # A reader reads up to P, past the snapshot; the restore undoes what it read.
        lines, _ = changes(srv, after=saved)
        assert [c["RowKey"] for c in lines] == ["0", "1", "2"]
        p = int(lines[-1]["position"])
        assert admin("POST", "/snapshots/base/restore").status_code in (200, 204)
        undone(p)
        undone(saved + 1)
        # A reader starting right after the restore starts at the restored head (not at the end
        # of what the restore undid, which its next read would call undone).
        _, r = changes(srv, after="latest")
        assert (r.headers["x-tafel-head"], r.headers["x-tafel-next-after"]) == (str(saved), str(saved))
        started = r.headers["x-tafel-next-after"]
        # Writes carry the head past P: the reader at P still gets 410, never them.
        for i in range(5):
            assert srv.raw.insert(table, {"PartitionKey": "p", "RowKey": f"new{i}"}).status_code == 201
        assert int(head(srv)) == p + 5
        undone(p)
        # A reader at the restored head goes on, to the new changes, past P.
        lines, r = changes(srv, after=started)
        assert [c["RowKey"] for c in lines] == [f"new{i}" for i in range(5)]
        assert [int(c["position"]) for c in lines] == list(range(p + 1, p + 6))
        assert r.headers["x-tafel-next-after"] == str(p + 5)
        # Durable with the restore: after a crash too.
        srv.kill9()
        srv.start()
        undone(p)
        lines, _ = changes(srv, after=saved)
        assert [int(c["position"]) for c in lines] == list(range(p + 1, p + 6))
    finally:
        srv.kill9()
