"""Entity group transactions (batch.md) through the SDK's submit_transaction."""

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.data.tables import TableClient, TableTransactionError, UpdateMode

from conftest import bulk_insert, sdk_error_code, unique_table_name


@pytest.fixture(params=["127.0.0.1", "localhost"])
def btable(request, server):
    name = unique_table_name("batch")
    with TableClient.from_connection_string(server.conn_str_for(request.param), table_name=name) as client:
        client.create_table()
        yield client
        client.delete_table()


def rows(client):
    return {e["RowKey"]: dict(e) for e in client.list_entities()}


def test_mixed_transaction(btable):
    btable.create_entity({"PartitionKey": "p", "RowKey": "upd", "A": 1, "B": 1})
    btable.create_entity({"PartitionKey": "p", "RowKey": "mrg", "A": 1, "B": 1})
    btable.create_entity({"PartitionKey": "p", "RowKey": "del", "A": 1})
    etag = btable.get_entity("p", "upd").metadata["etag"]
    ops = [
        ("create", {"PartitionKey": "p", "RowKey": "new", "V": 1}),
        (
            "update",
            {"PartitionKey": "p", "RowKey": "upd", "A": 2},
            {"mode": UpdateMode.REPLACE, "etag": etag, "match_condition": MatchConditions.IfNotModified},
        ),
        ("update", {"PartitionKey": "p", "RowKey": "mrg", "A": 2}, {"mode": UpdateMode.MERGE}),
        ("upsert", {"PartitionKey": "p", "RowKey": "ups1", "V": 3}, {"mode": UpdateMode.MERGE}),
        ("upsert", {"PartitionKey": "p", "RowKey": "ups2", "V": 4}, {"mode": UpdateMode.REPLACE}),
        ("delete", {"PartitionKey": "p", "RowKey": "del"}),
    ]
    results = btable.submit_transaction(ops)
    assert len(results) == len(ops)
    for r in results[:5]:
        assert r["etag"].startswith('W/"datetime\'')
    # Every entity written by one batch gets the same Timestamp/ETag.
    assert len({r["etag"] for r in results[:5]}) == 1
    got = rows(btable)
    assert set(got) == {"new", "upd", "mrg", "ups1", "ups2"}
    assert got["new"]["V"] == 1
    assert got["upd"]["A"] == 2 and "B" not in got["upd"]
    assert got["mrg"]["A"] == 2 and got["mrg"]["B"] == 1
    assert got["ups1"]["V"] == 3 and got["ups2"]["V"] == 4
    assert btable.get_entity("p", "new").metadata["etag"] == results[0]["etag"]


def test_transaction_new_rows_between_existing_rows(btable):
    # New rows are stored as sorted runs between the rows already there: in runs
    # of several, then alternating with existing rows, sent in descending order,
    # beside merges of existing rows in the same changeset.
    existing = [i for i in range(60) if i % 10 == 0 or (i >= 30 and i % 2 == 0)]
    btable.submit_transaction(
        [("create", {"PartitionKey": "p", "RowKey": f"r{i:03d}", "V": i, "Round": 1}) for i in existing]
    )
    new = [i for i in reversed(range(60)) if i not in existing]
    ops = [("create", {"PartitionKey": "p", "RowKey": f"r{i:03d}", "V": i, "Round": 2}) for i in new]
    merged = (0, 20, 40)
    ops += [
        ("upsert", {"PartitionKey": "p", "RowKey": f"r{i:03d}", "Round": 2}, {"mode": UpdateMode.MERGE})
        for i in merged
    ]
    assert len(btable.submit_transaction(ops)) == len(ops)
    got = rows(btable)
    assert list(got) == [f"r{i:03d}" for i in range(60)]
    for i in range(60):
        row = got[f"r{i:03d}"]
        assert row["V"] == i
        assert row["Round"] == (2 if i not in existing or i in merged else 1), i


def test_transaction_is_atomic(btable):
    btable.create_entity({"PartitionKey": "p", "RowKey": "exists", "V": 0})
    btable.create_entity({"PartitionKey": "p", "RowKey": "keep", "V": 0})
    ops = [
        ("create", {"PartitionKey": "p", "RowKey": "a", "V": 1}),
        ("update", {"PartitionKey": "p", "RowKey": "keep", "V": 1}, {"mode": UpdateMode.MERGE}),
        ("create", {"PartitionKey": "p", "RowKey": "exists", "V": 1}),  # 409
        ("create", {"PartitionKey": "p", "RowKey": "b", "V": 1}),
    ]
    with pytest.raises(TableTransactionError) as ei:
        btable.submit_transaction(ops)
    assert ei.value.index == 2
    assert sdk_error_code(ei.value) == "EntityAlreadyExists"
    assert ei.value.status_code == 409
    got = rows(btable)
    assert set(got) == {"exists", "keep"}
    assert got["keep"]["V"] == 0 and got["exists"]["V"] == 0


def test_transaction_condition_failure(btable):
    old = btable.create_entity({"PartitionKey": "p", "RowKey": "c", "V": 0})["etag"]
    btable.update_entity({"PartitionKey": "p", "RowKey": "c", "V": 1})
    ops = [
        ("create", {"PartitionKey": "p", "RowKey": "x"}),
        ("delete", {"PartitionKey": "p", "RowKey": "c"}, {"etag": old, "match_condition": MatchConditions.IfNotModified}),
    ]
    with pytest.raises(TableTransactionError) as ei:
        btable.submit_transaction(ops)
    assert ei.value.index == 1
    assert sdk_error_code(ei.value) == "UpdateConditionNotSatisfied"
    assert set(rows(btable)) == {"c"}


def test_transaction_missing_entity(btable):
    ops = [
        ("create", {"PartitionKey": "p", "RowKey": "x"}),
        ("update", {"PartitionKey": "p", "RowKey": "nope", "V": 1}, {"mode": UpdateMode.REPLACE}),
    ]
    with pytest.raises(TableTransactionError) as ei:
        btable.submit_transaction(ops)
    assert ei.value.index == 1
    assert sdk_error_code(ei.value) == "ResourceNotFound"
    assert rows(btable) == {}


def test_transaction_100_ops_ok_101_rejected(btable):
    ops = [("create", {"PartitionKey": "p", "RowKey": f"{i:03d}"}) for i in range(100)]
    assert len(btable.submit_transaction(ops)) == 100
    assert len(rows(btable)) == 100
    ops = [("create", {"PartitionKey": "q", "RowKey": f"{i:03d}"}) for i in range(101)]
    with pytest.raises(HttpResponseError) as ei:
        btable.submit_transaction(ops)
    assert sdk_error_code(ei.value) == "InvalidInput"
    assert len(rows(btable)) == 100


def test_transaction_duplicate_row(btable):
    ops = [
        ("create", {"PartitionKey": "p", "RowKey": "same"}),
        ("upsert", {"PartitionKey": "p", "RowKey": "same", "V": 1}),
    ]
    with pytest.raises(HttpResponseError) as ei:
        btable.submit_transaction(ops)
    assert sdk_error_code(ei.value) == "InvalidDuplicateRow"
    assert rows(btable) == {}


def test_transaction_missing_table(server):
    name = unique_table_name("nobatch")
    with TableClient.from_connection_string(server.conn_str, table_name=name) as client:
        with pytest.raises((TableTransactionError, ResourceNotFoundError)) as ei:
            client.submit_transaction([("create", {"PartitionKey": "p", "RowKey": "r"})])
        assert sdk_error_code(ei.value) == "TableNotFound"


def test_transaction_different_partitions_raw(raw, raw_table):
    """The SDK refuses mixed partitions client-side, so send the batch by hand."""
    base = f"http://127.0.0.1:{raw.server.port}/devstoreaccount1/{raw_table}"
    parts = []
    for pk in ("a", "b"):
        parts.append(
            "--changeset_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
            f"POST {base} HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json;odata=minimalmetadata\r\n"
            "Prefer: return-no-content\r\nDataServiceVersion: 3.0;\r\n\r\n"
            f'{{"PartitionKey":"{pk}","RowKey":"r"}}\r\n'
        )
    body = (
        "--batch_1\r\nContent-Type: multipart/mixed; boundary=changeset_1\r\n\r\n"
        + "".join(parts)
        + "--changeset_1--\r\n\r\n--batch_1--\r\n"
    )
    r = raw.post("/$batch", body=body, content_type="multipart/mixed; boundary=batch_1")
    assert r.status_code in (202, 400), (r.status_code, r.text)
    assert "CommandsInBatchActOnDifferentPartitions" in r.text or r.headers.get("x-ms-error-code") in (
        "CommandsInBatchActOnDifferentPartitions",
        "InvalidInput",
    ), r.text
    q = raw.get(f"/{raw_table}()")
    assert q.json()["value"] == []


def test_batch_raw_lf_line_endings_and_relative_urls(raw, raw_table):
    """Bare-LF bodies and paths without host (clients.md) are accepted."""
    body = (
        "--batch_x\n"
        "Content-Type: multipart/mixed; boundary=changeset_y\n\n"
        "--changeset_y\n"
        "Content-Type: application/http\n"
        "Content-Transfer-Encoding: binary\n\n"
        f"POST /devstoreaccount1/{raw_table} HTTP/1.1\n"
        "Content-Type: application/json\n"
        "Accept: application/json;odata=nometadata\n\n"
        '{"PartitionKey":"p","RowKey":"1","V":1}\n'
        "--changeset_y\n"
        "Content-Type: application/http\n"
        "Content-Transfer-Encoding: binary\n\n"
        f"MERGE /{raw_table}(PartitionKey='p',RowKey='2') HTTP/1.1\n"
        "Content-Type: application/json\n\n"
        '{"V":2}\n'
        "--changeset_y--\n"
        "--batch_x--\n"
    )
    r = raw.post("/$batch", body=body, content_type="multipart/mixed; boundary=batch_x")
    assert r.status_code == 202, (r.status_code, r.text)
    assert r.headers["Content-Type"].startswith("multipart/mixed")
    assert "HTTP/1.1 201" in r.text and "HTTP/1.1 204" in r.text, r.text
    # The insert without `Prefer: return-no-content` echoes the whole entity.
    assert '"PartitionKey":"p","RowKey":"1"' in r.text and '"V":1' in r.text, r.text
    got = {e["RowKey"]: e["V"] for e in raw.query_all(raw_table)}
    assert got == {"1": 1, "2": 2}


def test_bulk_then_batch_delete(raw, btable):
    bulk_insert(raw, btable.table_name, [{"PartitionKey": "p", "RowKey": f"{i:02d}"} for i in range(50)], threads=4)
    btable.submit_transaction([("delete", {"PartitionKey": "p", "RowKey": f"{i:02d}"}) for i in range(0, 50, 2)])
    assert sorted(rows(btable)) == [f"{i:02d}" for i in range(1, 50, 2)]
