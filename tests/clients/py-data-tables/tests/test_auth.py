"""Table SAS and account SAS made by the SDK; the Shared Key the SDK signs with; a wrong key."""

from datetime import datetime, timezone

import pytest
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.data.tables import (
    AccountSasPermissions,
    ResourceTypes,
    TableClient,
    TableSasPermissions,
    TableServiceClient,
    generate_account_sas,
    generate_table_sas,
)

from conftest import ACCOUNT, BATCH_OK, URL, code_of, in_an_hour, key_credential


@pytest.fixture
def filled(table):
    for pk in "abc":
        table.create_entity({"PartitionKey": pk, "RowKey": "1", "V": pk})
    return table


def sas_client(name, sas):
    return TableClient(endpoint=URL, table_name=name, credential=AzureSasCredential(sas))


def denied(call):
    with pytest.raises(HttpResponseError) as err:
        call()
    assert err.value.status_code == 403, err.value
    return code_of(err.value)


def test_a_read_only_table_sas_reads_and_cannot_write(filled):
    sas = generate_table_sas(key_credential(), filled.table_name, permission=TableSasPermissions(read=True), expiry=in_an_hour())
    client = sas_client(filled.table_name, sas)
    assert sorted(e["V"] for e in client.list_entities()) == ["a", "b", "c"]
    assert client.get_entity("b", "1")["V"] == "b"
    assert denied(lambda: client.create_entity({"PartitionKey": "z", "RowKey": "1"})) == "AuthorizationPermissionMismatch"
    assert denied(lambda: client.delete_entity("a", "1")) == "AuthorizationPermissionMismatch"


def test_a_table_sas_with_write_permissions_writes(filled):
    perms = TableSasPermissions(read=True, add=True, update=True, delete=True)
    client = sas_client(filled.table_name, generate_table_sas(key_credential(), filled.table_name, permission=perms, expiry=in_an_hour()))
    client.create_entity({"PartitionKey": "s", "RowKey": "1", "V": 1})
    client.upsert_entity({"PartitionKey": "s", "RowKey": "1", "V": 2})
    if BATCH_OK:
        client.submit_transaction([("create", {"PartitionKey": "s", "RowKey": "2"}), ("delete", {"PartitionKey": "s", "RowKey": "1"})])
    else:
        client.create_entity({"PartitionKey": "s", "RowKey": "2"})
        client.delete_entity("s", "1")
    assert [e["RowKey"] for e in filled.query_entities("PartitionKey eq 's'")] == ["2"]


def test_a_table_sas_with_a_key_range_sees_only_that_range(filled):
    sas = generate_table_sas(
        key_credential(), filled.table_name, permission=TableSasPermissions(read=True), expiry=in_an_hour(), start_pk="b", end_pk="c"
    )
    client = sas_client(filled.table_name, sas)
    assert sorted(e["V"] for e in client.list_entities()) == ["b", "c"]
    assert denied(lambda: client.get_entity("a", "1")) == "AuthorizationPermissionMismatch"


def test_an_expired_table_sas_is_refused(filled):
    sas = generate_table_sas(
        key_credential(), filled.table_name, permission=TableSasPermissions(read=True), expiry=datetime(2020, 1, 1, tzinfo=timezone.utc)
    )
    denied(lambda: list(sas_client(filled.table_name, sas).list_entities()))


def test_an_account_sas_reaches_tables_and_entities(filled):
    types = ResourceTypes(service=True, container=True, object=True)
    sas = generate_account_sas(
        key_credential(), resource_types=types, permission=AccountSasPermissions(read=True, list=True), expiry=in_an_hour()
    )
    service = TableServiceClient(endpoint=URL, credential=AzureSasCredential(sas))
    if "c" in str(types):
        assert filled.table_name in [t.name for t in service.list_tables()]
    else:
        # azure-data-tables 12.0 drops `container` from ResourceTypes (srt=so): Azure refuses
        # a table listing under such a SAS.
        with pytest.raises(HttpResponseError) as err:
            list(service.list_tables())
        assert (err.value.status_code, code_of(err.value)) == (403, "AuthorizationResourceTypeMismatch")
    client = service.get_table_client(filled.table_name)
    assert sorted(e["V"] for e in client.list_entities()) == ["a", "b", "c"]
    assert denied(lambda: client.create_entity({"PartitionKey": "z", "RowKey": "1"})) == "AuthorizationPermissionMismatch"


def test_a_sas_in_the_endpoint_url_works_like_the_credential(filled):
    sas = generate_table_sas(key_credential(), filled.table_name, permission=TableSasPermissions(read=True), expiry=in_an_hour())
    client = TableClient.from_table_url(f"{URL}/{filled.table_name}?{sas}")
    assert client.get_entity("c", "1")["V"] == "c"


def test_a_wrong_account_key_is_403_authentication_failed(filled):
    wrong = AzureNamedKeyCredential(ACCOUNT, "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXk=")
    client = TableClient(endpoint=URL, table_name=filled.table_name, credential=wrong)
    with pytest.raises(ClientAuthenticationError) as err:
        client.get_entity("a", "1")
    assert err.value.status_code == 403
    assert code_of(err.value) == "AuthenticationFailed"
