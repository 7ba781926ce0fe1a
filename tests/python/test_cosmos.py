"""Cosmos DB for Table behaviour (docs/cosmos.md), through the SDK and plain HTTP: chosen per
request by a Cosmos host name, or for the whole server by --cosmos, where a connection string
written for the Cosmos emulator works unchanged. Table Storage's answers stay as they were."""

import uuid

import pytest
from azure.data.tables import TableServiceClient

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
