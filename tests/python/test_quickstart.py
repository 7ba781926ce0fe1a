"""The azure-data-tables quickstart, unchanged, against Tafel.

Runs twice: with the endpoint host ``127.0.0.1`` (the SDK sends merges as ``PATCH``) and
with ``localhost`` on a non-10002 port (the SDK takes it for Cosmos and sends merges as
``POST`` + ``X-HTTP-Method: MERGE``, clients.md). The test checks which form was really sent.
"""

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient, UpdateMode

from conftest import sdk_error_code, unique_table_name

MERGE_FORMS = {
    "127.0.0.1": ("PATCH", None),
    "localhost": ("POST", "MERGE"),
}


@pytest.fixture(params=sorted(MERGE_FORMS))
def host(request):
    return request.param


class Recorder:
    """raw_response_hook collecting (method, X-HTTP-Method, status) of every request."""

    def __init__(self):
        self.sent = []

    def __call__(self, response):
        req = response.http_request
        self.sent.append((req.method, req.headers.get("X-HTTP-Method"), response.http_response.status_code))


def test_quickstart(server, host):
    rec = Recorder()
    conn_str = server.conn_str_for(host)
    table_name = unique_table_name("quick")
    with TableServiceClient.from_connection_string(conn_str, raw_response_hook=rec) as service:
        try:
            _quickstart(service, table_name, host, rec)
        finally:
            service.delete_table(table_name)  # no error if already gone


def _quickstart(service, table_name, host, rec):
    table_client = service.create_table(table_name)
    assert table_client.table_name == table_name

    # Create
    entity = {
        "PartitionKey": "color",
        "RowKey": "brand",
        "text": "Marker",
        "color": "Purple",
        "price": 4.99,
        "count": 7,
    }
    meta = table_client.create_entity(entity=entity)
    assert meta["etag"].startswith('W/"datetime\'')

    # Get
    got = table_client.get_entity(partition_key="color", row_key="brand")
    assert got["text"] == "Marker"
    assert got["color"] == "Purple"
    assert got["price"] == 4.99
    assert got["count"] == 7
    assert got.metadata["etag"] == meta["etag"]
    assert got.metadata["timestamp"] is not None

    # Update (replace): properties not sent are removed.
    replaced = {"PartitionKey": "color", "RowKey": "brand", "text": "New Marker"}
    table_client.update_entity(mode=UpdateMode.REPLACE, entity=replaced)
    got = table_client.get_entity("color", "brand")
    assert got["text"] == "New Marker"
    assert "color" not in got and "price" not in got and "count" not in got

    # Merge (update_entity mode=MERGE): existing properties kept.
    n_before = len(rec.sent)
    table_client.update_entity(
        mode=UpdateMode.MERGE,
        entity={"PartitionKey": "color", "RowKey": "brand", "price": 7.99},
        etag=got.metadata["etag"],
        match_condition=MatchConditions.IfNotModified,
    )
    method, xmethod, status = rec.sent[n_before]
    assert (method, xmethod) == MERGE_FORMS[host]
    assert status == 204
    got = table_client.get_entity("color", "brand")
    assert got["text"] == "New Marker"
    assert got["price"] == 7.99

    # Upsert MERGE into an existing entity, then into a missing one (insert).
    n_before = len(rec.sent)
    table_client.upsert_entity(
        mode=UpdateMode.MERGE, entity={"PartitionKey": "color", "RowKey": "brand", "size": "L"}
    )
    assert rec.sent[n_before][:2] == MERGE_FORMS[host]
    got = table_client.get_entity("color", "brand")
    assert (got["text"], got["price"], got["size"]) == ("New Marker", 7.99, "L")
    table_client.upsert_entity(
        mode=UpdateMode.MERGE, entity={"PartitionKey": "color", "RowKey": "merged-new", "v": 1}
    )
    assert table_client.get_entity("color", "merged-new")["v"] == 1

    # Upsert REPLACE into an existing entity, then into a missing one.
    table_client.upsert_entity(
        mode=UpdateMode.REPLACE, entity={"PartitionKey": "color", "RowKey": "brand", "only": True}
    )
    got = table_client.get_entity("color", "brand")
    assert got["only"] is True
    assert "text" not in got and "price" not in got and "size" not in got
    table_client.upsert_entity(
        mode=UpdateMode.REPLACE, entity={"PartitionKey": "color", "RowKey": "replaced-new", "v": 2}
    )
    assert table_client.get_entity("color", "replaced-new")["v"] == 2

    # Query with a filter and parameters.
    table_client.create_entity({"PartitionKey": "color", "RowKey": "cheap", "price": 1.5})
    table_client.create_entity({"PartitionKey": "color", "RowKey": "dear", "price": 99.0})
    found = list(
        table_client.query_entities("price lt @limit", parameters={"limit": 10.0})
    )
    assert [e["RowKey"] for e in found] == ["cheap"]
    listed = list(table_client.list_entities())
    assert [e["RowKey"] for e in listed] == ["brand", "cheap", "dear", "merged-new", "replaced-new"]

    # Delete entity
    table_client.delete_entity(partition_key="color", row_key="brand")
    with pytest.raises(ResourceNotFoundError) as ei:
        table_client.get_entity("color", "brand")
    assert sdk_error_code(ei.value) == "ResourceNotFound"
    assert ei.value.status_code == 404

    # List tables (plain, and with a filter on the exact name)
    names = [t.name for t in service.list_tables()]
    assert table_name in names
    queried = [t.name for t in service.query_tables("TableName eq @name", parameters={"name": table_name})]
    assert queried == [table_name]

    # Delete table: its entities go with it.
    service.delete_table(table_name)
    assert table_name not in [t.name for t in service.list_tables()]
    with pytest.raises(ResourceNotFoundError) as ei:
        table_client.get_entity("color", "cheap")
    assert sdk_error_code(ei.value) == "TableNotFound"

    # Re-creating the table gives an empty table.
    again = service.create_table(table_name)
    assert list(again.list_entities()) == []
    service.delete_table(table_name)


def test_create_table_if_not_exists(service, table_name):
    client = service.create_table_if_not_exists(table_name)
    client.create_entity({"PartitionKey": "p", "RowKey": "r"})
    # Second call must not fail and must not wipe the table.
    client2 = service.create_table_if_not_exists(table_name)
    assert client2.table_name == table_name
    assert [e["RowKey"] for e in client2.list_entities()] == ["r"]
    with pytest.raises(ResourceExistsError) as ei:
        service.create_table(table_name)
    assert sdk_error_code(ei.value) == "TableAlreadyExists"
    assert ei.value.status_code == 409
    service.delete_table(table_name)


def test_table_client_from_connection_string(server, table_name):
    with TableClient.from_connection_string(server.conn_str, table_name=table_name) as client:
        created = client.create_table()
        assert created.name == table_name
        client.create_entity({"PartitionKey": "pk", "RowKey": "rk", "Value": "x"})
        assert client.get_entity("pk", "rk")["Value"] == "x"
        with pytest.raises(ResourceExistsError) as ei:
            client.create_table()
        assert sdk_error_code(ei.value) == "TableAlreadyExists"
        client.delete_table()
        # TableClient.delete_table swallows 404 by design; the table must really be gone.
        with pytest.raises(ResourceNotFoundError) as ei:
            client.get_entity("pk", "rk")
        assert sdk_error_code(ei.value) == "TableNotFound"


def test_list_tables_paged_and_prefix(server):
    prefix = unique_table_name("pfx")[:12]
    names = [f"{prefix}{c}{i}" for i, c in enumerate("edcba")]
    with TableServiceClient.from_connection_string(server.conn_str) as service:
        for n in names:
            service.create_table(n)
        try:
            # The SDK's prefix idiom: TableName ge 'p' and TableName lt 'p{'.
            flt = "TableName ge @lo and TableName lt @hi"
            params = {"lo": prefix, "hi": prefix + "{"}
            found = [t.name for t in service.query_tables(flt, parameters=params)]
            assert found == sorted(names)
            pages = list(service.query_tables(flt, parameters=params, results_per_page=2).by_page())
            page_names = [[t.name for t in p] for p in pages]
            assert all(len(p) <= 2 for p in page_names), page_names
            assert len(page_names) >= 3, page_names
            assert sum(page_names, []) == sorted(names)
        finally:
            for n in names:
                service.delete_table(n)
