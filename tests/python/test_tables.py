"""Table operations: naming rules, case handling, create/delete errors, Query Tables paging."""

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.core.exceptions import ResourceExistsError

from conftest import JSON_FULL, JSON_NONE, assert_error, sdk_error_code, unique_table_name


def uid(n=8):
    return uuid.uuid4().hex[:n]


def list_table_names(raw, prefix, top=None):
    """All table names with the given prefix, following NextTableName; returns the pages."""
    query = {"$filter": f"TableName ge '{prefix}' and TableName lt '{prefix}{{'"}
    if top is not None:
        query["$top"] = str(top)
    pages = []
    token = None
    for _ in range(10000):
        q = dict(query)
        if token is not None:
            q["NextTableName"] = token
        r = raw.get("/Tables", query=q)
        assert r.status_code == 200, (r.status_code, r.text)
        pages.append([t["TableName"] for t in r.json()["value"]])
        token = r.headers.get("x-ms-continuation-NextTableName")
        if token is None:
            return pages
    raise AssertionError("NextTableName never ended")


# ---------------------------------------------------------------------------
# Name rules: ^[A-Za-z][A-Za-z0-9]{2,62}$, not "tables"
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind",
    ["3 chars", "63 chars", "digits after first", "mixed case"],
)
def test_valid_table_names(raw, kind):
    for _ in range(50):
        u = "x" + uid(10)
        name = {
            "3 chars": "Q" + uid(2),
            "63 chars": ("Lng" + u + "z" * 63)[:63],
            "digits after first": "a1" + uid(12),
            "mixed case": "MiXeD" + u,
        }[kind]
        r = raw.create_table(name)
        if r.status_code != 409:  # a random 3-char name may already exist: try another
            break
    assert len(name) == {"3 chars": 3, "63 chars": 63}.get(kind, len(name))
    assert r.status_code == 201, (name, r.status_code, r.text)
    assert r.json()["TableName"] == name
    try:
        assert name in sum(list_table_names(raw, name), [])
    finally:
        d = raw.delete_table(name)
        assert d.status_code == 204, (d.status_code, d.text)


@pytest.mark.parametrize("length", [1, 2, 64, 100])
def test_table_name_length_out_of_range(raw, length):
    name = ("abc" + uid(16) + "q" * 100)[:length]
    r = raw.create_table(name)
    assert_error(r, 400, "OutOfRangeInput")


@pytest.mark.parametrize(
    "name",
    [
        "1abcdef",  # leading digit
        "ab-cdef",  # dash
        "ab_cdef",  # underscore
        "abc def",  # space
        "abcdé12",  # non-ASCII letter
        "tables",
        "Tables",
        "TABLES",
        "tAbLeS",
    ],
)
def test_table_name_invalid(raw, name):
    r = raw.create_table(name)
    assert_error(r, 400, "InvalidResourceName")


def test_create_existing_table_conflicts(raw, raw_table):
    r = raw.create_table(raw_table)
    assert_error(r, 409, "TableAlreadyExists")


def test_table_names_case_insensitive_unique_case_preserved(raw):
    base = "CaseTest" + uid(10)
    r = raw.create_table(base)
    assert r.status_code == 201, r.text
    try:
        for variant in (base.lower(), base.upper(), base.swapcase()):
            assert_error(raw.create_table(variant), 409, "TableAlreadyExists")
        # Listing returns the original casing, exactly once.
        listed = sum(list_table_names(raw, "CaseTest"), [])
        assert listed.count(base) == 1
        assert base.lower() not in listed and base.upper() not in listed
        # Entity operations address the table case-insensitively.
        ins = raw.insert(base.lower(), {"PartitionKey": "p", "RowKey": "r", "V": 1})
        assert ins.status_code == 201, ins.text
        got = raw.get_entity(base.upper(), "p", "r")
        assert got.status_code == 200, got.text
        assert got.json()["V"] == 1
    finally:
        # Delete with a different casing deletes the table.
        d = raw.delete_table(base.lower())
        assert d.status_code == 204, (d.status_code, d.text)
    assert base not in sum(list_table_names(raw, "CaseTest"), [])
    assert_error(raw.delete_table(base), 404, "TableNotFound")


def test_delete_missing_table(raw):
    assert_error(raw.delete_table("missing" + uid(12)), 404, "TableNotFound")


def test_delete_table_twice(raw, table_name):
    assert raw.create_table(table_name).status_code == 201
    assert raw.delete_table(table_name).status_code == 204
    assert_error(raw.delete_table(table_name), 404, "TableNotFound")


def test_delete_table_removes_entities(raw, table_name):
    assert raw.create_table(table_name).status_code == 201
    for i in range(3):
        assert raw.insert(table_name, {"PartitionKey": "p", "RowKey": str(i)}).status_code == 201
    assert raw.delete_table(table_name).status_code == 204
    assert_error(raw.get_entity(table_name, "p", "0"), 404, "TableNotFound")
    assert_error(raw.get(f"/{table_name}()"), 404, "TableNotFound")
    assert_error(raw.insert(table_name, {"PartitionKey": "p", "RowKey": "x"}), 404, "TableNotFound")
    # A new table with the same name starts empty.
    assert raw.create_table(table_name).status_code == 201
    try:
        r = raw.get(f"/{table_name}()")
        assert r.status_code == 200
        assert r.json()["value"] == []
    finally:
        raw.delete_table(table_name)


def test_create_table_missing_name(raw):
    r = raw.post("/Tables", json={})
    assert_error(r, 400, {"PropertiesNeedValue", "TableNameEmpty", "InvalidInput"})


def test_create_table_body_not_json(raw):
    r = raw.post("/Tables", body="{not json", content_type="application/json")
    assert_error(r, 400, "InvalidInput")


def test_create_table_extra_properties_ignored(raw, table_name):
    r = raw.post("/Tables", json={"TableName": table_name, "Extra": "ignored"})
    assert r.status_code == 201, r.text
    try:
        assert r.json()["TableName"] == table_name
        assert "Extra" not in r.json()
    finally:
        raw.delete_table(table_name)


def test_create_table_bodies_per_metadata_level(raw):
    full = unique_table_name("full")
    none = unique_table_name("none")
    try:
        r = raw.create_table(full, accept=JSON_FULL)
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["TableName"] == full
        assert body["odata.metadata"].endswith("/$metadata#Tables/@Element")
        assert body["odata.type"] == "devstoreaccount1.Tables"
        assert body["odata.id"].endswith(f"Tables('{full}')")
        assert body["odata.editLink"] == f"Tables('{full}')"
        r = raw.create_table(none, accept=JSON_NONE)
        assert r.status_code == 201, r.text
        assert r.json() == {"TableName": none}
    finally:
        raw.delete_table(full)
        raw.delete_table(none)


# ---------------------------------------------------------------------------
# Query Tables
# ---------------------------------------------------------------------------


def test_query_tables_filter_eq(raw, raw_table):
    r = raw.get("/Tables", query={"$filter": f"TableName eq '{raw_table}'"})
    assert r.status_code == 200, r.text
    assert r.json()["value"] == [{"TableName": raw_table}]
    assert "x-ms-continuation-NextTableName" not in r.headers
    r = raw.get("/Tables", query={"$filter": "TableName eq 'nosuch" + uid(12) + "'"})
    assert r.status_code == 200, r.text
    assert r.json()["value"] == []


def test_query_tables_paging_top2(raw):
    prefix = "Pg" + uid(10)
    names = [f"{prefix}{c}" for c in ("e", "A", "c", "b", "D", "a9", "a1")]
    for n in names:
        assert raw.create_table(n).status_code == 201
    try:
        pages = list_table_names(raw, prefix, top=2)
        assert all(len(p) <= 2 for p in pages), pages
        assert len(pages) >= 4, pages
        flat = sum(pages, [])
        # Each table exactly once (order: see test_query_tables_order_is_ordinal).
        assert sorted(flat) == sorted(names) and len(flat) == len(names), flat
        # Same via percent-encoded option names.
        r = raw.get(
            "/Tables",
            query=[
                ("%24filter", f"TableName ge '{prefix}' and TableName lt '{prefix}{{'"),
                ("%24top", "3"),
            ],
        )
        assert r.status_code == 200, r.text
        got = [t["TableName"] for t in r.json()["value"]]
        assert len(got) == 3 and set(got) <= set(names), got
        assert "x-ms-continuation-NextTableName" in r.headers
    finally:
        for n in names:
            raw.delete_table(n)


def test_query_tables_order_is_ordinal(raw):
    """operations.md §1 / query.md: tables are listed in ordinal order of the stored
    (original-case) name: upper-case letters sort before lower-case ones."""
    prefix = "Ord" + uid(10)
    names = [f"{prefix}{c}" for c in ("e", "A", "c", "b", "D", "a9", "a1")]
    for n in names:
        assert raw.create_table(n).status_code == 201
    try:
        flat = sum(list_table_names(raw, prefix), [])
        assert flat == sorted(names), flat  # A, D, a1, a9, b, c, e
        flat = sum(list_table_names(raw, prefix, top=3), [])
        assert flat == sorted(names), flat
    finally:
        for n in names:
            raw.delete_table(n)


@pytest.mark.parametrize("top", ["0", "1001", "-1", "abc"])
def test_query_tables_bad_top(raw, top):
    r = raw.get("/Tables", query={"$top": top})
    assert r.status_code == 400, (r.status_code, r.text)
    assert_error(r, 400, {"InvalidInput", "OutOfRangeInput", "InvalidQueryParameterValue"})


def test_query_tables_more_than_1000(raw):
    """1,005 tables: no page exceeds 1,000 and continuation returns every table once."""
    prefix = "Many" + uid(8)
    names = [f"{prefix}{i:04d}" for i in range(1005)]

    def create(n):
        r = raw.create_table(n, headers={"Prefer": "return-no-content"})
        return r.status_code

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(create, names))
    try:
        assert statuses == [204] * len(names)
        pages = list_table_names(raw, prefix)
        assert all(len(p) <= 1000 for p in pages), [len(p) for p in pages]
        assert len(pages) >= 2
        assert sum(pages, []) == names
    finally:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: raw.delete_table(n).status_code, names))
    assert sum(list_table_names(raw, prefix), []) == []


def test_sdk_create_existing_raises(service, table):
    with pytest.raises(ResourceExistsError) as ei:
        service.create_table(table.table_name)
    assert sdk_error_code(ei.value) == "TableAlreadyExists"
    assert ei.value.status_code == 409
