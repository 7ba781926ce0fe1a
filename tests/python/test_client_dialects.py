"""Regressions found by the client matrix (tests/clients): what one real client sends that
the others do not, each test named for what broke."""

from conftest import JSON_FULL, JSON_MINIMAL, JSON_NONE, assert_error, unique_table_name


def test_query_string_plus_is_a_space_as_form_encoding_sends_it(raw, raw_table):
    # The Rust SDK and the legacy Python SDK form-encode: spaces as '+', a literal '+' as %2B.
    for rk, age, name in (("1", 27, "a b"), ("2", 29, "a+b"), ("3", 31, "a b")):
        r = raw.insert(raw_table, {"PartitionKey": "people", "RowKey": rk, "Age": age, "Name": name})
        assert r.status_code == 201, r.text
    r = raw.get(f"/{raw_table}()", query="$filter=PartitionKey+eq+'people'+and+Age+gt+28")
    assert r.status_code == 200, r.text
    assert [e["RowKey"] for e in r.json()["value"]] == ["2", "3"]
    r = raw.get(f"/{raw_table}()", query="$filter=Name+eq+'a%2Bb'&$select=RowKey,Name", accept=JSON_NONE)
    assert r.status_code == 200, r.text
    assert r.json()["value"] == [{"RowKey": "2", "Name": "a+b"}]
    r = raw.get(f"/{raw_table}()", query="$filter=Name%20eq%20'a+b'")
    assert [e["RowKey"] for e in r.json()["value"]] == ["1", "3"]


def test_get_one_table_by_name_answers_it_as_an_element(raw, raw_table):
    # The legacy SDKs' exists(table) is GET /Tables('name').
    r = raw.get(f"/Tables('{raw_table}')")
    assert r.status_code == 200, r.text
    body = r.json()
    assert "value" not in body
    assert body["TableName"] == raw_table
    assert body["odata.metadata"].endswith("$metadata#Tables/@Element")
    # Case-insensitive lookup answers the stored name.
    r = raw.get(f"/Tables('{raw_table.upper()}')", accept=JSON_NONE)
    assert r.status_code == 200 and r.json() == {"TableName": raw_table}
    r = raw.get(f"/Tables('{raw_table}')", accept=JSON_FULL)
    assert r.json()["odata.editLink"] == f"Tables('{raw_table}')"
    assert r.headers["Content-Type"].startswith("application/json")


def test_get_one_missing_table_by_name_is_resource_not_found(raw):
    r = raw.get(f"/Tables('{unique_table_name('missing')}')", accept=JSON_MINIMAL)
    assert_error(r, 404, "ResourceNotFound")
