"""The quickstart a new user follows: tables and entities, through the connection string."""

import pytest
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, TableServiceClient

from conftest import CONN, RUN, URL, code_of, key_credential


def test_create_insert_get_query_delete(service, table):
    table.create_entity({"PartitionKey": "people", "RowKey": "1", "Name": "Ada", "Age": 36})
    table.create_entity({"PartitionKey": "people", "RowKey": "2", "Name": "Alan", "Age": 41})
    got = table.get_entity("people", "1")
    assert (got["Name"], got["Age"]) == ("Ada", 36)
    assert got.metadata["etag"].startswith('W/"datetime')
    rows = list(table.query_entities("PartitionKey eq 'people' and Age gt 38"))
    assert [r["Name"] for r in rows] == ["Alan"]
    table.delete_entity("people", "1")
    with pytest.raises(ResourceNotFoundError) as err:
        table.get_entity("people", "1")
    assert code_of(err.value) == "ResourceNotFound"


def test_a_second_insert_of_the_same_keys_is_409_entity_already_exists(table):
    table.create_entity({"PartitionKey": "p", "RowKey": "r"})
    with pytest.raises(ResourceExistsError) as err:
        table.create_entity({"PartitionKey": "p", "RowKey": "r"})
    assert err.value.status_code == 409
    assert code_of(err.value) == "EntityAlreadyExists"


def test_tables_are_listed_filtered_and_deleted(service):
    names = [f"pyq{RUN}a", f"pyq{RUN}b"]
    for n in names:
        service.create_table(n)
    with pytest.raises(ResourceExistsError) as err:
        service.create_table(names[0])
    assert code_of(err.value) == "TableAlreadyExists"
    listed = [t.name for t in service.query_tables(f"TableName ge 'pyq{RUN}' and TableName lt 'pyq{RUN}~'")]
    assert listed == names
    client = TableClient.from_connection_string(CONN, names[0])
    client.delete_table()
    service.delete_table(names[1])
    assert [t.name for t in service.query_tables(f"TableName ge 'pyq{RUN}' and TableName lt 'pyq{RUN}~'")] == []
    with pytest.raises(ResourceNotFoundError):
        TableClient.from_connection_string(CONN, names[0]).create_entity({"PartitionKey": "p", "RowKey": "r"})


def test_the_endpoint_and_a_key_credential_work_like_the_connection_string(table):
    by_key = TableServiceClient(endpoint=URL, credential=key_credential()).get_table_client(table.table_name)
    by_key.create_entity({"PartitionKey": "k", "RowKey": "1", "V": "by key"})
    assert table.get_entity("k", "1")["V"] == "by key"


def test_service_properties_round_trip(service):
    props = service.get_service_properties()
    assert "cors" in props
    service.set_service_properties(cors=props["cors"])
