"""Wire-level details with raw HTTP (requests + our own Shared Key signer): metadata levels,
Prefer/Location/ETag, common headers and error bodies, query options, key predicates, merge
verbs. Authentication, versions and addressing: test_wire_auth.py."""

import base64
import json
import re
import uuid
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from urllib.parse import unquote

import pytest

from conftest import (
    ACCOUNT,
    JSON_FULL,
    JSON_MINIMAL,
    JSON_NONE,
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
    assert body["Joined"] == "2020-02-29T10:00:00Z"  # no fraction when it is zero, as Azure writes it
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
    assert "Content-Type" not in r.headers
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
# DateTimes as Azure writes them (issue #57, item 9)
# ---------------------------------------------------------------------------

# .NET's "FFFFFFF": up to 7 fractional digits, trailing zeros dropped, no '.' when zero.
AZURE_DATETIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,6}[1-9])?Z")


def test_datetimes_are_not_padded_to_seven_fractional_digits(raw, raw_table):
    # Azure's recorded answers (azure-sdk-for-js, recording_should_createentity_with_datetime.json,
    # recording_should_filter_dates_correctly.json): values come back as stored, unpadded.
    body = {
        "PartitionKey": "dt", "RowKey": "1",
        "Five": "2020-09-17T00:00:00.99999Z", "Five@odata.type": "Edm.DateTime",
        "Whole": "2020-09-17T00:00:00Z", "Whole@odata.type": "Edm.DateTime",
        "Padded": "2020-09-17T00:00:00.1200000Z", "Padded@odata.type": "Edm.DateTime",
    }
    inserted = raw.insert(raw_table, body)
    assert inserted.status_code == 201, inserted.text
    want = {"Five": "2020-09-17T00:00:00.99999Z", "Whole": "2020-09-17T00:00:00Z", "Padded": "2020-09-17T00:00:00.12Z"}
    for accept in (JSON_NONE, JSON_MINIMAL, JSON_FULL):
        got = raw.get_entity(raw_table, "dt", "1", accept=accept).json()
        assert {k: got[k] for k in want} == want, accept
        assert AZURE_DATETIME.fullmatch(got["Timestamp"]), got["Timestamp"]
    assert {k: inserted.json()[k] for k in want} == want
    q = raw.request("GET", f"/{raw_table}()", query={"$filter": "Whole eq datetime'2020-09-17T00:00:00.0000000Z'"})
    assert [{k: e[k] for k in want} for e in q.json()["value"]] == [want]


def test_timestamps_and_their_etags_drop_trailing_zeros_as_azure_writes_them(raw, raw_table):
    # Azure's Timestamps are 7 digits only when the last one is not 0: its answers in
    # azure-sdk-for-js's recording_should_list_by_page.json hold "…36.569405Z", its ETag
    # W/"datetime'…36.569405Z'". One write in ten ends in a zero tick: 100 writes show it.
    stamps = []
    for i in range(100):
        r = raw.insert(raw_table, {"PartitionKey": "ts", "RowKey": f"{i:03d}"}, headers={"Prefer": "return-no-content"})
        assert r.status_code == 204, r.text
        etag = r.headers["ETag"]
        ts = unquote(etag[len("W/\"datetime'"):-2])
        assert AZURE_DATETIME.fullmatch(ts), etag
        stamps.append(ts)
    assert any(len(ts) < 28 for ts in stamps), stamps
    # Reads give the same text, in the Timestamp and odata.etag, and If-Match takes it.
    for e in raw.query_all(raw_table, {"$filter": "PartitionKey eq 'ts'"}):
        ts = stamps[int(e["RowKey"])]
        assert e["Timestamp"] == ts
        assert e["odata.etag"] == etag_for_timestamp(ts)
    short = next(i for i, ts in enumerate(stamps) if len(ts) < 28)
    path = entity_path(raw_table, "ts", f"{short:03d}")
    r = raw.request("MERGE", path, json={"V": 1}, headers={"If-Match": etag_for_timestamp(stamps[short])})
    assert r.status_code == 204, r.text


def test_an_etag_with_the_timestamp_padded_to_seven_digits_still_matches(raw, raw_table):
    # ETags Tafel gave before it dropped trailing zeros name the same instant.
    stamps = {}
    for i in range(100):
        r = raw.insert(raw_table, {"PartitionKey": "old", "RowKey": f"{i:03d}"}, headers={"Prefer": "return-no-content"})
        stamps[f"{i:03d}"] = unquote(r.headers["ETag"][len("W/\"datetime'"):-2])
    rk, ts = next((rk, ts) for rk, ts in stamps.items() if len(ts) < 28)
    whole, _, frac = ts[:-1].partition(".")
    padded = f"{whole}.{frac.ljust(7, '0')}Z"
    r = raw.request("MERGE", entity_path(raw_table, "old", rk), json={"V": 1}, headers={"If-Match": etag_for_timestamp(padded)})
    assert r.status_code == 204, r.text
    stale = raw.request("MERGE", entity_path(raw_table, "old", rk), json={"V": 2}, headers={"If-Match": etag_for_timestamp(padded)})
    assert_error(stale, 412, "UpdateConditionNotSatisfied")
