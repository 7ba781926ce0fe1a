"""Scale-out: two Tafel nodes over one PostgreSQL database behave as one service.

Runs only with ``TAFEL_BACKEND=postgres`` (``scripts/test`` runs the suite a second time
that way, under ``scripts/with-postgres``)."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import (
    TafelServer,
    assert_error,
    create_postgres_database,
    entity_path,
    postgres_only,
    unique_table_name,
)

pytestmark = postgres_only

PORTS = (11501, 11502)


@pytest.fixture(scope="module")
def nodes(_workdir):
    """Node A and node B, sharing one fresh database."""
    database = create_postgres_database()
    servers = []
    for port, name in zip(PORTS, "ab"):
        tag = f"{name}-{uuid.uuid4().hex[:6]}"
        srv = TafelServer(_workdir / f"scale-data-{tag}", _workdir / f"scale-tafel-{tag}.log", port=port)
        srv.database_url = database
        srv.start()
        servers.append(srv)
    yield servers
    for srv in servers:
        srv.stop()


@pytest.fixture
def shared_table(nodes):
    a, _ = nodes
    name = unique_table_name("so")
    assert a.raw.create_table(name).status_code == 201
    yield name
    a.raw.delete_table(name)


def test_table_and_entity_created_on_one_node_are_visible_on_the_other(nodes):
    a, b = nodes
    name = unique_table_name("vis")
    assert a.raw.create_table(name).status_code == 201
    listed = b.raw.get("/Tables").json()["value"]
    assert name in [t["TableName"] for t in listed]
    assert_error(b.raw.create_table(name.upper()), 409, "TableAlreadyExists")
    r = a.raw.insert(name, {"PartitionKey": "p", "RowKey": "r", "V": 1})
    assert r.status_code == 201, r.text
    got = b.raw.get_entity(name, "p", "r")
    assert got.status_code == 200, got.text
    assert got.json()["V"] == 1
    assert got.headers["ETag"] == r.headers["ETag"]


def test_etag_from_one_node_fails_on_the_other_after_an_update(nodes, shared_table):
    a, b = nodes
    r = a.raw.insert(shared_table, {"PartitionKey": "p", "RowKey": "e", "V": 1})
    assert r.status_code == 201, r.text
    old = r.headers["ETag"]
    upd = a.raw.put(entity_path(shared_table, "p", "e"), json={"V": 2}, headers={"If-Match": old})
    assert upd.status_code == 204, upd.text
    stale = b.raw.put(entity_path(shared_table, "p", "e"), json={"V": 3}, headers={"If-Match": old})
    assert_error(stale, 412, "UpdateConditionNotSatisfied")
    fresh = b.raw.put(entity_path(shared_table, "p", "e"), json={"V": 3}, headers={"If-Match": upd.headers["ETag"]})
    assert fresh.status_code == 204, fresh.text
    assert a.raw.get_entity(shared_table, "p", "e").json()["V"] == 3


def test_concurrent_inserts_of_one_key_through_both_nodes_one_wins(nodes, shared_table):
    a, b = nodes
    for round_ in range(5):
        rk = f"race{round_}"
        barrier = threading.Barrier(16)

        def insert(i):
            node = (a, b)[i % 2]
            barrier.wait()
            r = node.raw.insert(shared_table, {"PartitionKey": "p", "RowKey": rk, "Who": i})
            return r.status_code, r.headers.get("x-ms-error-code")

        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(insert, range(16)))
        statuses = sorted(s for s, _ in results)
        assert statuses == [201] + [409] * 15, results
        assert {c for s, c in results if s == 409} == {"EntityAlreadyExists"}


def test_concurrent_merges_of_distinct_properties_through_both_nodes_all_land(nodes, shared_table):
    a, b = nodes
    assert a.raw.insert(shared_table, {"PartitionKey": "m", "RowKey": "r"}).status_code == 201
    n = 24

    def merge(i):
        node = (a, b)[i % 2]
        for _ in range(20):  # a 503 ServerBusy under contention is the client's to retry
            r = node.raw.request("MERGE", entity_path(shared_table, "m", "r"), json={f"P{i}": i}, headers={"If-Match": "*"})
            if r.status_code != 503:
                return r.status_code
        return r.status_code

    with ThreadPoolExecutor(n) as pool:
        statuses = list(pool.map(merge, range(n)))
    assert statuses == [204] * n, statuses
    for node in (a, b):
        e = node.raw.get_entity(shared_table, "m", "r").json()
        assert {k: v for k, v in e.items() if k.startswith("P") and k != "PartitionKey"} == {f"P{i}": i for i in range(n)}


def test_table_deleted_on_one_node_is_gone_on_the_other(nodes):
    a, b = nodes
    name = unique_table_name("del")
    assert a.raw.create_table(name).status_code == 201
    assert b.raw.insert(name, {"PartitionKey": "p", "RowKey": "r"}).status_code == 201
    assert a.raw.delete_table(name).status_code == 204
    assert_error(b.raw.get_entity(name, "p", "r"), 404, "TableNotFound")
    assert_error(b.raw.insert(name, {"PartitionKey": "p", "RowKey": "x"}), 404, "TableNotFound")
    assert name not in [t["TableName"] for t in b.raw.get("/Tables").json()["value"]]
    # Re-created through B, it starts empty on A.
    assert b.raw.create_table(name).status_code == 201
    assert a.raw.query_all(name) == []


def test_batch_on_one_node_is_atomic_as_seen_from_the_other(nodes, shared_table):
    from azure.data.tables import TableClient, TableTransactionError

    a, b = nodes
    seen_partial = []
    stop = threading.Event()
    size = 20

    def watch():
        while not stop.is_set():
            for i in range(10):
                rows = b.raw.query_all(shared_table, {"$filter": f"PartitionKey eq 'b{i}'"})
                if len(rows) not in (0, size):
                    seen_partial.append((i, len(rows)))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with TableClient.from_connection_string(a.conn_str, shared_table) as client:
            for i in range(10):
                ops = [("create", {"PartitionKey": f"b{i}", "RowKey": f"{j:03d}", "J": j}) for j in range(size)]
                client.submit_transaction(ops)
            # A batch whose last operation fails leaves nothing behind, on either node.
            ops = [("create", {"PartitionKey": "b0", "RowKey": f"x{j:03d}"}) for j in range(size - 1)]
            ops.append(("create", {"PartitionKey": "b0", "RowKey": "000"}))
            with pytest.raises(TableTransactionError):
                client.submit_transaction(ops)
    finally:
        stop.set()
        watcher.join(30)
    assert not seen_partial, seen_partial
    for i in range(10):
        assert len(b.raw.query_all(shared_table, {"$filter": f"PartitionKey eq 'b{i}'"})) == size
