"""Answers that an official SDK's live tests, run against Tafel, found to differ from Azure's
recorded ones (issue #48), and the SAS that gives a parameter twice (issue #43). Each test is
named for what broke; through the SDK where it shows the difference, raw HTTP for the wire."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qsl, urlencode

import pytest
import requests
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.data.tables import (
    EdmType,
    EntityProperty,
    TableAccessPolicy,
    TableAnalyticsLogging,
    TableClient,
    TableServiceClient,
    generate_table_sas,
)
from azure.data.tables._models import LocationMode  # not exported, but what the SDK's tests use

from conftest import ACCOUNT, JSON_NONE, KEY, assert_error, entity_path, sdk_error_code, unique_table_name
from test_acl_service import assert_xml_error  # the helper only, not its tests

UTC = timezone.utc
CRED = AzureNamedKeyCredential(ACCOUNT, KEY)
XML = "application/xml"
ACL = {"comp": "acl"}
PROPS = {"restype": "service", "comp": "properties"}
CHECK_URL = "Please check your account URL."


# ---------------------------------------------------------------------------
# 1. A signed identifier without a policy
# ---------------------------------------------------------------------------


def test_acl_identifier_without_a_policy_comes_back_without_an_access_policy_element(raw, table):
    body = (
        '<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers>'
        "<SignedIdentifier><Id>none</Id></SignedIdentifier>"
        "<SignedIdentifier><Id>empty</Id><AccessPolicy /></SignedIdentifier>"
        "<SignedIdentifier><Id>real</Id><AccessPolicy><Permission>r</Permission></AccessPolicy></SignedIdentifier>"
        "</SignedIdentifiers>"
    )
    r = raw.put(f"/{table.table_name}", query=ACL, body=body, content_type=XML)
    assert r.status_code == 204, r.text
    text = raw.get(f"/{table.table_name}", query=ACL, accept=XML).text
    assert "<SignedIdentifier><Id>none</Id></SignedIdentifier>" in text, text
    assert "<SignedIdentifier><Id>empty</Id></SignedIdentifier>" in text, text
    assert "<Id>real</Id><AccessPolicy><Permission>r</Permission></AccessPolicy>" in text, text
    assert "<AccessPolicy />" not in text and "<AccessPolicy/>" not in text, text
    # The SDK reads them as no policy, and sets one so from None.
    got = table.get_table_access_policy()
    assert got["none"] is None and got["empty"] is None, got
    assert got["real"].permission == "r"
    table.set_table_access_policy({"from-none": None, "from-blank": TableAccessPolicy()})
    assert table.get_table_access_policy() == {"from-none": None, "from-blank": None}


# ---------------------------------------------------------------------------
# 2. Edm.Boolean sent as a string
# ---------------------------------------------------------------------------


def test_edm_boolean_sent_as_a_string_is_stored_as_a_boolean(raw, table):
    name = table.table_name
    for rk, text, want in [("1", "False", False), ("2", "True", True), ("3", "false", False), ("4", "TRUE", True)]:
        r = raw.insert(name, {"PartitionKey": "p", "RowKey": rk, "Data": text, "Data@odata.type": "Edm.Boolean"})
        assert r.status_code == 201, (text, r.status_code, r.text)
        got = raw.get_entity(name, "p", rk, accept=JSON_NONE).json()
        assert got["Data"] is want, (text, got)
    table.upsert_entity({"PartitionKey": "p", "RowKey": "5", "Data": EntityProperty("False", EdmType.BOOLEAN)})
    assert table.get_entity("p", "5")["Data"] is False
    # Not a boolean in any spelling: refused as before.
    r = raw.insert(name, {"PartitionKey": "p", "RowKey": "6", "Data": "yes", "Data@odata.type": "Edm.Boolean"})
    assert_error(r, 400, "InvalidInput")


# ---------------------------------------------------------------------------
# 3. Typed keys in the bodies of updates, merges and upserts
# ---------------------------------------------------------------------------

TYPED_KEYS = [
    ("Edm.DateTime", "2024-05-06T07:08:09Z"),
    ("Edm.Guid", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"),
    ("Edm.Binary", "AAECAw=="),
]


@pytest.mark.parametrize("edm,value", TYPED_KEYS, ids=[t for t, _ in TYPED_KEYS])
def test_typed_keys_in_update_merge_and_upsert_bodies_yield_to_the_urls_keys(raw, raw_table, edm, value):
    body = {
        "PartitionKey": value,
        "PartitionKey@odata.type": edm,
        "RowKey": value,
        "RowKey@odata.type": edm,
    }
    path = entity_path(raw_table, "p", "r")
    steps = [
        ("PUT", {}, 1),  # insert-or-replace
        ("MERGE", {}, 2),  # insert-or-merge
        ("PUT", {"If-Match": "*"}, 3),  # update
        ("MERGE", {"If-Match": "*"}, 4),  # merge
    ]
    for method, headers, n in steps:
        r = raw.request(method, path, json={**body, f"V{n}": n}, headers=headers)
        assert r.status_code == 204, (method, headers, r.status_code, r.text)
    got = raw.get_entity(raw_table, "p", "r", accept=JSON_NONE).json()
    assert (got["PartitionKey"], got["RowKey"], got["V3"], got["V4"]) == ("p", "r", 3, 4), got
    assert "V1" not in got  # the update replaced it
    # Insert has no URL keys: typed keys stay refused.
    r = raw.insert(raw_table, {**body, "V": 1})
    assert_error(r, 400, "PrimaryKeyPropertyIsInvalidType")


# ---------------------------------------------------------------------------
# 4. An account URL that ends in a table name
# ---------------------------------------------------------------------------


def test_an_account_url_ending_in_a_table_name_gets_azures_answers_and_the_sdk_hint(server, service):
    name = unique_table_name("misrooted")
    bad_url = f"{server.url}/{name}"
    tc = TableClient(bad_url, name, credential=CRED)
    with pytest.raises(ResourceNotFoundError) as e:
        tc.create_table()
    assert "table specified does not exist" in str(e.value) and CHECK_URL in str(e.value)
    tsc = TableServiceClient(bad_url, credential=CRED)
    with pytest.raises(HttpResponseError) as e:
        tsc.get_service_properties()
    assert sdk_error_code(e.value) == "InvalidQueryParameterValue" and CHECK_URL in str(e.value)
    with pytest.raises(HttpResponseError) as e:
        tsc.set_service_properties(cors=[])
    assert sdk_error_code(e.value) == "InvalidQueryParameterValue"

    service.create_table(name)
    try:
        with pytest.raises(HttpResponseError) as e:
            tc.create_table()
        assert "values are not specified" in str(e.value) and CHECK_URL in str(e.value)
        with pytest.raises(HttpResponseError) as e:
            tc.delete_table()
        assert "URI does not match number of key properties for the resource" in str(e.value)
        assert CHECK_URL in str(e.value)
        with pytest.raises(HttpResponseError) as e:
            tc.submit_transaction([("upsert", {"PartitionKey": "a", "RowKey": "b"})])
        assert e.value.status_code == 415
        # Nothing was written through the wrong URL, and the table is still there.
        assert list(service.get_table_client(name).list_entities()) == []
    finally:
        service.delete_table(name)


@pytest.mark.parametrize("host_style", [False, True], ids=["path-style", "host-style"])
def test_requests_below_a_table_name_get_azures_codes_not_invalid_uri(raw, raw_table, host_style):
    t = raw_table

    def req(method, path, **kw):
        # Path-style puts /devstoreaccount1 before the path; host-style names the
        # account in the Host header.
        return raw.request(method, path, host_style=host_style, **kw)

    assert_error(req("POST", f"/{t}/Tables", json={"TableName": t}), 400, "PropertiesNeedValue")
    missing = unique_table_name("gone")
    assert_error(req("POST", f"/{missing}/Tables", json={"TableName": missing}), 404, "TableNotFound")
    r = req("DELETE", f"/{t}/Tables('{t}')")
    assert_error(r, 400, "InvalidInput")
    assert "does not match number of key properties" in r.json()["odata.error"]["message"]["value"]
    assert_xml_error(req("GET", f"/{t}/", query=PROPS, accept=XML), 400, "InvalidQueryParameterValue")
    r = req("POST", f"/{t}/$batch", body="--b\r\n--b--\r\n", content_type="multipart/mixed; boundary=b")
    assert r.status_code == 415, (r.status_code, r.text)
    # The table really is still there and empty.
    assert raw.query_all(t) == []


# ---------------------------------------------------------------------------
# 5. ACL calls on invalid table names
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,code",
    [
        ("1table", "InvalidResourceName"),
        ("my_table", "InvalidResourceName"),
        ("aa", "OutOfRangeInput"),
        ("a" * 64, "OutOfRangeInput"),
    ],
    ids=["digit-first", "underscore", "too-short", "too-long"],
)
def test_acl_calls_on_invalid_table_names_are_refused_for_the_name(raw, server, name, code):
    assert_xml_error(raw.get(f"/{name}", query=ACL, accept=XML), 400, code)
    body = '<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers />'
    assert_xml_error(raw.put(f"/{name}", query=ACL, body=body, content_type=XML), 400, code)
    # The SDK turns these answers into its table-name hint.
    tc = TableClient(server.url, name, credential=CRED)
    with pytest.raises(ValueError, match="Storage table names must be alphanumeric"):
        tc.get_table_access_policy()
    with pytest.raises(ValueError, match="Storage table names must be alphanumeric"):
        tc.set_table_access_policy({})


def test_acl_call_on_a_path_with_empty_segments_is_invalid_uri(raw):
    assert_xml_error(raw.get("/a//", query=ACL, accept=XML), 400, "InvalidUri")


# ---------------------------------------------------------------------------
# 6. Writes through the -secondary endpoint
# ---------------------------------------------------------------------------


def test_writes_through_the_secondary_endpoint_are_forbidden_and_reads_go_on(server, service, raw):
    name = unique_table_name("second")
    secondary = TableClient(server.url, name, credential=CRED, location_mode=LocationMode.SECONDARY)
    with pytest.raises(HttpResponseError) as e:
        secondary.create_table()
    assert e.value.status_code == 403 and "Write operations are not allowed." in str(e.value)
    assert sdk_error_code(e.value) == "InsufficientAccountPermissions"
    primary = service.create_table(name)
    try:
        primary.create_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})
        entity = {"PartitionKey": "p", "RowKey": "new"}
        with pytest.raises(HttpResponseError) as e:
            secondary.create_entity(entity)
        assert e.value.status_code == 403
        writes = {
            "upsert": lambda: secondary.upsert_entity(entity),
            "delete": lambda: secondary.delete_entity("p", "r"),
            "set acl": lambda: secondary.set_table_access_policy({}),
            "delete table": lambda: secondary.delete_table(),
        }
        for what, write in writes.items():
            with pytest.raises(HttpResponseError) as e:
                write()
            assert e.value.status_code == 403, what
            assert "Write operations are not allowed." in str(e.value), what
        # Reads are served.
        assert secondary.get_entity("p", "r")["V"] == 1
        assert [x["RowKey"] for x in secondary.list_entities()] == ["r"]
        assert secondary.get_table_access_policy() == {}

        # Host-style: acct-secondary.table.<domain>.
        host = {"Host": f"{ACCOUNT}-secondary.table.localhost:{server.port}"}
        r = raw.insert(name, entity, host_style=True, headers=host)
        assert_error(r, 403, "InsufficientAccountPermissions")
        assert r.json()["odata.error"]["message"]["value"].startswith("Write operations are not allowed.")
        assert_error(raw.create_table(unique_table_name(), host_style=True, headers=host), 403, "InsufficientAccountPermissions")
        assert_error(raw.delete_table(name, host_style=True, headers=host), 403, "InsufficientAccountPermissions")
        r = raw.request("DELETE", entity_path(name, "p", "r"), host_style=True, headers={**host, "If-Match": "*"})
        assert_error(r, 403, "InsufficientAccountPermissions")
        # The SDK sends batches to the primary whatever its location mode.
        batch = raw.post("/$batch", body="--b\r\n--b--\r\n", content_type="multipart/mixed; boundary=b", host_style=True, headers=host)
        assert_error(batch, 403, "InsufficientAccountPermissions")
        # X-HTTP-Method tunnelling is no way around it.
        r = raw.request(
            "POST", entity_path(name, "p", "r"), json={"V": 2}, host_style=True, headers={**host, "X-HTTP-Method": "MERGE"}
        )
        assert_error(r, 403, "InsufficientAccountPermissions")
        r = raw.get_entity(name, "p", "r", host_style=True, headers=host)
        assert r.status_code == 200 and r.json()["V"] == 1
        # Nothing was written.
        assert [(x["RowKey"], x["V"]) for x in primary.list_entities()] == [("r", 1)]
    finally:
        service.delete_table(name)


# ---------------------------------------------------------------------------
# A SAS giving a parameter twice (issue #43)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("twice", ["sig", "sp", "se", "tn"])
def test_a_sas_giving_a_parameter_twice_is_refused(server, table, twice):
    table.create_entity({"PartitionKey": "p", "RowKey": "r"})
    expiry = datetime.now(UTC) + timedelta(hours=1)
    sas = generate_table_sas(CRED, table.table_name, permission="r", expiry=expiry)
    pairs = parse_qsl(sas)
    headers = {"Accept": JSON_NONE, "x-ms-version": "2019-02-02"}
    base = f"{server.url}/{table.table_name}()"
    ok = requests.get(f"{base}?{urlencode(pairs)}", headers=headers, timeout=30)
    assert ok.status_code == 200, ok.text
    value = dict(pairs)[twice]
    other = {
        "sig": "AAAA" + value[4:],
        "sp": "raud",
        "se": (expiry + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tn": unique_table_name(),
    }[twice]
    # Either order: neither the first nor the last value is taken.
    for extra in ([(twice, value)], [(twice, other)]):
        r = requests.get(f"{base}?{urlencode(pairs + extra)}", headers=headers, timeout=30)
        assert_error(r, 403, "AuthenticationFailed")
        r = requests.get(f"{base}?{urlencode(extra + pairs)}", headers=headers, timeout=30)
        assert_error(r, 403, "AuthenticationFailed")


# ---------------------------------------------------------------------------
# 7. Issue #57: a table name with '/' and Delete Table below a table name
# ---------------------------------------------------------------------------

# azure-data-tables' own tests/test_table_client.py (and _async.py), test_table_name_errors:
# every call on each of these names ends in the SDK's table-name ValueError, which it raises
# only for Azure's InvalidResourceName / OutOfRangeInput answers.
INVALID_TABLE_NAMES = ["1table", "a" * 2, "a" * 64, "a//", "my_table"]
ALPHANUMERIC = "Storage table names must be alphanumeric"


def test_table_name_errors_with_a_slash_are_the_sdks_table_name_error(server):
    for invalid_name in INVALID_TABLE_NAMES:
        client = TableClient(endpoint=server.url, credential=CRED, table_name=invalid_name)
        with pytest.raises(ValueError) as error:
            client.create_table()
        assert ALPHANUMERIC in str(error.value), invalid_name
        with pytest.raises(ValueError) as error:
            client.create_entity({"PartitionKey": "foo", "RowKey": "bar"})
        assert ALPHANUMERIC in str(error.value), invalid_name
        with pytest.raises(ValueError) as error:
            client.upsert_entity({"PartitionKey": "foo", "RowKey": "foo"})
        assert ALPHANUMERIC in str(error.value), invalid_name
        with pytest.raises(ValueError) as error:
            client.delete_entity("PK", "RK")
        assert ALPHANUMERIC in str(error.value), invalid_name
        with pytest.raises(ValueError) as error:
            client.get_table_access_policy()
        assert ALPHANUMERIC in str(error.value), invalid_name
        with pytest.raises(ValueError):
            client.submit_transaction([("upsert", {"PartitionKey": "A", "RowKey": "B"})])


def test_table_name_errors_with_a_slash_are_the_sdks_table_name_error_async(server):
    from azure.data.tables.aio import TableClient as AsyncTableClient

    async def run():
        for invalid_name in INVALID_TABLE_NAMES:
            client = AsyncTableClient(endpoint=server.url, credential=CRED, table_name=invalid_name)
            async with client:
                with pytest.raises(ValueError) as error:
                    await client.create_table()
                assert ALPHANUMERIC in str(error.value), invalid_name
                with pytest.raises(ValueError) as error:
                    await client.create_entity({"PartitionKey": "foo", "RowKey": "bar"})
                assert ALPHANUMERIC in str(error.value), invalid_name
                with pytest.raises(ValueError) as error:
                    await client.upsert_entity({"PartitionKey": "foo", "RowKey": "foo"})
                assert ALPHANUMERIC in str(error.value), invalid_name
                with pytest.raises(ValueError) as error:
                    await client.delete_entity("PK", "RK")
                assert ALPHANUMERIC in str(error.value), invalid_name
                with pytest.raises(ValueError) as error:
                    await client.get_table_access_policy()
                assert ALPHANUMERIC in str(error.value), invalid_name
                with pytest.raises(ValueError):
                    await client.submit_transaction([("upsert", {"PartitionKey": "A", "RowKey": "B"})])

    asyncio.run(run())


def test_a_table_name_sent_with_escaped_slashes_is_an_invalid_resource_name_not_an_invalid_uri(raw):
    # What the SDKs send for the table `a//`: the name quoted whole, '/' as %2F.
    name = "a%2F%2F"
    entity = {"PartitionKey": "foo", "RowKey": "bar"}
    assert_error(raw.request("POST", f"/{name}", json=entity), 400, "InvalidResourceName")
    assert_error(raw.request("POST", f"/{name.lower()}", json=entity), 400, "InvalidResourceName")
    keys = "(PartitionKey='foo',RowKey='foo')"
    assert_error(raw.request("PATCH", f"/{name}{keys}", json=entity), 400, "InvalidResourceName")
    assert_error(raw.request("PUT", f"/{name}{keys}", json=entity), 400, "InvalidResourceName")
    r = raw.request("DELETE", f"/{name}{keys}", headers={"If-Match": "*"})
    assert_error(r, 400, "InvalidResourceName")
    assert "contains invalid characters" in r.json()["odata.error"]["message"]["value"]
    assert_xml_error(raw.get(f"/{name}", query=ACL, accept=XML), 400, "InvalidResourceName")
    # The same path unescaped is still no resource at all.
    assert_error(raw.request("POST", "/a//", json=entity), 400, "InvalidUri")


def test_delete_table_below_a_table_name_is_table_not_found_when_it_does_not_exist(server):
    # azure-data-tables' tests/test_table_service_properties.py, test_client_with_url_ends_with_table_name.
    table_name = unique_table_name("mytable")
    tsc = TableServiceClient(f"{server.url}/{table_name}", credential=CRED)
    with pytest.raises(ResourceNotFoundError) as exc:
        tsc.create_table(table_name)
    assert "table specified does not exist" in str(exc.value)
    assert CHECK_URL in str(exc.value)
    with pytest.raises(ResourceNotFoundError) as exc:
        tsc.create_table_if_not_exists(table_name)
    assert "table specified does not exist" in str(exc.value)
    assert CHECK_URL in str(exc.value)
    with pytest.raises(HttpResponseError) as exc:
        tsc.set_service_properties(analytics_logging=TableAnalyticsLogging(write=True))
    assert "URI is invalid" in str(exc.value)
    assert CHECK_URL in str(exc.value)
    with pytest.raises(HttpResponseError) as exc:
        tsc.get_service_properties()
    assert "URI is invalid" in str(exc.value)
    assert CHECK_URL in str(exc.value)
    # Azure answers 404 TableNotFound, which delete_table takes as done.
    tsc.delete_table(table_name)


def test_delete_table_below_a_table_name_is_table_not_found_when_it_does_not_exist_async(server):
    from azure.data.tables.aio import TableServiceClient as AsyncTableServiceClient

    async def run():
        table_name = unique_table_name("mytable")
        async with AsyncTableServiceClient(f"{server.url}/{table_name}", credential=CRED) as tsc:
            with pytest.raises(ResourceNotFoundError) as exc:
                await tsc.create_table(table_name)
            assert "table specified does not exist" in str(exc.value)
            assert CHECK_URL in str(exc.value)
            with pytest.raises(ResourceNotFoundError) as exc:
                await tsc.create_table_if_not_exists(table_name)
            assert "table specified does not exist" in str(exc.value)
            with pytest.raises(HttpResponseError) as exc:
                await tsc.set_service_properties(analytics_logging=TableAnalyticsLogging(write=True))
            assert "URI is invalid" in str(exc.value)
            with pytest.raises(HttpResponseError) as exc:
                await tsc.get_service_properties()
            assert "URI is invalid" in str(exc.value)
            await tsc.delete_table(table_name)

    asyncio.run(run())


@pytest.mark.parametrize("host_style", [False, True], ids=["path-style", "host-style"])
def test_delete_table_below_a_table_name_answers_for_the_first_name(raw, raw_table, host_style):
    missing = unique_table_name("gone")
    r = raw.request("DELETE", f"/{missing}/Tables('{missing}')", host_style=host_style)
    assert_error(r, 404, "TableNotFound")
    assert r.json()["odata.error"]["message"]["value"].startswith("The table specified does not exist.")
    # The table in the parentheses is not the one looked up: the first segment is.
    assert_error(raw.request("DELETE", f"/{missing}/Tables('{raw_table}')", host_style=host_style), 404, "TableNotFound")
    r = raw.request("DELETE", f"/{raw_table}/Tables('{missing}')", host_style=host_style)
    assert_error(r, 400, "InvalidInput")
    assert "does not match number of key properties" in r.json()["odata.error"]["message"]["value"]
    assert_error(raw.request("GET", f"/{missing}/Tables('{missing}')", host_style=host_style), 404, "TableNotFound")
    # Nothing was deleted.
    assert raw.query_all(raw_table) == []
