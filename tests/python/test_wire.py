"""Wire-level details with raw HTTP (requests + our own Shared Key signer)."""

import base64
import hashlib
import json
import uuid
from datetime import datetime, timedelta, timezone
from email.utils import formatdate, parsedate_to_datetime

import pytest

from conftest import (
    ACCOUNT,
    JSON_FULL,
    JSON_MINIMAL,
    JSON_NONE,
    KEY,
    assert_error,
    entity_path,
    etag_for_timestamp,
    unique_table_name,
)

ENTITY = {
    "PartitionKey": "uk",
    "RowKey": "0001",
    "Name": "Ada",
    "Age": 36,
    "Active": True,
    "Score": 97.5,
    "Whole": 5.0,
    "Balance": "9007199254740993",
    "Balance@odata.type": "Edm.Int64",
    "Joined": "2020-02-29T10:00:00.0000000Z",
    "Joined@odata.type": "Edm.DateTime",
    "Id": "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
    "Id@odata.type": "Edm.Guid",
    "Blob": "AAECAw==",
    "Blob@odata.type": "Edm.Binary",
    "Ratio": "NaN",
    "Ratio@odata.type": "Edm.Double",
}
TYPED = {"Balance": "Edm.Int64", "Joined": "Edm.DateTime", "Id": "Edm.Guid", "Blob": "Edm.Binary"}
PLAIN = {"Name": "Ada", "Age": 36, "Active": True, "Score": 97.5}


def pairs(resp):
    """The JSON body as an ordered list of (name, value) pairs (objects nested likewise)."""
    return json.loads(resp.text, object_pairs_hook=list)


def check_order(keys, table=None):
    """odata.* control members first, then PartitionKey, RowKey, Timestamp; every annotation
    immediately before its property."""
    control = [k for k in keys if k.startswith("odata.")]
    assert keys[: len(control)] == control, keys
    rest = keys[len(control) :]
    data = [k for k in rest if not k.endswith("@odata.type")]
    system = [k for k in data if k in ("PartitionKey", "RowKey", "Timestamp")]
    assert data[: len(system)] == system, keys
    assert system == [k for k in ("PartitionKey", "RowKey", "Timestamp") if k in data], keys
    for i, k in enumerate(rest):
        if k.endswith("@odata.type"):
            assert i + 1 < len(rest) and rest[i + 1] == k[: -len("@odata.type")], f"{k} not right before its value: {keys}"


def content_type_level(resp):
    ct = resp.headers.get("Content-Type", "").replace(" ", "").lower()
    assert ct.startswith("application/json"), ct
    for level in ("nometadata", "minimalmetadata", "fullmetadata"):
        if f"odata={level}" in ct:
            return level
    raise AssertionError(f"no odata level in Content-Type {ct!r}")


@pytest.fixture
def ada(raw, raw_table):
    r = raw.insert(raw_table, ENTITY)
    assert r.status_code == 201, r.text
    return raw_table


# ---------------------------------------------------------------------------
# Metadata levels
# ---------------------------------------------------------------------------


def test_get_entity_nometadata(raw, ada):
    r = raw.get_entity(ada, "uk", "0001", accept=JSON_NONE)
    assert r.status_code == 200, r.text
    assert content_type_level(r) == "nometadata"
    body = r.json()
    assert not [k for k in body if k.startswith("odata.") or "@odata" in k], body
    assert set(body) == {"PartitionKey", "RowKey", "Timestamp", "Name", "Age", "Active", "Score", "Whole",
                         "Balance", "Joined", "Id", "Blob", "Ratio"}
    assert body["Balance"] == "9007199254740993"  # Int64 still a string
    assert body["Blob"] == "AAECAw=="
    assert body["Joined"] == "2020-02-29T10:00:00.0000000Z"
    assert body["Ratio"] == "NaN"
    assert '"Whole":5.0' in r.text.replace(" ", "")
    for k, v in PLAIN.items():
        assert body[k] == v
    check_order([k for k, _ in pairs(r)])
    assert r.headers["ETag"] == etag_for_timestamp(body["Timestamp"])


def test_get_entity_minimalmetadata(server, raw, ada):
    r = raw.get_entity(ada, "uk", "0001", accept=JSON_MINIMAL)
    assert r.status_code == 200, r.text
    assert content_type_level(r) == "minimalmetadata"
    body = r.json()
    assert body["odata.metadata"] == f"{server.url}/$metadata#{ada}/@Element"
    assert body["odata.etag"] == r.headers["ETag"] == etag_for_timestamp(body["Timestamp"])
    for k in ("odata.type", "odata.id", "odata.editLink", "Timestamp@odata.type"):
        assert k not in body, k
    for k, t in TYPED.items():
        assert body[f"{k}@odata.type"] == t, k
    assert body["Ratio@odata.type"] == "Edm.Double" and body["Ratio"] == "NaN"
    for k in ("Name", "Age", "Active", "Score"):
        assert f"{k}@odata.type" not in body
    assert body["Balance"] == "9007199254740993"
    # Integral double distinguishable from Int32.
    assert '"Whole":5.0' in r.text.replace(" ", "") or body.get("Whole@odata.type") == "Edm.Double"
    check_order([k for k, _ in pairs(r)])


def test_get_entity_fullmetadata(server, raw, ada):
    r = raw.get_entity(ada, "uk", "0001", accept=JSON_FULL)
    assert r.status_code == 200, r.text
    assert content_type_level(r) == "fullmetadata"
    body = r.json()
    assert body["odata.metadata"] == f"{server.url}/$metadata#{ada}/@Element"
    assert body["odata.type"] == f"{ACCOUNT}.{ada}"
    assert body["odata.id"] == f"{server.url}/{ada}(PartitionKey='uk',RowKey='0001')"
    assert body["odata.editLink"] == f"{ada}(PartitionKey='uk',RowKey='0001')"
    assert body["odata.etag"] == r.headers["ETag"]
    assert body["Timestamp@odata.type"] == "Edm.DateTime"
    for k, t in TYPED.items():
        assert body[f"{k}@odata.type"] == t, k
    assert body["Whole@odata.type"] == "Edm.Double"
    assert body["Score@odata.type"] == "Edm.Double"
    assert body["Ratio@odata.type"] == "Edm.Double"
    for k in ("Name", "Age", "Active", "PartitionKey", "RowKey"):
        assert f"{k}@odata.type" not in body, k
    check_order([k for k, _ in pairs(r)])


def test_query_wrapper_per_level(server, raw, ada):
    r = raw.get(f"/{ada}()", accept=JSON_NONE)
    assert r.status_code == 200
    assert content_type_level(r) == "nometadata"
    body = r.json()
    assert list(body) == ["value"]
    assert "odata.etag" not in body["value"][0]

    r = raw.get(f"/{ada}()", accept=JSON_MINIMAL)
    body = r.json()
    assert content_type_level(r) == "minimalmetadata"
    assert body["odata.metadata"].startswith(f"{server.url}/$metadata#{ada}")
    [e] = body["value"]
    assert e["odata.etag"] == etag_for_timestamp(e["Timestamp"])
    assert "odata.metadata" not in e and "odata.id" not in e
    assert e["Balance@odata.type"] == "Edm.Int64"

    r = raw.get(f"/{ada}", accept=JSON_FULL)  # without "()" too
    assert r.status_code == 200
    body = r.json()
    [e] = body["value"]
    assert e["odata.type"] == f"{ACCOUNT}.{ada}"
    assert e["odata.id"] == f"{server.url}/{ada}(PartitionKey='uk',RowKey='0001')"
    assert e["Timestamp@odata.type"] == "Edm.DateTime"
    check_order([k for k, _ in dict(pairs(r))["value"][0]])


def test_bare_application_json_is_minimal(raw, ada):
    r = raw.get_entity(ada, "uk", "0001", accept="application/json")
    assert r.status_code == 200, r.text
    assert content_type_level(r) == "minimalmetadata"
    body = r.json()
    assert "odata.metadata" in body and "odata.type" not in body


def test_query_tables_levels(server, raw, raw_table):
    flt = {"$filter": f"TableName eq '{raw_table}'"}
    r = raw.get("/Tables", query=flt, accept=JSON_NONE)
    assert r.json() == {"value": [{"TableName": raw_table}]}
    r = raw.get("/Tables", query=flt, accept=JSON_MINIMAL)
    assert r.json() == {"odata.metadata": f"{server.url}/$metadata#Tables", "value": [{"TableName": raw_table}]}
    r = raw.get("/Tables()", query=flt, accept=JSON_FULL)
    assert r.status_code == 200
    [t] = r.json()["value"]
    assert t == {
        "odata.type": f"{ACCOUNT}.Tables",
        "odata.id": f"{server.url}/Tables('{raw_table}')",
        "odata.editLink": f"Tables('{raw_table}')",
        "TableName": raw_table,
    }
    assert [k for k, _ in pairs(r)[-1][1][0]][-1] == "TableName"


@pytest.mark.parametrize("name", ["$format", "%24format"])
def test_format_overrides_accept(raw, ada, name):
    r = raw.get_entity(ada, "uk", "0001", accept=JSON_NONE, query=[(name, "application/json;odata=fullmetadata")])
    assert r.status_code == 200, r.text
    assert content_type_level(r) == "fullmetadata"
    assert "odata.type" in r.json()
    r = raw.get(f"/{ada}()", accept=JSON_FULL, query=[(name, "application/json;odata=nometadata")])
    assert content_type_level(r) == "nometadata"
    assert "odata.metadata" not in r.json()


# ---------------------------------------------------------------------------
# Prefer, Location, ETag
# ---------------------------------------------------------------------------


def test_insert_prefer(server, raw, raw_table):
    r = raw.insert(raw_table, {"PartitionKey": "p", "RowKey": "default"})
    assert r.status_code == 201, r.text
    assert r.json()["RowKey"] == "default"
    assert r.headers["ETag"] == r.json()["odata.etag"]
    assert r.json()["odata.metadata"] == f"{server.url}/$metadata#{raw_table}/@Element"
    assert r.headers["Location"] == f"{server.url}/{raw_table}(PartitionKey='p',RowKey='default')"

    r = raw.insert(raw_table, {"PartitionKey": "p", "RowKey": "content"}, headers={"Prefer": "return-content"})
    assert r.status_code == 201, r.text
    assert r.headers["Preference-Applied"] == "return-content"
    assert r.json()["RowKey"] == "content"
    assert r.headers["Location"].endswith(f"/{raw_table}(PartitionKey='p',RowKey='content')")

    r = raw.insert(raw_table, {"PartitionKey": "p", "RowKey": "none"}, headers={"Prefer": "return-no-content"})
    assert r.status_code == 204, r.text
    assert r.content == b""
    assert r.headers["Preference-Applied"] == "return-no-content"
    assert r.headers["ETag"].startswith("W/\"datetime'")
    loc = r.headers["Location"]
    assert loc == f"{server.url}/{raw_table}(PartitionKey='p',RowKey='none')"
    assert r.headers["DataServiceId"] == loc
    g = raw.get_entity(raw_table, "p", "none")
    assert g.headers["ETag"] == r.headers["ETag"]


def test_create_table_prefer(raw):
    a, b, c = (unique_table_name(p) for p in ("pa", "pb", "pc"))
    try:
        r = raw.create_table(a, headers={"Prefer": "return-no-content"})
        assert r.status_code == 204, r.text
        assert r.content == b""
        assert r.headers["Preference-Applied"] == "return-no-content"
        r = raw.create_table(b, headers={"Prefer": "return-content"})
        assert r.status_code == 201, r.text
        assert r.headers["Preference-Applied"] == "return-content"
        assert r.json()["TableName"] == b
        r = raw.create_table(c)
        assert r.status_code == 201
        assert r.json()["TableName"] == c
        assert content_type_level(r) == "minimalmetadata"
    finally:
        for n in (a, b, c):
            raw.delete_table(n)


def test_update_responses(raw, ada):
    path = entity_path(ada, "uk", "0001")
    writes = (
        lambda: raw.put(path, json={"A": 1}, headers={"If-Match": "*", "Prefer": "return-content"}),
        lambda: raw.request("MERGE", path, json={"B": 1}, headers={"If-Match": "*"}),
        lambda: raw.put(path, json={"C": 1}),
    )
    for write in writes:
        resp = write()
        assert resp.status_code == 204, resp.text
        assert resp.content == b""
        assert resp.headers["ETag"].startswith("W/\"datetime'")
        assert raw.get(path).headers["ETag"] == resp.headers["ETag"]


# ---------------------------------------------------------------------------
# Common headers and error bodies
# ---------------------------------------------------------------------------


def check_common_headers(r, client_request_id=None):
    rid = r.headers.get("x-ms-request-id")
    assert rid, r.headers
    assert r.headers.get("x-ms-version"), r.headers
    when = parsedate_to_datetime(r.headers["Date"])
    assert when.tzinfo is not None
    assert abs(when - datetime.now(timezone.utc)) < timedelta(minutes=5)
    if client_request_id is not None:
        assert r.headers.get("x-ms-client-request-id") == client_request_id
    return rid


def test_common_headers_on_success_and_error(raw, ada):
    ids = set()
    calls = [
        lambda h: raw.get("/Tables", headers=h),
        lambda h: raw.get_entity(ada, "uk", "0001", headers=h),
        lambda h: raw.insert(ada, {"PartitionKey": "h", "RowKey": uuid.uuid4().hex}, headers=h),
        lambda h: raw.get_entity(ada, "no", "such", headers=h),  # 404
        lambda h: raw.insert(ada, "{bad json", headers=h),  # 400
        lambda h: raw.get("/Tables", headers=h, key=base64.b64encode(b"wrong" * 8).decode()),  # 403
    ]
    for call in calls:
        crid = "crid-" + uuid.uuid4().hex
        r = call({"x-ms-client-request-id": crid})
        ids.add(check_common_headers(r, crid))
    assert len(ids) == len(calls), "x-ms-request-id must be unique per request"


def test_client_request_id_length(raw):
    crid = "c" * 1024
    r = raw.get("/Tables", headers={"x-ms-client-request-id": crid})
    assert r.status_code == 200, r.text
    assert r.headers["x-ms-client-request-id"] == crid
    r = raw.get("/Tables", headers={"x-ms-client-request-id": "c" * 1025})
    assert_error(r, 400, "InvalidHeaderValue")


def test_error_body_format(raw, raw_table):
    r = raw.get_entity(raw_table, "no", "such")
    assert r.status_code == 404
    assert r.headers["x-ms-error-code"] == "ResourceNotFound"
    assert r.headers["Content-Type"].replace(" ", "").lower().startswith("application/json")
    body = r.json()
    assert list(body) == ["odata.error"]
    err = body["odata.error"]
    assert err["code"] == "ResourceNotFound"
    assert err["message"]["lang"] == "en-US"
    value = err["message"]["value"]
    assert f"\nRequestId:{r.headers['x-ms-request-id']}\nTime:" in value, value
    stamp = value.rsplit("\nTime:", 1)[1]
    assert len(stamp) == 28 and stamp.endswith("Z"), stamp


# ---------------------------------------------------------------------------
# Query options
# ---------------------------------------------------------------------------


def test_percent_encoded_option_names(raw, raw_table):
    for i in range(5):
        assert raw.insert(raw_table, {"PartitionKey": "p", "RowKey": str(i), "N": i, "M": i}).status_code == 201
    r = raw.get(f"/{raw_table}()", query=[("%24top", "2")])
    assert r.status_code == 200
    assert [e["RowKey"] for e in r.json()["value"]] == ["0", "1"]
    assert r.headers.get("x-ms-continuation-NextPartitionKey") is not None
    r = raw.get(f"/{raw_table}()", query=[("%24filter", "N ge 3"), ("%24select", "N")])
    assert r.status_code == 200
    vals = r.json()["value"]
    assert [e["N"] for e in vals] == [3, 4]
    assert all("M" not in e for e in vals)


@pytest.mark.parametrize("top", ["0", "1001", "-5", "x"])
def test_bad_top_entities(raw, raw_table, top):
    r = raw.get(f"/{raw_table}()", query={"$top": top})
    assert_error(r, 400, {"InvalidInput", "OutOfRangeInput", "InvalidQueryParameterValue"})


def test_top_1000_ok(raw, raw_table):
    raw.insert(raw_table, {"PartitionKey": "p", "RowKey": "r"})
    r = raw.get(f"/{raw_table}()", query={"$top": "1000"})
    assert r.status_code == 200 and len(r.json()["value"]) == 1
    assert "x-ms-continuation-NextPartitionKey" not in r.headers


def test_continuation_round_trip(raw, raw_table):
    for pk in ("a", "b"):
        for rk in ("1", "2", "3"):
            raw.insert(raw_table, {"PartitionKey": pk, "RowKey": rk})
    seen = []
    q = {"$top": "2"}
    for _ in range(20):
        r = raw.get(f"/{raw_table}()", query=q)
        assert r.status_code == 200
        page = r.json()["value"]
        assert len(page) <= 2
        seen += [(e["PartitionKey"], e["RowKey"]) for e in page]
        npk = r.headers.get("x-ms-continuation-NextPartitionKey")
        if npk is None:
            break
        q = {"$top": "2", "NextPartitionKey": npk}
        nrk = r.headers.get("x-ms-continuation-NextRowKey")
        if nrk is not None:
            q["NextRowKey"] = nrk
    assert seen == [(pk, rk) for pk in ("a", "b") for rk in ("1", "2", "3")]


def test_filter_by_keys_not_found_is_empty(raw, raw_table):
    r = raw.get(f"/{raw_table}()", query={"$filter": "PartitionKey eq 'x' and RowKey eq 'y'"})
    assert r.status_code == 200
    assert r.json()["value"] == []


# ---------------------------------------------------------------------------
# Key predicate forms
# ---------------------------------------------------------------------------


def test_key_predicate_forms(raw, raw_table):
    assert raw.insert(raw_table, {"PartitionKey": "o'k", "RowKey": "a b", "V": 1}).status_code == 201
    for path in (
        f"/{raw_table}(PartitionKey='o''k',RowKey='a%20b')",
        f"/{raw_table}(PartitionKey=%27o%27%27k%27,RowKey=%27a%20b%27)",
        f"/{raw_table}(PartitionKey='o%27%27k',%20RowKey='a%20b')",
        f"/{raw_table.upper()}(PartitionKey='o''k',RowKey='a%20b')",
    ):
        r = raw.get(path)
        assert r.status_code == 200, (path, r.status_code, r.text)
        assert r.json()["V"] == 1


# ---------------------------------------------------------------------------
# Merge verbs and X-HTTP-Method
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["MERGE", "PATCH", "POST+X-HTTP-Method"])
@pytest.mark.parametrize("conditional", [True, False], ids=["merge", "upsert-merge"])
def test_merge_verb_forms(raw, raw_table, form, conditional):
    path = entity_path(raw_table, "m", "1")
    assert raw.insert(raw_table, {"PartitionKey": "m", "RowKey": "1", "Keep": "k", "Over": 1}).status_code == 201
    headers = {"If-Match": "*"} if conditional else {}
    if form == "POST+X-HTTP-Method":
        headers["X-HTTP-Method"] = "MERGE"
        r = raw.post(path, json={"Over": 2, "New": True}, headers=headers)
    else:
        r = raw.request(form, path, json={"Over": 2, "New": True}, headers=headers)
    assert r.status_code == 204, (form, r.status_code, r.text)
    assert r.headers["ETag"].startswith("W/\"datetime'")
    e = raw.get(path).json()
    assert (e["Keep"], e["Over"], e["New"]) == ("k", 2, True)
    # And as an insert when the entity is missing (upsert) / 404 when conditional.
    path2 = entity_path(raw_table, "m", "2")
    if form == "POST+X-HTTP-Method":
        r = raw.post(path2, json={"V": 1}, headers=headers)
    else:
        r = raw.request(form, path2, json={"V": 1}, headers=headers)
    if conditional:
        assert_error(r, 404, "ResourceNotFound")
    else:
        assert r.status_code == 204, r.text
        assert raw.get(path2).json()["V"] == 1


def test_x_http_method_put_and_delete_tunnelled(raw, raw_table):
    path = entity_path(raw_table, "t", "1")
    raw.insert(raw_table, {"PartitionKey": "t", "RowKey": "1", "A": 1})
    r = raw.post(path, json={"B": 2}, headers={"X-HTTP-Method": "PUT", "If-Match": "*"})
    assert r.status_code == 204, r.text
    e = raw.get(path).json()
    assert "A" not in e and e["B"] == 2
    r = raw.post(path, headers={"X-HTTP-Method": "DELETE", "If-Match": "*"})
    assert r.status_code == 204, r.text
    assert_error(raw.get(path), 404, "ResourceNotFound")


@pytest.mark.parametrize("verb", ["GET", "PUT", "DELETE"])
def test_x_http_method_not_using_post(raw, ada, verb):
    path = entity_path(ada, "uk", "0001")
    kw = {"json": {"A": 1}} if verb == "PUT" else {}
    r = raw.request(verb, path, headers={"X-HTTP-Method": "MERGE", "If-Match": "*"}, **kw)
    assert_error(r, 400, "XMethodNotUsingPost")
    assert raw.get(path).json()["Name"] == "Ada"  # unchanged


def test_x_http_method_incorrect_value(raw, ada):
    r = raw.post(entity_path(ada, "uk", "0001"), json={"A": 1}, headers={"X-HTTP-Method": "FROB", "If-Match": "*"})
    assert_error(r, 400, "XMethodIncorrectValue")


def test_delete_entity_without_if_match(raw, ada):
    path = entity_path(ada, "uk", "0001")
    r = raw.delete(path)
    assert r.status_code in (400, 412), (r.status_code, r.text)
    assert_error(r, (400, 412), {"MissingRequiredHeader", "UpdateConditionNotSatisfied", "InvalidInput"})
    assert raw.get(path).status_code == 200  # still there


# ---------------------------------------------------------------------------
# Authentication
# ---------------------------------------------------------------------------


def test_missing_authorization(raw):
    r = raw.get("/Tables", auth=None)
    assert r.status_code == 403, (r.status_code, r.text)
    assert_error(r, 403, {"AuthenticationFailed", "AuthorizationFailure"})


def test_bad_signature(raw, raw_table):
    wrong = base64.b64encode(b"not the key" * 4).decode()
    r = raw.get("/Tables", key=wrong)
    assert_error(r, 403, "AuthenticationFailed")
    r = raw.insert(raw_table, {"PartitionKey": "p", "RowKey": "r"}, key=wrong)
    assert_error(r, 403, "AuthenticationFailed")
    assert_error(raw.get_entity(raw_table, "p", "r"), 404, "ResourceNotFound")


def test_signature_covers_content_type(server):
    """Content-Type is signed exactly as sent (auth.md §2)."""
    import requests

    from conftest import shared_key_string_to_sign, sign

    name = unique_table_name("ctsig")
    date = formatdate(usegmt=True)
    sts = shared_key_string_to_sign("POST", "", "application/json", date, f"/{ACCOUNT}/{ACCOUNT}/Tables")
    headers = {
        "x-ms-date": date,
        "x-ms-version": "2019-02-02",
        "Accept": JSON_MINIMAL,
        "Content-Type": "application/json;odata=nometadata",
        "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}",
    }
    r = requests.post(f"{server.url}/Tables", data=json.dumps({"TableName": name}), headers=headers)
    assert_error(r, 403, "AuthenticationFailed")
    # Signed with the Content-Type actually sent: accepted.
    sts = shared_key_string_to_sign("POST", "", headers["Content-Type"], date, f"/{ACCOUNT}/{ACCOUNT}/Tables")
    headers["Authorization"] = f"SharedKey {ACCOUNT}:{sign(KEY, sts)}"
    r = requests.post(f"{server.url}/Tables", data=json.dumps({"TableName": name}), headers=headers)
    assert r.status_code == 201, (r.status_code, r.text)
    server.raw.delete_table(name)


def test_signature_covers_path_and_verb(raw, server):
    """A signature computed for another resource / verb must be refused."""
    import requests

    from conftest import shared_key_string_to_sign, sign

    date = formatdate(usegmt=True)
    # Signed for /devstoreaccount1/Tables (account once) instead of twice: wrong for path-style.
    sts = shared_key_string_to_sign("GET", "", "", date, f"/{ACCOUNT}/Tables")
    r = requests.get(
        f"{server.url}/Tables",
        headers={
            "x-ms-date": date,
            "x-ms-version": "2019-02-02",
            "Accept": JSON_MINIMAL,
            "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}",
        },
    )
    assert_error(r, 403, "AuthenticationFailed")
    # Correct resource, but the signature was made for a different verb.
    sts = shared_key_string_to_sign("POST", "", "", date, f"/{ACCOUNT}/{ACCOUNT}/Tables")
    r = requests.get(
        f"{server.url}/Tables",
        headers={
            "x-ms-date": date,
            "x-ms-version": "2019-02-02",
            "Accept": JSON_MINIMAL,
            "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}",
        },
    )
    assert_error(r, 403, "AuthenticationFailed")
    # The right string: accepted (proves the two refusals above are about the signature).
    sts = shared_key_string_to_sign("GET", "", "", date, f"/{ACCOUNT}/{ACCOUNT}/Tables")
    r = requests.get(
        f"{server.url}/Tables",
        headers={
            "x-ms-date": date,
            "x-ms-version": "2019-02-02",
            "Accept": JSON_MINIMAL,
            "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}",
        },
    )
    assert r.status_code == 200, r.text


def test_shared_key_lite_accepted(raw, raw_table):
    r = raw.get("/Tables", auth="SharedKeyLite", query={"$filter": f"TableName eq '{raw_table}'"})
    assert r.status_code == 200, r.text
    assert r.json()["value"] == [{"TableName": raw_table}]
    r = raw.insert(raw_table, {"PartitionKey": "lite", "RowKey": "1"}, auth="SharedKeyLite")
    assert r.status_code == 201, r.text
    bad = raw.get("/Tables", auth="SharedKeyLite", key=base64.b64encode(b"x" * 64).decode())
    assert_error(bad, 403, "AuthenticationFailed")


def test_date_header_instead_of_x_ms_date(server, raw):
    import requests

    from conftest import shared_key_string_to_sign, sign

    date = formatdate(usegmt=True)
    sts = shared_key_string_to_sign("GET", "", "", date, f"/{ACCOUNT}/{ACCOUNT}/Tables")
    r = requests.get(
        f"{server.url}/Tables",
        headers={
            "Date": date,
            "x-ms-version": "2019-02-02",
            "Accept": JSON_MINIMAL,
            "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}",
        },
    )
    assert r.status_code == 200, r.text


def test_missing_date_header(server):
    import requests

    from conftest import shared_key_string_to_sign, sign

    sts = shared_key_string_to_sign("GET", "", "", "", f"/{ACCOUNT}/{ACCOUNT}/Tables")
    r = requests.get(
        f"{server.url}/Tables",
        headers={
            "x-ms-version": "2019-02-02",
            "Accept": JSON_MINIMAL,
            "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}",
        },
    )
    assert_error(r, 403, "AuthenticationFailed")


def test_malformed_authorization_header(server):
    import requests

    r = requests.get(
        f"{server.url}/Tables",
        headers={
            "x-ms-date": formatdate(usegmt=True),
            "x-ms-version": "2019-02-02",
            "Accept": JSON_MINIMAL,
            "Authorization": "SharedKey no-colon-here",
        },
    )
    assert_error(r, (400, 403), {"InvalidAuthenticationInfo", "AuthenticationFailed"})


def test_content_md5(raw, raw_table):
    body = json.dumps({"PartitionKey": "md5", "RowKey": "1"}).encode()
    good = base64.b64encode(hashlib.md5(body).digest()).decode()
    r = raw.post(f"/{raw_table}", body=body, headers={"Content-MD5": good})
    assert r.status_code == 201, r.text
    body2 = json.dumps({"PartitionKey": "md5", "RowKey": "2"}).encode()
    r = raw.post(f"/{raw_table}", body=body2, headers={"Content-MD5": good})
    assert_error(r, 400, "Md5Mismatch")
    assert_error(raw.get_entity(raw_table, "md5", "2"), 404, "ResourceNotFound")


def test_unknown_account(raw):
    other_key = base64.b64encode(b"some other key bytes 1234567890!").decode()
    r = raw.get("/Tables", account="nosuchacct", key=other_key)
    assert_error(r, (403, 404), {"AuthenticationFailed", "ResourceNotFound"})
    # Even signed with the real key, an unknown account name is refused.
    r = raw.get("/Tables", account="nosuchacct", key=KEY)
    assert_error(r, (403, 404), {"AuthenticationFailed", "ResourceNotFound"})


# ---------------------------------------------------------------------------
# Versions and addressing
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "version", ["2015-12-11", "2017-04-17", "2017-07-29", "2018-03-28", "2019-02-02", "2020-12-06", "2021-12-02", "2022-11-02"]
)
def test_versions_accepted(raw, raw_table, version):
    r = raw.get("/Tables", version=version, query={"$filter": f"TableName eq '{raw_table}'"})
    assert r.status_code == 200, (version, r.status_code, r.text)
    assert r.json()["value"] == [{"TableName": raw_table}]
    assert r.headers.get("x-ms-version")
    rk = version.replace("-", "")
    r = raw.insert(raw_table, {"PartitionKey": "v", "RowKey": rk}, version=version)
    assert r.status_code == 201, (version, r.status_code, r.text)
    r = raw.request("MERGE", entity_path(raw_table, "v", rk), json={"X": 1}, version=version, headers={"If-Match": "*"})
    assert r.status_code == 204, (version, r.status_code, r.text)


def test_host_style_addressing(server, raw):
    name = unique_table_name("host")
    r = raw.create_table(name, host_style=True)
    assert r.status_code == 201, (r.status_code, r.text)
    try:
        base = f"http://{ACCOUNT}.table.localhost:{server.port}"
        assert r.json()["odata.metadata"] == f"{base}/$metadata#Tables/@Element"
        r = raw.insert(name, {"PartitionKey": "h", "RowKey": "1", "V": 1}, host_style=True, accept=JSON_FULL)
        assert r.status_code == 201, r.text
        assert r.json()["odata.id"] == f"{base}/{name}(PartitionKey='h',RowKey='1')"
        r = raw.get_entity(name, "h", "1", host_style=True)
        assert r.status_code == 200, r.text
        assert r.json()["V"] == 1
        # The same table is visible path-style.
        assert raw.get_entity(name, "h", "1").json()["V"] == 1
        # Host-style with a bad signature is refused too.
        bad = raw.get("/Tables", host_style=True, key=base64.b64encode(b"k" * 64).decode())
        assert_error(bad, 403, "AuthenticationFailed")
    finally:
        assert raw.delete_table(name, host_style=True).status_code == 204


@pytest.mark.parametrize(
    "ctype",
    [
        "application/json",
        "application/json;odata=nometadata",
        "application/json;odata=minimalmetadata;charset=utf-8",
        "application/json; charset=utf-8",
        "application/json;odata=fullmetadata",
    ],
)
def test_insert_content_types(raw, raw_table, ctype):
    r = raw.insert(raw_table, json.dumps({"PartitionKey": "ct", "RowKey": "1", "V": "é"}), content_type=ctype)
    assert r.status_code == 201, (ctype, r.status_code, r.text)
    assert raw.get_entity(raw_table, "ct", "1").json()["V"] == "é"


def test_timeout_param_accepted(raw, raw_table):
    r = raw.get(f"/{raw_table}()", query={"timeout": "30"})
    assert r.status_code == 200, r.text
    r = raw.get("/Tables", query={"timeout": "5", "unknownParam": "x"})
    assert r.status_code == 200, r.text
