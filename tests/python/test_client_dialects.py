"""Regressions found by the client matrix (tests/clients): what one real client sends that
the others do not, each test named for what broke."""

from conftest import JSON_FULL, JSON_MINIMAL, JSON_NONE, assert_error, etag_for_timestamp, unique_table_name


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


def test_batch_with_an_atom_accept_answers_each_part_by_its_own_accept(raw, raw_table):
    # The legacy Node.js SDK (azure-storage) sends $batch with its default
    # `Accept: application/atom+xml,application/xml`, bare-LF lines, a charset in the
    # Content-Type and `application/json;type=entry` bodies; only the parts ask for JSON.
    body = (
        "--batch_a\n"
        'content-type: multipart/mixed;charset="utf-8";boundary=changeset_b\n\n'
        "--changeset_b\n"
        "content-type: application/http\n"
        "content-transfer-encoding: binary\n\n"
        f"POST http://127.0.0.1:{raw.server.port}/devstoreaccount1/{raw_table} HTTP/1.1\n"
        "Prefer: return-no-content\n"
        "content-type: application/json;type=entry\n"
        "accept: application/json;odata=minimalmetadata\n\n"
        '{"PartitionKey":"p","RowKey":"1","V":1}\n'
        "--changeset_b--\n"
        "--batch_a--"
    )
    r = raw.post(
        "/$batch",
        body=body,
        content_type='multipart/mixed; charset="utf-8"; boundary=batch_a',
        accept="application/atom+xml,application/xml",
    )
    assert r.status_code == 202, r.text
    assert r.headers["Content-Type"].startswith("multipart/mixed")
    assert "HTTP/1.1 204" in r.text, r.text
    assert [e["V"] for e in raw.query_all(raw_table)] == [1]
    # Atom on an ordinary request is still refused.
    assert_error(raw.get(f"/{raw_table}()", accept="application/atom+xml"), 415, "AtomFormatNotSupported")


def test_if_match_with_the_etag_colons_unencoded_still_matches(raw, raw_table):
    # Given no odata.etag (nometadata), the legacy Node.js SDK rebuilds the ETag from the
    # Timestamp as W/"datetime'<Timestamp>'" with bare ':'; Azure compares the values.
    assert raw.insert(raw_table, {"PartitionKey": "p", "RowKey": "1", "V": 1}).status_code == 201
    ts = raw.get_entity(raw_table, "p", "1", accept=JSON_NONE).json()["Timestamp"]
    bare = "W/\"datetime'" + ts + "'\""
    assert "%3A" in etag_for_timestamp(ts) and ":" in bare
    path = f"/{raw_table}(PartitionKey='p',RowKey='1')"
    r = raw.request("MERGE", path, json={"W": 2}, headers={"If-Match": bare})
    assert r.status_code == 204, r.text
    # The old ETag, in either spelling, is stale now.
    assert_error(raw.put(path, json={"X": 3}, headers={"If-Match": bare}), 412, "UpdateConditionNotSatisfied")
    assert_error(
        raw.delete(path, headers={"If-Match": etag_for_timestamp(ts)}), 412, "UpdateConditionNotSatisfied"
    )
    current = raw.get_entity(raw_table, "p", "1", accept=JSON_NONE).json()["Timestamp"]
    r = raw.delete(path, headers={"If-Match": "W/\"datetime'" + current.replace(":", "%3a") + "'\""})
    assert r.status_code == 204, r.text


def test_a_json_authentication_error_carries_only_code_and_message(raw, raw_table):
    # azure-data-tables 12.0 decodes every other member of odata.error as XML and fails;
    # Azure's JSON error has only these two. The detail stays in the XML form.
    wrong = "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXk="
    for accept in (JSON_MINIMAL, JSON_NONE, JSON_FULL):
        r = raw.get(f"/{raw_table}()", key=wrong, accept=accept)
        assert_error(r, 403, "AuthenticationFailed")
        assert list(r.json()["odata.error"]) == ["code", "message"], r.text
    r = raw.get("/?restype=service&comp=properties", key=wrong, accept=None)
    assert r.status_code == 403
    assert "<AuthenticationErrorDetail>" in r.text
