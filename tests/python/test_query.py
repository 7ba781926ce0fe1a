"""$filter semantics (query.md) through the SDK's parameter substitution and raw HTTP."""

import uuid
from datetime import datetime, timezone

import pytest
from azure.data.tables import EdmType, EntityProperty

from conftest import assert_error, bulk_insert

UTC = timezone.utc
G1 = uuid.UUID("3f2504e0-4f89-11d3-9a0c-0305e82c3301")
G2 = uuid.UUID("00000000-0000-0000-0000-000000000001")


@pytest.fixture
def people(table):
    rows = [
        {"PartitionKey": "uk", "RowKey": "01", "Name": "Ada", "Age": 36, "Active": True, "Score": 97.5,
         "Big": EntityProperty(2**40, EdmType.INT64), "Joined": datetime(2020, 2, 29, tzinfo=UTC),
         "Id": G1, "Blob": b"\x00\x01\x02\x03"},
        {"PartitionKey": "uk", "RowKey": "02", "Name": "O'Brien", "Age": 41, "Active": False, "Score": 60.0,
         "Big": EntityProperty(5, EdmType.INT64), "Joined": datetime(2022, 1, 1, tzinfo=UTC),
         "Id": G2, "Blob": b"\xff"},
        {"PartitionKey": "us", "RowKey": "03", "Name": "Bob", "Age": "36", "Active": True},
        {"PartitionKey": "us", "RowKey": "04", "Name": "Cy"},
        {"PartitionKey": "zz", "RowKey": "05", "Name": "Dee", "Age": 20, "Score": float("nan")},
    ]
    for r in rows:
        table.create_entity(r)
    return table


def keys(entities):
    return [e["RowKey"] for e in entities]


@pytest.mark.parametrize(
    "flt,params,expected",
    [
        ("PartitionKey eq @pk", {"pk": "uk"}, ["01", "02"]),
        ("PartitionKey eq 'uk' and RowKey eq '02'", None, ["02"]),
        ("RowKey ge '02' and RowKey lt '04'", None, ["02", "03"]),
        ("'02' lt RowKey", None, ["03", "04", "05"]),
        ("Name eq @n", {"n": "O'Brien"}, ["02"]),
        ("Age eq 36", None, ["01"]),  # Int32 only: the String "36" does not match
        ("Age eq '36'", None, ["03"]),
        ("Age ne 36", None, ["02", "05"]),  # missing property never matches, not even ne
        ("not (Age eq 36)", None, ["02", "03", "04", "05"]),
        ("Age gt 30 and Age le 41", None, ["01", "02"]),
        ("Age lt 25 or Name eq 'Cy'", None, ["04", "05"]),
        ("(Age eq 20 or Age eq 41) and PartitionKey ne 'zz'", None, ["02"]),
        ("Age eq 20 or Age eq 41 and PartitionKey ne 'zz'", None, ["02", "05"]),  # and binds tighter
        ("Active eq true", None, ["01", "03"]),
        ("Active", None, ["01", "03"]),
        ("not Active", None, ["02", "04", "05"]),
        ("Score gt 90.0", None, ["01"]),
        ("Score ge 60.0 and Score le 60.0", None, ["02"]),
        ("Big gt @v", {"v": 2**33}, ["01"]),
        ("Big eq 5L", None, ["02"]),
        ("Big eq 5", None, []),  # Int32 literal vs Int64 property: exact type match
        ("Joined lt @d", {"d": datetime(2021, 1, 1, tzinfo=UTC)}, ["01"]),
        ("Joined ge datetime'2021-01-01T00:00:00Z'", None, ["02"]),
        ("Id eq @g", {"g": G1}, ["01"]),
        ("Id eq guid'00000000-0000-0000-0000-000000000001'", None, ["02"]),
        ("Blob eq @b", {"b": b"\x00\x01\x02\x03"}, ["01"]),
        ("Blob eq binary'ff'", None, ["02"]),
        ("Missing eq 'x'", None, []),
    ],
)
def test_filter_semantics(people, flt, params, expected):
    got = list(people.query_entities(flt, parameters=params) if params else people.query_entities(flt))
    assert keys(got) == expected, flt


def test_filter_timestamp(table):
    table.create_entity({"PartitionKey": "t", "RowKey": "1"})
    e = table.get_entity("t", "1")
    ts = e.metadata["timestamp"].tables_service_value
    assert keys(table.query_entities(f"Timestamp ge datetime'{ts}'")) == ["1"]
    assert keys(table.query_entities(f"Timestamp gt datetime'{ts}'")) == []
    assert keys(table.query_entities("Timestamp lt datetime'2000-01-01T00:00:00Z'")) == []


def test_filter_long_or_chain(raw, table):
    bulk_insert(raw, table.table_name, [{"PartitionKey": "p", "RowKey": f"{i:04d}", "N": i} for i in range(300)], threads=8)
    wanted = list(range(0, 300, 2))  # 150 comparisons
    flt = " or ".join(f"RowKey eq '{i:04d}'" for i in wanted)
    got = list(table.query_entities(flt))
    assert [e["N"] for e in got] == wanted


def test_filter_with_paging(raw, table):
    bulk_insert(raw, table.table_name, [{"PartitionKey": f"p{i % 5}", "RowKey": f"{i:04d}", "N": i} for i in range(600)], threads=8)
    pages = [list(p) for p in table.query_entities("N ge 100 and N lt 550", results_per_page=70).by_page()]
    assert all(len(p) <= 70 for p in pages)
    got = sorted(e["N"] for p in pages for e in p)
    assert got == list(range(100, 550))


@pytest.mark.parametrize(
    "flt",
    [
        "Name eq",
        "Name eq 'unterminated",
        "(Name eq 'a'",
        "Name eqq 'a'",
        "Age eq 99999999999",  # Int32 literal overflow without L
        "Joined eq datetime'not-a-date'",
    ],
)
def test_filter_syntax_errors(raw, raw_table, flt):
    r = raw.get(f"/{raw_table}()", query={"$filter": flt})
    assert_error(r, 400, "InvalidInput")


@pytest.mark.parametrize("flt", ["startswith(Name,'A')", "Age add 1 eq 2", "length(Name) eq 3"])
def test_filter_unsupported_functions(raw, raw_table, flt):
    r = raw.get(f"/{raw_table}()", query={"$filter": flt})
    assert r.status_code in (400, 501), (r.status_code, r.text)
    assert_error(r, (400, 501), {"InvalidInput", "NotImplemented"})


@pytest.mark.parametrize("option", ["$orderby", "$skip", "$expand"])
def test_unsupported_query_options(raw, raw_table, option):
    r = raw.get(f"/{raw_table}()", query={option: "RowKey" if option != "$skip" else "1"})
    # AZ: 501 NotImplemented; AZT ignores them. Either way no crash and no wrong data.
    if r.status_code == 200:
        assert r.json()["value"] == []
    else:
        assert_error(r, (400, 501), {"NotImplemented", "UnsupportedQueryParameter", "InvalidInput"})


def test_entities_with_long_values_filter_select_and_merge_like_any_other(table):
    """Entities carrying long strings and binaries next to short properties: filters
    on either kind, $select, property order, merges that make a value short or long
    again, and paging over a mix of entities with and without long values."""
    long_a, long_b = "a" * 300 + "é", "b" * 70
    blob = bytes(range(256)) * 2
    rows = []
    for i in range(60):
        e = {"PartitionKey": "p", "RowKey": f"{i:03d}", "N": i, "Short": f"s{i % 4}"}
        if i % 2:
            e.update({"Long": long_a if i % 3 else long_b, "Blob": blob, "After": i * 10})
        rows.append(e)
    for e in rows:
        table.create_entity(e)

    def rks(flt, **kw):
        return [e["RowKey"] for e in table.query_entities(flt, **kw)]

    odd = [f"{i:03d}" for i in range(60) if i % 2]
    assert rks("Short eq 's1'") == [f"{i:03d}" for i in range(60) if i % 4 == 1]
    assert rks("After ge 0") == odd
    assert rks("Long eq @v", parameters={"v": long_a}) == [f"{i:03d}" for i in range(60) if i % 2 and i % 3]
    assert rks("Long eq @v or N eq 0", parameters={"v": long_b}) == ["000"] + [
        f"{i:03d}" for i in range(60) if i % 2 and not i % 3
    ]
    assert rks("Long gt 'a' and N lt 10") == ["001", "003", "005", "007", "009"]
    assert rks("Blob eq X'0001'") == []
    assert rks("not (Long eq 'x')") == [f"{i:03d}" for i in range(60)]  # `not` of a missing property's false

    got = table.get_entity("p", "001")
    assert list(got.keys()) == ["PartitionKey", "RowKey", "N", "Short", "Long", "Blob", "After"]
    assert (got["Long"], got["Blob"], got["After"]) == (long_a, blob, 10)
    page = list(table.query_entities("N lt 4", select=["Long", "N"]))
    assert [(e.get("Long"), e["N"]) for e in page] == [(None, 0), (long_a, 1), (None, 2), (long_b, 3)]

    # A merge that shortens the long value, then one that makes another one long.
    table.update_entity({"PartitionKey": "p", "RowKey": "001", "Long": "now short"}, mode="merge")
    table.update_entity({"PartitionKey": "p", "RowKey": "002", "Text": "t" * 400}, mode="merge")
    got = table.get_entity("p", "001")
    assert (got["Long"], got["Blob"], got["After"]) == ("now short", blob, 10)
    assert table.get_entity("p", "002")["Text"] == "t" * 400
    assert rks("Long eq 'now short'") == ["001"]
    assert rks("Text eq @t", parameters={"t": "t" * 400}) == ["002"]

    # Paging with a small page size through both kinds returns each row once.
    pages = table.query_entities("N ge 0", results_per_page=7).by_page()
    seen = [e["RowKey"] for p in pages for e in p]
    assert seen == [f"{i:03d}" for i in range(60)]


def test_boolean_literal_filters_select_all_or_nothing(raw, raw_table, service):
    """`$filter=false` is how health checks (AspNetCore.HealthChecks.Azure.Data.Tables, used
    by .NET Aspire) probe the table list and a table without reading rows; Azure answers
    it, as it does `true` and combinations of the two."""
    for i in range(3):
        assert raw.insert(raw_table, {"PartitionKey": "p", "RowKey": str(i)}).status_code == 201
    for flt, want in [("false", []), ("true", ["0", "1", "2"]), ("not false and (true or false)", ["0", "1", "2"])]:
        r = raw.get(f"/{raw_table}()", query={"$filter": flt})
        assert r.status_code == 200, r.text
        assert [e["RowKey"] for e in r.json()["value"]] == want, flt
    r = raw.get("/Tables", query={"$filter": "false"})
    assert r.status_code == 200 and r.json()["value"] == [], r.text
    # Through the SDK, as the health check does it.
    assert list(service.get_table_client(raw_table).query_entities("false")) == []
    assert list(service.query_tables("false")) == []
