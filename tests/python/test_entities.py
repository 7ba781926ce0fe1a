"""Entity operations through the Python SDK (and raw HTTP where the SDK hides the wire)."""

import math
import re
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ResourceModifiedError,
    ResourceNotFoundError,
)
from azure.data.tables import EdmType, EntityProperty, UpdateMode

from conftest import (
    JSON_FULL,
    JSON_NONE,
    assert_error,
    bulk_insert,
    entity_path,
    etag_for_timestamp,
    sdk_error_code,
)

UTC = timezone.utc


def parse_ts(ts: str) -> datetime:
    # Azure's form: up to 7 fractional digits, trailing zeros dropped, none when zero.
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,6}[1-9])?Z", ts), ts
    whole, _, frac = ts[:-1].partition(".")
    return datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC, microsecond=int((frac + "000000")[:6]))


# ---------------------------------------------------------------------------
# EDM types through the SDK
# ---------------------------------------------------------------------------


def test_edm_round_trip_sdk(table):
    guid = uuid.UUID("3f2504e0-4f89-11d3-9a0c-0305e82c3301")
    blob = bytes(range(256)) * 3
    entity = {
        "PartitionKey": "types",
        "RowKey": "all",
        "I64Big": EntityProperty(2**53 + 1, EdmType.INT64),
        "I64Max": EntityProperty(2**63 - 1, EdmType.INT64),
        "I64Min": EntityProperty(-(2**63), EdmType.INT64),
        "I64Small": EntityProperty(42, EdmType.INT64),
        "I32Max": 2**31 - 1,
        "I32Min": -(2**31),
        "I32Zero": 0,
        "Dbl": 0.1,
        "DblIntegral": 5.0,
        "DblNeg": -1.5e-7,
        "DblBig": 1.7976931348623157e308,
        "DblTiny": 5e-324,
        "DblNaN": float("nan"),
        "DblInf": float("inf"),
        "DblNegInf": float("-inf"),
        "Bin": blob,
        "Guid": guid,
        "Dt": datetime(2020, 2, 29, 10, 0, 0, 123456, tzinfo=UTC),
        "DtMin": datetime(1601, 1, 1, tzinfo=UTC),
        "DtMax": datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        "DtStr7": EntityProperty("2024-06-04T08:15:30.1234567Z", EdmType.DATETIME),
        "BoolT": True,
        "BoolF": False,
        "Str": "héllo wörld ✓ 日本語 עברית 😀\t\n\"quoted\" \\ back",
        "StrEmpty": "",
        "StrInt": "123",
        "StrDate": "2020-01-01T00:00:00Z",
        "StrGuid": str(guid),
    }
    table.create_entity(entity)
    got = table.get_entity("types", "all")

    for name in ("I64Big", "I64Max", "I64Min", "I64Small"):
        assert isinstance(got[name], EntityProperty), (name, got[name])
        assert got[name].edm_type == EdmType.INT64, name
        assert got[name].value == entity[name].value, name
    for name in ("I32Max", "I32Min", "I32Zero"):
        assert type(got[name]) is int and got[name] == entity[name], name
    for name in ("Dbl", "DblIntegral", "DblNeg", "DblBig", "DblTiny", "DblInf", "DblNegInf"):
        assert type(got[name]) is float, (name, got[name])
        assert got[name] == entity[name], name
    assert type(got["DblNaN"]) is float and math.isnan(got["DblNaN"])
    assert got["Bin"] == blob
    assert got["Guid"] == guid
    assert got["Dt"] == entity["Dt"]
    # Azure's form: trailing zeros of the fraction dropped, no fraction when it is zero.
    assert got["Dt"].tables_service_value == "2020-02-29T10:00:00.123456Z"
    assert got["DtMin"] == entity["DtMin"]
    assert got["DtMin"].tables_service_value == "1601-01-01T00:00:00Z"
    assert got["DtMax"].tables_service_value == "9999-12-31T23:59:59.999999Z"
    assert got["DtStr7"].tables_service_value == "2024-06-04T08:15:30.1234567Z"
    assert got["BoolT"] is True and got["BoolF"] is False
    for name in ("Str", "StrEmpty", "StrInt", "StrDate", "StrGuid"):
        assert type(got[name]) is str and got[name] == entity[name], name

    # Exactly the properties sent, nothing else.
    assert set(got.keys()) == set(entity.keys())

    # Same through a query.
    [queried] = list(table.query_entities("RowKey eq 'all'"))
    assert queried["I64Big"].value == 2**53 + 1
    assert queried["Bin"] == blob
    assert type(queried["DblIntegral"]) is float


def test_edm_annotations_on_the_wire(raw, raw_table):
    body = {
        "PartitionKey": "p",
        "RowKey": "r",
        "I64": "9007199254740993",
        "I64@odata.type": "Edm.Int64",
        "Dbl": 5,
        "Dbl@odata.type": "Edm.Double",
        "Nan": "NaN",
        "Nan@odata.type": "Edm.Double",
        "Dt@odata.type": "Edm.DateTime",  # annotation before the value is allowed on input
        "Dt": "2024-06-04T08:15:30.1234567Z",
        "G": "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
        "G@odata.type": "Edm.Guid",
        "B": "AAECAw==",
        "B@odata.type": "Edm.Binary",
        "I32": 36,
        "S": "x",
        "T": True,
    }
    assert raw.insert(raw_table, body).status_code == 201
    e = raw.get_entity(raw_table, "p", "r").json()
    assert e["I64"] == "9007199254740993" and e["I64@odata.type"] == "Edm.Int64"
    assert e["Dt"] == "2024-06-04T08:15:30.1234567Z" and e["Dt@odata.type"] == "Edm.DateTime"
    assert e["G"] == "3f2504e0-4f89-11d3-9a0c-0305e82c3301" and e["G@odata.type"] == "Edm.Guid"
    assert e["B"] == "AAECAw==" and e["B@odata.type"] == "Edm.Binary"
    assert e["Nan"] == "NaN" and e["Nan@odata.type"] == "Edm.Double"
    # An integral double must stay distinguishable from Int32: 5.0 (or annotated).
    r = raw.get_entity(raw_table, "p", "r")
    assert '"Dbl":5.0' in r.text.replace(" ", "") or e.get("Dbl@odata.type") == "Edm.Double", r.text
    assert e["Dbl"] == 5.0
    assert e["I32"] == 36 and "I32@odata.type" not in e
    assert e["S"] == "x" and "S@odata.type" not in e
    assert e["T"] is True and "T@odata.type" not in e


@pytest.mark.parametrize(
    "sent,stored",
    [
        ("2024-06-04T08:15:30.1234567Z", "2024-06-04T08:15:30.1234567Z"),
        ("2024-06-04T08:15:30.0000001Z", "2024-06-04T08:15:30.0000001Z"),
        ("2024-06-04T08:15:30.5Z", "2024-06-04T08:15:30.5Z"),
        ("2024-06-04T08:15:30.5000000Z", "2024-06-04T08:15:30.5Z"),
        ("2024-06-04T08:15:30Z", "2024-06-04T08:15:30Z"),
        ("1601-01-01T00:00:00Z", "1601-01-01T00:00:00Z"),
        ("1601-01-01T00:00:00.0000000Z", "1601-01-01T00:00:00Z"),
        ("9999-12-31T23:59:59.9999999Z", "9999-12-31T23:59:59.9999999Z"),
        # Azure's own answers in the SDKs' recordings (azure-sdk-for-js,
        # recording_should_createentity_with_datetime.json and
        # recording_should_filter_dates_correctly.json).
        ("2020-09-17T00:00:00.99999Z", "2020-09-17T00:00:00.99999Z"),
        ("2019-07-10T18:59:59.999Z", "2019-07-10T18:59:59.999Z"),
        ("2019-07-10T19:00:00.000Z", "2019-07-10T19:00:00Z"),
    ],
)
def test_datetime_precision_raw(raw, raw_table, sent, stored):
    body = {"PartitionKey": "dt", "RowKey": "x", "D": sent, "D@odata.type": "Edm.DateTime"}
    assert raw.insert(raw_table, body).status_code == 201
    e = raw.get_entity(raw_table, "dt", "x").json()
    assert e["D"] == stored
    assert e["D@odata.type"] == "Edm.DateTime"


def test_null_properties_not_stored(raw, raw_table):
    r = raw.insert(raw_table, {"PartitionKey": "n", "RowKey": "1", "A": None, "B": 1, "C": None})
    assert r.status_code == 201, r.text
    assert "A" not in r.json() and "C" not in r.json()
    for accept in (JSON_NONE, JSON_FULL):
        e = raw.get_entity(raw_table, "n", "1", accept=accept).json()
        assert "A" not in e and "C" not in e and "A@odata.type" not in e, e
        assert e["B"] == 1
    # Merge with a null does not delete the property.
    m = raw.request("MERGE", entity_path(raw_table, "n", "1"), json={"B": None, "D": 2}, headers={"If-Match": "*"})
    assert m.status_code == 204, m.text
    e = raw.get_entity(raw_table, "n", "1").json()
    assert e["B"] == 1 and e["D"] == 2
    # Replace with a null: property absent afterwards.
    p = raw.put(entity_path(raw_table, "n", "1"), json={"B": None, "E": 3}, headers={"If-Match": "*"})
    assert p.status_code == 204, p.text
    e = raw.get_entity(raw_table, "n", "1").json()
    assert "B" not in e and "D" not in e and e["E"] == 3


def test_schemaless_types_per_entity(table):
    table.create_entity({"PartitionKey": "s", "RowKey": "1", "X": 1})
    table.create_entity({"PartitionKey": "s", "RowKey": "2", "X": "one"})
    table.create_entity({"PartitionKey": "s", "RowKey": "3", "X": EntityProperty(1, EdmType.INT64)})
    xs = [e["X"] for e in table.list_entities()]
    assert xs[0] == 1 and type(xs[0]) is int
    assert xs[1] == "one"
    assert xs[2].edm_type == EdmType.INT64 and xs[2].value == 1
    # Merge may change a property's type.
    table.update_entity({"PartitionKey": "s", "RowKey": "1", "X": True}, mode=UpdateMode.MERGE)
    assert table.get_entity("s", "1")["X"] is True


# ---------------------------------------------------------------------------
# Timestamp and ETag
# ---------------------------------------------------------------------------


def test_timestamp_server_managed(raw, raw_table):
    body = {
        "PartitionKey": "ts",
        "RowKey": "1",
        "Timestamp": "2001-01-01T00:00:00.0000000Z",
        "Timestamp@odata.type": "Edm.DateTime",
        "V": 1,
    }
    before = datetime.now(UTC)
    r = raw.insert(raw_table, body)
    assert r.status_code == 201, r.text
    ts = r.json()["Timestamp"]
    assert ts != "2001-01-01T00:00:00.0000000Z"
    when = parse_ts(ts)
    assert before - timedelta(minutes=2) <= when <= datetime.now(UTC) + timedelta(minutes=2), ts
    # A Timestamp sent on update is ignored too.
    body["Timestamp"] = "2002-02-02T00:00:00.0000000Z"
    p = raw.put(entity_path(raw_table, "ts", "1"), json=body, headers={"If-Match": "*"})
    assert p.status_code == 204, p.text
    e = raw.get_entity(raw_table, "ts", "1").json()
    assert e["Timestamp"] != "2002-02-02T00:00:00.0000000Z"
    assert parse_ts(e["Timestamp"]) >= when
    # Timestamp is not a custom property.
    assert list(e).count("Timestamp") == 1


def test_etag_matches_timestamp_and_changes_on_every_write(raw, raw_table):
    path = entity_path(raw_table, "e", "1")
    seen_etags = []
    seen_ts = []

    def check_current(expected_etag=None):
        g = raw.get(path)
        assert g.status_code == 200, g.text
        body = g.json()
        etag = g.headers["ETag"]
        assert body["odata.etag"] == etag
        assert etag == etag_for_timestamp(body["Timestamp"]), (etag, body["Timestamp"])
        if expected_etag is not None:
            assert etag == expected_etag
        return etag, body["Timestamp"]

    r = raw.insert(raw_table, {"PartitionKey": "e", "RowKey": "1", "N": 0})
    assert r.status_code == 201, r.text
    assert r.headers["ETag"] == r.json()["odata.etag"] == etag_for_timestamp(r.json()["Timestamp"])
    etag, ts = check_current(r.headers["ETag"])
    seen_etags.append(etag)
    seen_ts.append(ts)

    writes = [
        lambda i: raw.put(path, json={"N": i}, headers={"If-Match": "*"}),  # update
        lambda i: raw.put(path, json={"N": i}),  # insert-or-replace
        lambda i: raw.request("MERGE", path, json={"N": i}, headers={"If-Match": "*"}),  # merge
        lambda i: raw.request("MERGE", path, json={"N": i}),  # insert-or-merge
        lambda i: raw.request("PATCH", path, json={"N": i}, headers={"If-Match": "*"}),
        lambda i: raw.post(path, json={"N": i}, headers={"If-Match": "*", "X-HTTP-Method": "MERGE"}),
    ]
    # Many writes in quick succession: every one must get a new, increasing Timestamp.
    for i in range(1, 31):
        w = writes[i % len(writes)](i)
        assert w.status_code == 204, (i, w.status_code, w.text)
        etag, ts = check_current(w.headers.get("ETag"))
        seen_etags.append(etag)
        seen_ts.append(ts)
    assert len(set(seen_etags)) == len(seen_etags), "an ETag was reused"
    assert seen_ts == sorted(seen_ts) and len(set(seen_ts)) == len(seen_ts), seen_ts
    assert raw.get(path).json()["N"] == 30


def test_etag_sdk_metadata(table):
    meta = table.create_entity({"PartitionKey": "m", "RowKey": "1", "V": 1})
    got = table.get_entity("m", "1")
    assert got.metadata["etag"] == meta["etag"]
    stamp = got.metadata["timestamp"]
    assert stamp.tables_service_value and etag_for_timestamp(stamp.tables_service_value) == meta["etag"]
    meta2 = table.update_entity({"PartitionKey": "m", "RowKey": "1", "V": 2}, mode=UpdateMode.REPLACE)
    assert meta2["etag"] != meta["etag"]
    assert table.get_entity("m", "1").metadata["etag"] == meta2["etag"]


# ---------------------------------------------------------------------------
# Conditional operations
# ---------------------------------------------------------------------------


def test_if_match_mismatch_sdk(table):
    meta1 = table.create_entity({"PartitionKey": "c", "RowKey": "1", "V": 1})
    meta2 = table.update_entity({"PartitionKey": "c", "RowKey": "1", "V": 2}, mode=UpdateMode.MERGE)
    stale = meta1["etag"]
    assert stale != meta2["etag"]
    for mode in (UpdateMode.REPLACE, UpdateMode.MERGE):
        with pytest.raises(ResourceModifiedError) as ei:
            table.update_entity(
                {"PartitionKey": "c", "RowKey": "1", "V": 99},
                mode=mode,
                etag=stale,
                match_condition=MatchConditions.IfNotModified,
            )
        assert ei.value.status_code == 412
        assert sdk_error_code(ei.value) == "UpdateConditionNotSatisfied"
    with pytest.raises(ResourceModifiedError) as ei:
        table.delete_entity("c", "1", etag=stale, match_condition=MatchConditions.IfNotModified)
    assert ei.value.status_code == 412
    assert sdk_error_code(ei.value) == "UpdateConditionNotSatisfied"
    # Nothing changed.
    got = table.get_entity("c", "1")
    assert got["V"] == 2 and got.metadata["etag"] == meta2["etag"]
    # With the current ETag everything works.
    meta3 = table.update_entity(
        {"PartitionKey": "c", "RowKey": "1", "V": 3},
        mode=UpdateMode.REPLACE,
        etag=meta2["etag"],
        match_condition=MatchConditions.IfNotModified,
    )
    table.delete_entity("c", "1", etag=meta3["etag"], match_condition=MatchConditions.IfNotModified)
    with pytest.raises(ResourceNotFoundError):
        table.get_entity("c", "1")


def test_if_match_raw(raw, raw_table):
    path = entity_path(raw_table, "c", "1")
    r = raw.insert(raw_table, {"PartitionKey": "c", "RowKey": "1", "V": 1})
    stale = r.headers["ETag"]
    u = raw.put(path, json={"V": 2}, headers={"If-Match": "*"})
    assert u.status_code == 204
    current = u.headers["ETag"]
    assert_error(raw.put(path, json={"V": 3}, headers={"If-Match": stale}), 412, "UpdateConditionNotSatisfied")
    assert_error(
        raw.request("MERGE", path, json={"V": 3}, headers={"If-Match": stale}), 412, "UpdateConditionNotSatisfied"
    )
    assert_error(raw.delete(path, headers={"If-Match": stale}), 412, "UpdateConditionNotSatisfied")
    assert raw.get(path).json()["V"] == 2
    m = raw.request("MERGE", path, json={"W": 1}, headers={"If-Match": current})
    assert m.status_code == 204, m.text
    d = raw.delete(path, headers={"If-Match": "*"})
    assert d.status_code == 204, d.text
    assert d.content == b""
    assert_error(raw.get(path), 404, "ResourceNotFound")


def test_conditional_ops_on_missing_entity(raw, raw_table):
    path = entity_path(raw_table, "nope", "nope")
    assert_error(raw.put(path, json={"V": 1}, headers={"If-Match": "*"}), 404, "ResourceNotFound")
    assert_error(raw.request("MERGE", path, json={"V": 1}, headers={"If-Match": "*"}), 404, "ResourceNotFound")
    assert_error(raw.delete(path, headers={"If-Match": "*"}), 404, "ResourceNotFound")
    assert_error(raw.get(path), 404, "ResourceNotFound")
    # Upserts (no If-Match) create it.
    assert raw.put(path, json={"V": 1}).status_code == 204
    assert raw.get(path).json()["V"] == 1


def test_get_missing_entity_sdk(table):
    with pytest.raises(ResourceNotFoundError) as ei:
        table.get_entity("no", "such")
    assert ei.value.status_code == 404
    assert sdk_error_code(ei.value) == "ResourceNotFound"


def test_update_missing_entity_sdk(table):
    for mode in (UpdateMode.REPLACE, UpdateMode.MERGE):
        with pytest.raises(ResourceNotFoundError) as ei:
            table.update_entity({"PartitionKey": "no", "RowKey": "such", "V": 1}, mode=mode)
        assert sdk_error_code(ei.value) == "ResourceNotFound"


def test_insert_existing_entity(table, raw):
    table.create_entity({"PartitionKey": "dup", "RowKey": "1", "V": 1})
    with pytest.raises(ResourceExistsError) as ei:
        table.create_entity({"PartitionKey": "dup", "RowKey": "1", "V": 2})
    assert ei.value.status_code == 409
    assert sdk_error_code(ei.value) == "EntityAlreadyExists"
    assert table.get_entity("dup", "1")["V"] == 1
    assert_error(raw.insert(table.table_name, {"PartitionKey": "dup", "RowKey": "1"}), 409, "EntityAlreadyExists")


def test_missing_table_errors(raw, service):
    missing = "nosuchtable" + uuid.uuid4().hex[:10]
    path = entity_path(missing, "p", "r")
    assert_error(raw.insert(missing, {"PartitionKey": "p", "RowKey": "r"}), 404, "TableNotFound")
    assert_error(raw.get(path), 404, "TableNotFound")
    assert_error(raw.get(f"/{missing}()"), 404, "TableNotFound")
    assert_error(raw.put(path, json={"V": 1}), 404, "TableNotFound")
    assert_error(raw.put(path, json={"V": 1}, headers={"If-Match": "*"}), 404, "TableNotFound")
    assert_error(raw.request("MERGE", path, json={"V": 1}), 404, "TableNotFound")
    assert_error(raw.delete(path, headers={"If-Match": "*"}), 404, "TableNotFound")
    client = service.get_table_client(missing)
    with pytest.raises(ResourceNotFoundError) as ei:
        client.create_entity({"PartitionKey": "p", "RowKey": "r"})
    assert sdk_error_code(ei.value) == "TableNotFound"
    with pytest.raises(ResourceNotFoundError) as ei:
        list(client.list_entities())
    assert sdk_error_code(ei.value) == "TableNotFound"


def test_sdk_delete_entity_missing_is_silent_but_server_says_404(table, raw):
    # The SDK swallows 404 on delete; the server must still answer ResourceNotFound.
    table.delete_entity("gone", "gone")
    assert_error(raw.delete(entity_path(table.table_name, "gone", "gone"), headers={"If-Match": "*"}), 404, "ResourceNotFound")


# ---------------------------------------------------------------------------
# Keys in URLs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pk,rk",
    [
        ("", ""),
        ("a'b", "it''s"),
        ("sp ace", "plus+sign"),
        ("per%cent", "amp&eq=semi;"),
        ("colon:at@", "comma,paren()"),
        ("ünï©ødé", "日本語😀"),
        ("star*", "tilde~!$"),
    ],
)
def test_special_keys_round_trip(table, pk, rk):
    table.create_entity({"PartitionKey": pk, "RowKey": rk, "V": 1})
    got = table.get_entity(pk, rk)
    assert (got["PartitionKey"], got["RowKey"], got["V"]) == (pk, rk, 1)
    table.update_entity({"PartitionKey": pk, "RowKey": rk, "V": 2}, mode=UpdateMode.MERGE)
    table.upsert_entity({"PartitionKey": pk, "RowKey": rk, "W": 3}, mode=UpdateMode.REPLACE)
    got = table.get_entity(pk, rk)
    assert "V" not in got and got["W"] == 3
    assert [(e["PartitionKey"], e["RowKey"]) for e in table.list_entities()] == [(pk, rk)]
    table.delete_entity(pk, rk)
    with pytest.raises(ResourceNotFoundError):
        table.get_entity(pk, rk)


# ---------------------------------------------------------------------------
# Queries: order, paging, $select
# ---------------------------------------------------------------------------


def utf16(s):
    return s.encode("utf-16-be")


def test_query_order_pk_then_rk(raw, raw_table):
    keys = [
        ("b", "a"),
        ("a", "z"),
        ("a", "b"),
        ("ab", ""),
        ("a", ""),
        ("", "x"),
        ("B", "1"),
        ("a b", "m"),
        ("a", "B"),
        ("a", "a0"),
        ("a", "a"),
        ("10", "x"),
        ("9", "x"),
        ("é", "x"),
        ("z", "é"),
        ("z", "z"),
        ("~", "x"),
        # Non-BMP vs. high BMP: UTF-16 code-unit order puts the surrogate pair (D83D..)
        # before U+FF5A, code-point order would not.
        ("😀", "x"),
        ("ｚ", "x"),
        ("z", "😀"),
        ("z", "ｚ"),
    ]
    bulk_insert(raw, raw_table, [{"PartitionKey": pk, "RowKey": rk} for pk, rk in keys], threads=4)
    expected = sorted(keys, key=lambda k: (utf16(k[0]), utf16(k[1])))
    assert expected != sorted(keys)  # the test really distinguishes the two orders
    got = [(e["PartitionKey"], e["RowKey"]) for e in raw.query_all(raw_table)]
    # Ordinal UTF-16 code unit order, PartitionKey first.
    assert got == expected
    # Also with tiny pages.
    got = [(e["PartitionKey"], e["RowKey"]) for e in raw.query_all(raw_table, {"$top": "3"})]
    assert got == expected


def test_paging_2500_entities(raw, table):
    n = 2500
    entities = [
        {"PartitionKey": f"p{i % 3}", "RowKey": f"{i:05d}", "N": i, "Pad": "x" * 50} for i in range(n)
    ]
    bulk_insert(raw, table.table_name, entities)
    expected = sorted((e["PartitionKey"], e["RowKey"]) for e in entities)

    for per_page in (1000, 333):
        pages = [list(p) for p in table.list_entities(results_per_page=per_page).by_page()]
        sizes = [len(p) for p in pages]
        assert all(s <= per_page for s in sizes), sizes
        assert sum(sizes) == n
        keys = [(e["PartitionKey"], e["RowKey"]) for p in pages for e in p]
        assert keys == expected, f"results_per_page={per_page}: order/duplicates wrong"

    # Default page size is capped at 1000.
    sizes = [len(list(p)) for p in table.list_entities().by_page()]
    assert all(s <= 1000 for s in sizes) and sum(sizes) == n, sizes
    assert len(sizes) >= 3

    # A filtered query across partitions, paged.
    got = list(table.query_entities("N ge 1000 and N lt 2200", results_per_page=250))
    assert sorted(e["N"] for e in got) == list(range(1000, 2200))
    assert len({(e["PartitionKey"], e["RowKey"]) for e in got}) == 1200

    # Raw: $top=1000 gives at most 1000 and a continuation.
    r = raw.get(f"/{table.table_name}()", query={"$top": "1000"})
    assert r.status_code == 200
    assert 0 < len(r.json()["value"]) <= 1000
    assert "x-ms-continuation-NextPartitionKey" in r.headers


def test_select(table):
    table.create_entity({"PartitionKey": "s", "RowKey": "1", "A": 1, "B": "b", "C": True})
    table.create_entity({"PartitionKey": "s", "RowKey": "2", "B": "bb"})
    got = list(table.list_entities(select=["A", "B"]))
    assert len(got) == 2
    assert got[0]["A"] == 1 and got[0]["B"] == "b"
    assert "C" not in got[0]
    assert "PartitionKey" not in got[0] and "RowKey" not in got[0]
    assert got[1]["B"] == "bb"
    assert got[1].get("A") is None  # AZ: "A": null; AZT: omitted — both read as absent/None
    assert "C" not in got[1]
    got = list(table.query_entities("RowKey eq '1'", select="RowKey,C"))
    assert len(got) == 1
    assert got[0]["RowKey"] == "1" and got[0]["C"] is True
    assert "A" not in got[0] and "B" not in got[0]
    one = table.get_entity("s", "1", select=["B"])
    assert one["B"] == "b" and "A" not in one and "C" not in one


def test_select_raw_keeps_etag(raw, raw_table):
    raw.insert(raw_table, {"PartitionKey": "s", "RowKey": "1", "A": 1, "B": 2})
    r = raw.get(f"/{raw_table}()", query={"$select": "B"})
    assert r.status_code == 200, r.text
    [e] = r.json()["value"]
    assert e["B"] == 2
    assert "A" not in e and "PartitionKey" not in e and "Timestamp" not in e
    assert e["odata.etag"].startswith("W/\"datetime'")
    r = raw.get(f"/{raw_table}()", query={"$select": " A , PartitionKey "})
    [e] = r.json()["value"]
    assert e["A"] == 1 and e["PartitionKey"] == "s" and "B" not in e and "RowKey" not in e
    r = raw.get(f"/{raw_table}()", query={"$select": "*"})
    [e] = r.json()["value"]
    assert {"PartitionKey", "RowKey", "Timestamp", "A", "B"} <= set(e)


def test_sdk_error_for_http_error_is_typed(table):
    # Sanity: an error the server returns maps onto HttpResponseError with its code.
    with pytest.raises(HttpResponseError) as ei:
        table.create_entity({"PartitionKey": "p", "RowKey": "r", "Bad-Name": 1})
    assert ei.value.status_code == 400
    assert sdk_error_code(ei.value) == "PropertyNameInvalid"


@pytest.mark.parametrize("etag", ['"wrong"', "wrong", "datetime'2015-01-01T23%3A14%3A33.4980000Z'", '"', 'W/"'])
def test_if_match_that_is_not_a_weak_etag_is_invalid_input(raw, raw_table, etag):
    """Azure takes `*` or a weak ETag in If-Match; anything else is malformed (400), not a
    mismatch (412), on every conditional write."""
    path = entity_path(raw_table, "im", "1")
    assert raw.insert(raw_table, {"PartitionKey": "im", "RowKey": "1", "V": 1}).status_code == 201
    assert_error(raw.put(path, json={"V": 2}, headers={"If-Match": etag}), 400, "InvalidInput")
    assert_error(raw.request("MERGE", path, json={"V": 2}, headers={"If-Match": etag}), 400, "InvalidInput")
    assert_error(raw.delete(path, headers={"If-Match": etag}), 400, "InvalidInput")
    assert raw.get_entity(raw_table, "im", "1").json()["V"] == 1


def test_if_match_strong_twin_of_the_current_etag_is_invalid_input(raw, raw_table):
    r = raw.insert(raw_table, {"PartitionKey": "im", "RowKey": "2", "V": 1})
    weak = r.headers["ETag"]
    assert weak.startswith('W/"')
    path = entity_path(raw_table, "im", "2")
    assert_error(raw.put(path, json={"V": 2}, headers={"If-Match": weak[2:]}), 400, "InvalidInput")
    # A weak ETag that does not match is a failed condition, and the current one succeeds.
    stale = 'W/"datetime\'2015-01-01T23%3A14%3A33.4980000Z\'"'
    assert_error(raw.put(path, json={"V": 2}, headers={"If-Match": stale}), 412, "UpdateConditionNotSatisfied")
    assert_error(raw.put(path, json={"V": 2}, headers={"If-Match": "w" + stale[1:]}), 412, "UpdateConditionNotSatisfied")
    assert raw.put(path, json={"V": 3}, headers={"If-Match": weak}).status_code == 204
    # A lowercase `w/` is a weak ETag too (.NET and the older emulator accept it).
    weak = raw.get_entity(raw_table, "im", "2").headers["ETag"]
    assert raw.put(path, json={"V": 4}, headers={"If-Match": "w" + weak[1:]}).status_code == 204
    # Insert takes no If-Match: one sent along is ignored.
    r = raw.insert(raw_table, {"PartitionKey": "im", "RowKey": "3"}, headers={"If-Match": "bogus"})
    assert r.status_code == 201, r.text
