"""Counts and table statistics (docs/lifecycle.md): ``GET /{table}/$count`` on the Table API
port, authorized as a query of the table; ``/accounts/A/tables/T/stats``, ``/stats`` and the
``tafel_table_*`` gauges on the admin listener; ``tafel stats``. Writes go through the Python
SDK (it has no count call: counts are plain HTTP, Shared Key signed or with a SAS)."""

import json
import uuid
from datetime import datetime, timedelta, timezone

import requests
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.data.tables import TableClient, TableServiceClient, UpdateMode, generate_table_sas

from conftest import ACCOUNT, KEY, scrape, unique_table_name, value
from launch import run_tafel
from rawhttp import assert_error

CRED = AzureNamedKeyCredential(ACCOUNT, KEY)


def count(server, table: str, flt: str | None = None, **kw) -> requests.Response:
    query = {"$filter": flt} if flt is not None else None
    return server.raw.get(f"/{table}/$count", query=query, accept=None, **kw)


def count_of(server, table: str, flt: str | None = None) -> int:
    r = count(server, table, flt)
    assert r.status_code == 200, (r.status_code, r.text)
    assert r.headers["Content-Type"] == "text/plain;charset=utf-8"
    return int(r.text)


def stats(server, table: str) -> dict:
    r = requests.get(f"{server.admin_url}/accounts/{ACCOUNT}/tables/{table}/stats", timeout=10)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def truth(tc: TableClient) -> tuple:
    """(entities, partitions) as a full query finds them."""
    rows = list(tc.list_entities())
    return len(rows), len({e["PartitionKey"] for e in rows})


def fill(tc: TableClient, partitions: str, rows: int) -> None:
    for pk in partitions:
        tc.submit_transaction([("create", {"PartitionKey": pk, "RowKey": f"{i:03}", "n": i}) for i in range(rows)])


def test_count_follows_inserts_batches_updates_and_deletes(server):
    name = unique_table_name("cnt")
    with TableServiceClient.from_connection_string(server.conn_str) as svc:
        tc = svc.create_table(name)
        assert count_of(server, name) == 0
        # Both URL forms OData and the SDKs' table paths use.
        r = server.raw.get(f"/{name}()/$count", accept=None)
        assert (r.status_code, r.text) == (200, "0")
        fill(tc, "abc", 40)
        tc.create_entity({"PartitionKey": "d", "RowKey": "1", "s": "x"})
        assert count_of(server, name) == 121
        before = stats(server, name)
        assert (before["entities"], before["partitions"]) == (121, 4)
        # An update that grows an entity changes the bytes, not the count.
        tc.update_entity({"PartitionKey": "d", "RowKey": "1", "s": "x" * 1000}, mode=UpdateMode.REPLACE)
        tc.upsert_entity({"PartitionKey": "d", "RowKey": "1", "t": "y"}, mode=UpdateMode.MERGE)
        after = stats(server, name)
        assert after["entities"] == 121
        assert after["bytes"] >= before["bytes"] + 1000
        # Deletes, one by one and in a batch; a batch mixing them.
        tc.delete_entity("d", "1")
        tc.submit_transaction([("delete", {"PartitionKey": "a", "RowKey": f"{i:03}"}) for i in range(10)])
        tc.submit_transaction(
            [("delete", {"PartitionKey": "b", "RowKey": "000"}), ("upsert", {"PartitionKey": "b", "RowKey": "new"})]
            + [("update", {"PartitionKey": "b", "RowKey": f"{i:03}", "m": 1}) for i in range(1, 5)]
        )
        assert count_of(server, name) == truth(tc)[0] == 110
        assert stats(server, name)["partitions"] == 3
        # A filter counts what the same query returns.
        for flt in ["PartitionKey eq 'c'", "n ge 30", "PartitionKey ge 'b' and n lt 5", "RowKey eq 'nope'"]:
            assert count_of(server, name, flt) == len(list(tc.query_entities(flt))), flt
        svc.delete_table(name)


def test_count_of_a_missing_table_and_a_bad_filter_answer_as_a_query_does(server, raw_table):
    r = count(server, "nosuchtable" + uuid.uuid4().hex[:6])
    assert_error(r, 404, "TableNotFound")
    r = count(server, "nosuchtable" + uuid.uuid4().hex[:6], "PartitionKey eq 'a'")
    assert_error(r, 404, "TableNotFound")
    bad = count(server, raw_table, "PartitionKey eq")
    query = server.raw.get(f"/{raw_table}()", query={"$filter": "PartitionKey eq"})
    assert bad.status_code == query.status_code == 400
    assert json.loads(bad.text)["odata.error"]["code"] == json.loads(query.text)["odata.error"]["code"]
    # Unsigned: refused as a query is.
    r = count(server, raw_table, auth=None)
    assert r.status_code == 403


def test_count_with_a_sas_counts_only_its_key_range(server):
    name = unique_table_name("cntsas")
    with TableServiceClient.from_connection_string(server.conn_str) as svc:
        tc = svc.create_table(name)
        fill(tc, "abcde", 5)
        expiry = datetime.now(timezone.utc) + timedelta(hours=1)
        url = f"{server.url}/{name}/$count"
        cases = [
            (dict(start_pk="b", end_pk="c"), "", 10),
            (dict(start_pk="b", start_rk="003", end_pk="d", end_rk="001"), "", 2 + 5 + 2),
            (dict(start_pk="b", end_pk="c"), "RowKey ge '003'", 4),
            (dict(), "", 25),
        ]
        for bounds, flt, want in cases:
            sas = generate_table_sas(CRED, name, permission="r", expiry=expiry, **bounds)
            params = {"$filter": flt} if flt else {}
            r = requests.get(f"{url}?{sas}", params=params, timeout=10)
            assert (r.status_code, r.text) == (200, str(want)), (bounds, flt, r.text)
            # The same SAS's query returns as many.
            sc = TableClient(endpoint=server.url, table_name=name, credential=AzureSasCredential(sas))
            assert len(list(sc.query_entities(flt) if flt else sc.list_entities())) == want
        # A SAS for another table, or without read, may not count this one.
        other = generate_table_sas(CRED, "othertable", permission="r", expiry=expiry)
        assert_error(requests.get(f"{url}?{other}", timeout=10), 403, "AuthorizationResourceTypeMismatch")
        add_only = generate_table_sas(CRED, name, permission="a", expiry=expiry)
        assert_error(requests.get(f"{url}?{add_only}", timeout=10), 403, "AuthorizationPermissionMismatch")
        svc.delete_table(name)


def test_counts_are_exact_after_kill_9_and_table_recreate(fresh_server):
    srv = fresh_server
    name = unique_table_name("cntkill")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        tc = svc.create_table(name)
        fill(tc, "pq", 50)
        tc.submit_transaction([("delete", {"PartitionKey": "p", "RowKey": f"{i:03}"}) for i in range(7)])
    srv.kill9()
    srv.start()
    assert count_of(srv, name) == 93
    assert stats(srv, name)["entities"] == 93
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        svc.delete_table(name)
        assert_error(count(srv, name), 404, "TableNotFound")
        r = requests.get(f"{srv.admin_url}/accounts/{ACCOUNT}/tables/{name}/stats", timeout=10)
        assert (r.status_code, r.json()["error"]) == (404, "TableNotFound")
        tc = svc.create_table(name)
        assert count_of(srv, name) == 0
        tc.create_entity({"PartitionKey": "x", "RowKey": "1"})
    srv.kill9()
    srv.start()
    assert count_of(srv, name) == 1


def test_stats_on_the_admin_listener_metrics_and_the_cli(fresh_server):
    srv = fresh_server
    small, big = unique_table_name("small"), unique_table_name("big")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        fill(svc.create_table(small), "a", 3)
        fill(svc.create_table(big), "abcd", 20)
    one = stats(srv, big)
    assert (one["account"], one["table"], one["entities"]) == (ACCOUNT, big, 80)
    assert one["partitions"] == 4
    assert one["bytes"] > 0
    listing = requests.get(f"{srv.admin_url}/stats", timeout=10).json()["tables"]
    assert [(t["table"], t["entities"]) for t in listing] == [(big, 80), (small, 3)]
    assert listing[0]["bytes"] == one["bytes"]
    samples = scrape(srv)
    assert value(samples, "tafel_table_entities", account=ACCOUNT, table=big) == 80
    assert value(samples, "tafel_table_bytes", account=ACCOUNT, table=big) == one["bytes"]
    assert value(samples, "tafel_table_entities", account=ACCOUNT, table=small) == 3
    # Unknown names are 404s.
    r = requests.get(f"{srv.admin_url}/accounts/nosuchaccount/tables/{big}/stats", timeout=10)
    assert (r.status_code, r.json()["error"]) == (404, "AccountNotFound")
    # `tafel stats`, through the same listener.
    out = run_tafel("stats", "--admin-url", srv.admin_url, "--account", ACCOUNT, "--table", big)
    assert out.returncode == 0, out.stderr
    assert "entities\t80" in out.stdout.splitlines()
    out = run_tafel("stats", "--admin-url", srv.admin_url)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1].split("\t")[:3] == [ACCOUNT, big, "80"]
    out = run_tafel("stats", "--admin-url", srv.admin_url, "--account", ACCOUNT, "--table", "nosuch")
    assert out.returncode == 1 and "404" in out.stderr
