"""Batches, paging through continuation markers, shared access signatures, table ACLs and a
wrong key, through the legacy TableService."""

from datetime import datetime

import pytest
from azure.common import AzureHttpError
from azure.cosmosdb.table.common.models import AccessPolicy, AccountPermissions, ResourceTypes
from azure.cosmosdb.table.common.retry import no_retry
from azure.cosmosdb.table.models import AzureBatchOperationError, TablePermissions
from azure.cosmosdb.table.tablebatch import TableBatch
from azure.cosmosdb.table.tableservice import TableService

from conftest import CONN, in_an_hour, refused, with_sas

N = 1205


def fill(service, table, n):
    for start in range(0, n, 100):
        batch = TableBatch()
        for i in range(start, min(start + 100, n)):
            batch.insert_entity({"PartitionKey": "p", "RowKey": f"{i:05}", "N": i})
        service.commit_batch(table, batch)


def test_a_mixed_batch_applies_every_operation(service, table):
    for rk in ("upd", "mrg", "del"):
        service.insert_entity(table, {"PartitionKey": "b", "RowKey": rk, "V": 1, "Keep": "x"})
    with service.batch(table) as batch:
        batch.insert_entity({"PartitionKey": "b", "RowKey": "new", "V": "a b+c&d"})
        batch.update_entity({"PartitionKey": "b", "RowKey": "upd", "V": 2})
        batch.merge_entity({"PartitionKey": "b", "RowKey": "mrg", "V": 2})
        batch.insert_or_merge_entity({"PartitionKey": "b", "RowKey": "ups", "V": 3})
        batch.insert_or_replace_entity({"PartitionKey": "b", "RowKey": "upr", "V": 4})
        batch.delete_entity("b", "del")
    got = {e.RowKey: e for e in service.query_entities(table)}
    assert sorted(got) == ["mrg", "new", "upd", "upr", "ups"]
    assert got["new"].V == "a b+c&d"
    assert got["upd"].V == 2 and "Keep" not in got["upd"]
    assert got["mrg"].V == 2 and got["mrg"].Keep == "x"
    assert (got["ups"].V, got["upr"].V) == (3, 4)


def test_a_failing_batch_changes_nothing(table):
    # The SDK retries any exception raised while reading a 2xx response, and a failed batch
    # is a 202 whose part says why: without no_retry it sends the batch 4 times (~60 s).
    service = TableService(connection_string=CONN)
    service.retry = no_retry
    service.insert_entity(table, {"PartitionKey": "b", "RowKey": "exists"})
    batch = TableBatch()
    batch.insert_entity({"PartitionKey": "b", "RowKey": "first"})
    batch.insert_entity({"PartitionKey": "b", "RowKey": "exists"})
    with pytest.raises(AzureBatchOperationError) as err:
        service.commit_batch(table, batch)
    assert err.value.code == "EntityAlreadyExists"
    assert err.value.status_code == 409
    assert [e.RowKey for e in service.query_entities(table)] == ["exists"]


def test_every_row_once_across_server_pages(service, table):
    fill(service, table, N)
    assert [e.N for e in service.query_entities(table)] == list(range(N))


def test_num_results_stops_with_a_marker_that_resumes(service, table):
    fill(service, table, N)
    first = service.query_entities(table, filter="N ge 5L", num_results=400)
    got = [e.N for e in first]
    assert got == list(range(5, 405))
    assert first.next_marker
    rest = service.query_entities(table, filter="N ge 5L", marker=first.next_marker)
    got += [e.N for e in rest]
    assert got == list(range(5, N))


def test_a_read_only_table_sas_reads_and_cannot_write(service, table):
    service.insert_entity(table, {"PartitionKey": "a", "RowKey": "1", "V": "a"})
    sas = service.generate_table_shared_access_signature(table, TablePermissions.QUERY, expiry=in_an_hour())
    reader = with_sas(sas)
    assert reader.get_entity(table, "a", "1").V == "a"
    assert refused(lambda: reader.insert_entity(table, {"PartitionKey": "z", "RowKey": "1"}), 403) == "AuthorizationPermissionMismatch"
    assert refused(lambda: reader.delete_entity(table, "a", "1"), 403) == "AuthorizationPermissionMismatch"


def test_a_table_sas_with_every_permission_and_a_key_range(service, table):
    perms = TablePermissions(query=True, add=True, update=True, delete=True)
    sas = service.generate_table_shared_access_signature(table, perms, expiry=in_an_hour(), start_pk="m", end_pk="n")
    writer = with_sas(sas)
    writer.insert_entity(table, {"PartitionKey": "m", "RowKey": "1"})
    writer.insert_or_merge_entity(table, {"PartitionKey": "m", "RowKey": "1", "V": 2})
    with writer.batch(table) as batch:
        batch.insert_entity({"PartitionKey": "m", "RowKey": "2"})
        batch.delete_entity("m", "1")
    assert [e.RowKey for e in writer.query_entities(table)] == ["2"]
    assert refused(lambda: writer.insert_entity(table, {"PartitionKey": "z", "RowKey": "1"}), 403) == "AuthorizationPermissionMismatch"


def test_a_sas_naming_a_stored_access_policy(service, table):
    service.insert_entity(table, {"PartitionKey": "a", "RowKey": "1"})
    service.set_table_acl(table, {"readers": AccessPolicy(permission=TablePermissions.QUERY, expiry=in_an_hour())})
    acl = service.get_table_acl(table)
    assert list(acl) == ["readers"] and acl["readers"].permission == "r"
    reader = with_sas(service.generate_table_shared_access_signature(table, id="readers"))
    assert [e.RowKey for e in reader.query_entities(table)] == ["1"]
    refused(lambda: reader.insert_entity(table, {"PartitionKey": "a", "RowKey": "2"}), 403)


def test_an_expired_sas_is_refused(service, table):
    sas = service.generate_table_shared_access_signature(table, TablePermissions.QUERY, expiry=datetime(2020, 1, 1))
    assert refused(lambda: list(with_sas(sas).query_entities(table)), 403) == "AuthenticationFailed"


def test_an_account_sas_lists_tables_and_reads_entities(service, table):
    service.insert_entity(table, {"PartitionKey": "a", "RowKey": "1"})
    sas = service.generate_account_shared_access_signature(
        ResourceTypes(service=True, container=True, object=True), AccountPermissions(read=True, list=True), in_an_hour()
    )
    reader = with_sas(sas)
    assert table in [t.name for t in reader.list_tables()]
    assert reader.exists(table)
    assert [e.RowKey for e in reader.query_entities(table)] == ["1"]
    assert refused(lambda: reader.insert_entity(table, {"PartitionKey": "a", "RowKey": "2"}), 403) == "AuthorizationPermissionMismatch"


def test_a_wrong_account_key_is_403_authentication_failed(table):
    wrong = CONN.replace(CONN.split("AccountKey=")[1].split(";")[0], "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXk=")
    bad = TableService(connection_string=wrong)
    with pytest.raises(AzureHttpError) as err:
        bad.get_entity(table, "a", "1")
    assert err.value.status_code == 403
    assert err.value.error_code == "AuthenticationFailed"
