"""Cosmos DB for Table behaviour (docs/cosmos.md), through the SDK and plain HTTP: chosen per
request by a Cosmos host name, or for the whole server by --cosmos, where a connection string
written for the Cosmos emulator works unchanged. Table Storage's answers stay as they were."""

import uuid
from datetime import datetime, timezone

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableCorsRule, TableServiceClient, UpdateMode

from conftest import TafelServer, unique_table_name
from rawhttp import ACCOUNT

EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="


@pytest.fixture(scope="module")
def cosmos_server(_workdir):
    name = uuid.uuid4().hex[:8]
    srv = TafelServer(_workdir / f"data-cosmos-{name}", _workdir / f"tafel-cosmos-{name}.log", extra_args=["--cosmos"])
    srv.start()
    yield srv
    srv.kill9()


def emulator_conn_str(port: int) -> str:
    # The Cosmos emulator's documented connection string, but for the port.
    return (
        f"DefaultEndpointsProtocol=http;AccountName=localhost;AccountKey={EMULATOR_KEY};"
        f"TableEndpoint=http://localhost:{port}/;"
    )


def cosmos_host(port: int) -> dict:
    return {"Host": f"{ACCOUNT}.table.cosmos.azure.com:{port}"}


def test_emulator_connection_string_works_unchanged_with_cosmos_flag(cosmos_server):
    svc = TableServiceClient.from_connection_string(emulator_conn_str(cosmos_server.port))
    for name in ("my_table", "啊齄丂狛狜", "x"):
        tc = svc.create_table(name)
        assert tc.table_name == name
        tc.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})
        assert tc.get_entity("p", "r")["v"] == 1
        assert name in [t.name for t in svc.list_tables()]
        svc.delete_table(name)
    assert "my_table" not in [t.name for t in svc.list_tables()]


def test_cosmos_flag_keeps_the_path_style_accounts(cosmos_server):
    table = unique_table_name("cos")
    r = cosmos_server.raw.create_table(table)
    assert r.status_code == 201, r.text
    # Answered as Cosmos: a name Table Storage refuses is a table.
    r = cosmos_server.raw.create_table("under_score")
    assert r.status_code == 201, r.text


def test_cosmos_host_name_accepts_cosmos_table_names(server):
    port = server.port
    r = server.raw.request("POST", "/Tables", json={"TableName": "my_table"}, host_style=True, headers=cosmos_host(port))
    assert r.status_code == 201, r.text
    # The Location header holds the name escaped: a Unicode name is no header text.
    r = server.raw.request("POST", "/Tables", json={"TableName": "表格"}, host_style=True, headers=cosmos_host(port))
    assert r.status_code == 201, r.text
    assert r.headers["Location"].endswith("/Tables('%E8%A1%A8%E6%A0%BC')")
    r = server.raw.request("DELETE", "/Tables('my_table')", host_style=True, headers=cosmos_host(port))
    assert r.status_code == 204, r.text


def test_storage_host_still_refuses_cosmos_table_names(server):
    r = server.raw.create_table("my_table")
    assert r.status_code == 400
    assert r.json()["odata.error"]["code"] == "InvalidResourceName"


@pytest.mark.parametrize(
    "name, status, code, message",
    [
        ("a#b", 500, "InternalServerError", "The resource name presented contains invalid character '#'."),
        ("ends ", 500, "InternalServerError", "The resource name can't end with space."),
        ("a" * 255, 400, "BadRequest", "The input name is invalid."),
    ],
)
def test_cosmos_bad_table_names_answered_with_cosmos_codes(server, name, status, code, message):
    r = server.raw.request("POST", "/Tables", json={"TableName": name}, host_style=True, headers=cosmos_host(server.port))
    assert r.status_code == status, r.text
    assert r.headers["x-ms-error-code"] == code
    assert r.json()["odata.error"]["message"]["value"].startswith(message)


def test_cosmos_bad_table_names_raise_the_sdks_naming_error(cosmos_server):
    svc = TableServiceClient.from_connection_string(emulator_conn_str(cosmos_server.port))
    with pytest.raises(ValueError, match="Cosmos table names must contain from 1-255 characters"):
        svc.create_table("a?b")
    with pytest.raises(ValueError, match="Cosmos table names must contain from 1-255 characters"):
        svc.get_table_client("a#b").create_entity({"PartitionKey": "p", "RowKey": "r"})


def test_cosmos_account_url_ending_in_a_table_name_is_an_invalid_url(server):
    table = unique_table_name("cos")
    r = server.raw.request("POST", f"/{table}/Tables", json={"TableName": table}, host_style=True,
                           headers=cosmos_host(server.port))
    assert r.status_code == 400, r.text
    assert r.json()["odata.error"]["code"] == "InvalidInput"
    assert r.json()["odata.error"]["message"]["value"].startswith("Request url is invalid.")


def test_cosmos_throttles_with_429_and_retry_after_ms(_workdir):
    name = uuid.uuid4().hex[:8]
    srv = TafelServer(_workdir / f"data-cosl-{name}", _workdir / f"tafel-cosl-{name}.log",
                      extra_args=["--cosmos", "--azure-limits", "--partition-limit", "5"])
    srv.start()
    try:
        table = unique_table_name("cosl")
        assert srv.raw.create_table(table).status_code == 201
        statuses = []
        for i in range(40):
            r = srv.raw.insert(table, {"PartitionKey": "p", "RowKey": str(i)})
            statuses.append(r.status_code)
            if r.status_code == 429:
                assert r.headers["x-ms-error-code"] == "TooManyRequests"
                assert int(r.headers["x-ms-retry-after-ms"]) > 0
                break
        assert 429 in statuses and 503 not in statuses, statuses
    finally:
        srv.kill9()


TYPED_KEYS = {
    "PartitionKey@odata.type": "Edm.DateTime",
    "PartitionKey": "2022-04-01T09:30:45.000000Z",
    "RowKey@odata.type": "Edm.Guid",
    "RowKey": "f2cfd085-aa1a-419a-830d-5b6446b6bc59",
    "Data": True,
}
TYPED_KEYS_PATH = "(PartitionKey='2022-04-01T09%3A30%3A45.000000Z',RowKey='f2cfd085-aa1a-419a-830d-5b6446b6bc59')"


@pytest.mark.parametrize("method, if_match", [("PUT", None), ("MERGE", None), ("PUT", "*"), ("MERGE", "*")])
def test_cosmos_refuses_typed_keys_in_update_and_upsert_bodies(server, method, if_match):
    # Azure's recorded answer (test_encoder_upsert_entity_complex_keys, Cosmos): 400 InvalidInput.
    port = server.port
    table = unique_table_name("cosk")
    r = server.raw.request("POST", "/Tables", json={"TableName": table}, host_style=True, headers=cosmos_host(port))
    assert r.status_code == 201, r.text
    headers = dict(cosmos_host(port), **({"If-Match": if_match} if if_match else {}))
    r = server.raw.request(method, f"/{table}{TYPED_KEYS_PATH}", json=TYPED_KEYS, host_style=True, headers=headers)
    assert r.status_code == 400, r.text
    assert r.headers["x-ms-error-code"] == "InvalidInput"
    assert r.json()["odata.error"]["message"]["value"].startswith("One of the input values is invalid.")
    # Table Storage takes the same write to the same table, the URL's keys deciding.
    r = server.raw.request("PUT", f"/{table}{TYPED_KEYS_PATH}", json=TYPED_KEYS)
    assert r.status_code == 204, r.text


def test_cosmos_sdk_upsert_with_datetime_and_guid_keys_is_invalid_input(cosmos_server):
    svc = TableServiceClient.from_connection_string(emulator_conn_str(cosmos_server.port))
    tc = svc.create_table(unique_table_name("cosk"))
    entity = {"PartitionKey": datetime(2022, 4, 1, 9, 30, 45, tzinfo=timezone.utc), "RowKey": uuid.uuid4(), "Data": 1}
    for mode in (UpdateMode.MERGE, UpdateMode.REPLACE):
        with pytest.raises(HttpResponseError) as err:
            tc.upsert_entity(entity, mode=mode)
        assert err.value.error_code == "InvalidInput"
    # Plain string keys are taken as ever.
    tc.upsert_entity({"PartitionKey": "p", "RowKey": "r", "Data": 1})
    assert tc.get_entity("p", "r")["Data"] == 1


def test_cosmos_keeps_the_first_etag_property_in_any_case(cosmos_server, server):
    # Azure's recorded answer (test_etag_duplicate_field, Cosmos): `etag` kept, `Etag` dropped;
    # other names equal but for case (`Birthday`, `birthday`) are both kept.
    svc = TableServiceClient.from_connection_string(emulator_conn_str(cosmos_server.port))
    tc = svc.create_table(unique_table_name("cose"))
    tc.create_entity({"PartitionKey": "p", "RowKey": "r", "etag": "bar", "Etag": "baz", "Birthday": 1, "birthday": 2})
    got = tc.get_entity("p", "r")
    assert got["etag"] == "bar" and "Etag" not in got
    assert got["Birthday"] == 1 and got["birthday"] == 2
    got["etag"], got["Etag"] = "two", "three"
    tc.update_entity(got)
    got = tc.get_entity("p", "r")
    assert got["etag"] == "two" and "Etag" not in got
    # Table Storage keeps both.
    table = unique_table_name("cose")
    assert server.raw.create_table(table).status_code == 201
    r = server.raw.insert(table, {"PartitionKey": "p", "RowKey": "r", "etag": "bar", "Etag": "baz"})
    assert r.status_code in (201, 204), r.text
    got = server.raw.get_entity(table, "p", "r").json()
    assert got["etag"] == "bar" and got["Etag"] == "baz"


def test_cosmos_error_body_is_cosmos_json_with_activity_id(server):
    table = unique_table_name("cosx")
    r = server.raw.request("GET", f"/{table}(PartitionKey='p',RowKey='r')", host_style=True,
                           headers=cosmos_host(server.port))
    assert r.status_code == 404, r.text
    assert r.headers["Content-Type"] == "application/json; odata=fullmetadata"
    message = r.json()["odata.error"]["message"]
    assert message["lang"] == "en-us"
    request_id = r.headers["x-ms-request-id"]
    assert f"\r\nActivityId: {request_id}, tafel/" in message["value"]
    assert message["value"].endswith(f"\nRequestID:{request_id}\n")
    # Table Storage's form is unchanged.
    r = server.raw.get_entity(table, "p", "r")
    assert r.status_code == 404
    assert r.json()["odata.error"]["message"]["lang"] == "en-US"


@pytest.mark.parametrize(
    "method, comp, body, status, code",
    [
        ("PUT", "properties", "<?xml version='1.0' encoding='utf-8'?>\n<StorageServiceProperties><Cors /></StorageServiceProperties>",
         405, "MethodNotAllowed"),
        ("GET", "stats", None, 501, "NotImplemented"),
    ],
)
def test_cosmos_refuses_service_properties_and_stats(server, method, comp, body, status, code):
    # Azure's recorded Cosmos answers (test_too_many_cors_rules, test_table_service_stats_f): JSON, even to XML.
    r = server.raw.request(method, "/", query={"restype": "service", "comp": comp}, body=body,
                           content_type="application/xml" if body else None, accept="application/xml",
                           host_style=True, headers=cosmos_host(server.port))
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"] == "application/json; odata=fullmetadata"
    err = r.json()["odata.error"]
    assert err["code"] == code
    assert err["message"]["value"].startswith("The requested operation is not supported.\r\nActivityId: ")


def test_cosmos_sdk_set_service_properties_fails(cosmos_server):
    svc = TableServiceClient.from_connection_string(emulator_conn_str(cosmos_server.port))
    with pytest.raises(HttpResponseError) as err:
        svc.set_service_properties(cors=[TableCorsRule(["www.xyz.com"], ["GET"])])
    assert err.value.status_code == 405


def _big_entity(rk: str, properties: int) -> dict:
    # Strings count two bytes a character toward the limit: each property ~64 KB.
    return {"PartitionKey": "p", "RowKey": rk, **{f"s{i}": "x" * 32000 for i in range(properties)}}


def test_cosmos_takes_entities_up_to_2mb(server):
    port = server.port
    table = unique_table_name("cosb")
    r = server.raw.request("POST", "/Tables", json={"TableName": table}, host_style=True, headers=cosmos_host(port))
    assert r.status_code == 201, r.text
    # ~1.9 MB: over Table Storage's 1 MiB, within Cosmos's 2 MB.
    r = server.raw.request("POST", f"/{table}", json=_big_entity("a", 30), host_style=True,
                           headers=dict(cosmos_host(port), Prefer="return-no-content"))
    assert r.status_code == 204, r.text
    r = server.raw.request("GET", f"/{table}(PartitionKey='p',RowKey='a')", host_style=True, headers=cosmos_host(port))
    assert r.status_code == 200 and len(r.json()["s29"]) == 32000
    # ~2.2 MB is over Cosmos's limit too.
    r = server.raw.request("POST", f"/{table}", json=_big_entity("b", 34), host_style=True, headers=cosmos_host(port))
    assert r.status_code == 400, r.text
    assert r.json()["odata.error"]["code"] == "EntityTooLarge"
    assert r.json()["odata.error"]["message"]["value"].startswith(
        "The entity is larger than the maximum allowed size (2MB).")
    # Table Storage keeps its 1 MiB, on the same table.
    r = server.raw.insert(table, _big_entity("c", 30))
    assert r.status_code == 400, r.text
    assert r.json()["odata.error"]["code"] == "EntityTooLarge"
    assert r.json()["odata.error"]["message"]["value"].startswith(
        "The entity is larger than the maximum allowed size (1MB).")
