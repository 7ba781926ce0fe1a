"""Tables and entities through the legacy TableService: quickstart, every EDM type in each
payload format, filters, $select, writes with ETags."""

import uuid
from datetime import datetime, timezone

import pytest
from azure.common import AzureConflictHttpError, AzureMissingResourceHttpError
from azure.cosmosdb.table.models import EdmType, EntityProperty, TablePayloadFormat

from conftest import RUN, refused


def test_quickstart(service, table):
    # exists() is GET /Tables('name'): 200 with the table, or 404.
    assert service.exists(table)
    assert not service.exists(table + "missing")
    assert not service.create_table(table)  # already there: False, no exception
    with pytest.raises(AzureConflictHttpError):
        service.create_table(table, fail_on_exist=True)
    service.insert_entity(table, {"PartitionKey": "people", "RowKey": "1", "Name": "Ada", "Age": 36})
    service.insert_entity(table, {"PartitionKey": "people", "RowKey": "2", "Name": "Alan", "Age": 41})
    got = service.get_entity(table, "people", "1")
    assert (got.Name, got.Age) == ("Ada", 36)
    # The legacy SDK writes every Python int as Edm.Int64, and Azure compares only values of
    # the same type: an Int64 property needs an `L` literal.
    assert list(service.query_entities(table, filter="Age gt 38")) == []
    rows = list(service.query_entities(table, filter="PartitionKey eq 'people' and Age gt 38L"))
    assert [r.Name for r in rows] == ["Alan"]
    service.delete_entity(table, "people", "1")
    with pytest.raises(AzureMissingResourceHttpError):
        service.get_entity(table, "people", "1")
    assert refused(lambda: service.insert_entity(table, {"PartitionKey": "people", "RowKey": "2"}), 409) == "EntityAlreadyExists"


def test_tables_are_listed_and_deleted(service):
    names = [f"legl{RUN}a", f"legl{RUN}b"]
    for n in names:
        service.create_table(n)
    listed = [t.name for t in service.list_tables() if t.name.startswith(f"legl{RUN}")]
    assert listed == names
    for n in names:
        assert service.delete_table(n)
    assert not service.delete_table(names[0])  # missing: False, no exception
    assert not service.exists(names[0])


TYPED = {
    "PartitionKey": "t",
    "RowKey": "1",
    "Str": "Zoë 東京 'quoted' + & # %",
    "Int32": -2147483648,
    "Int64": EntityProperty(EdmType.INT64, 2**53 + 1),
    "Double": 1.5e300,
    "Bool": False,
    # The legacy SDK writes DateTime to the second (no fraction).
    "When": datetime(2024, 2, 29, 23, 59, 58, tzinfo=timezone.utc),
    "Id": EntityProperty(EdmType.GUID, uuid.UUID("12345678-1234-5678-9abc-def012345678")),
    "Bytes": EntityProperty(EdmType.BINARY, bytes(range(256))),
}


def typed_value(v):
    return v.value if isinstance(v, EntityProperty) else v


def test_every_edm_type_round_trips_with_full_and_minimal_metadata(service, table):
    service.insert_entity(table, TYPED)
    for accept in (TablePayloadFormat.JSON_MINIMAL_METADATA, TablePayloadFormat.JSON_FULL_METADATA):
        got = service.get_entity(table, "t", "1", accept=accept)
        assert got.Str == TYPED["Str"]
        assert got.Int32 == -2147483648
        assert got.Int64 == 2**53 + 1
        assert got.Double == 1.5e300
        assert got.Bool is False
        assert got.When == TYPED["When"]
        assert got.Id.type == EdmType.GUID and str(got.Id.value) == str(TYPED["Id"].value)
        assert got.Bytes.type == EdmType.BINARY and got.Bytes.value == bytes(range(256))
        assert got.etag.startswith('W/"datetime')


def test_no_metadata_needs_a_property_resolver_and_then_round_trips(service, table):
    service.insert_entity(table, TYPED)
    types = {"Int64": EdmType.INT64, "When": EdmType.DATETIME, "Id": EdmType.GUID, "Bytes": EdmType.BINARY}
    got = list(
        service.query_entities(
            table,
            accept=TablePayloadFormat.JSON_NO_METADATA,
            property_resolver=lambda pk, rk, name, value, edm: types.get(name, edm),
        )
    )[0]
    assert got.Int64 == 2**53 + 1
    assert got.When == TYPED["When"]
    assert typed_value(got.Bytes) == bytes(range(256))
    assert got.Str == TYPED["Str"] and got.Bool is False and got.Double == 1.5e300


AWKWARD = ["with space", "it's quoted", "a+b", "x&y=z", "#hash", "100%", "%2B encoded", "Zoë 東京", ""]


@pytest.fixture
def rows(service, table):
    for i, s in enumerate(AWKWARD):
        service.insert_entity(
            table,
            {
                "PartitionKey": "f",
                "RowKey": f"{i:02}",
                "S": s,
                "I": i,
                "L": EntityProperty(EdmType.INT64, 2**40 + i),
                "D": i + 0.5,
                "B": i % 2 == 0,
                "T": datetime(2020, 1, 1 + i, tzinfo=timezone.utc),
                "G": EntityProperty(EdmType.GUID, uuid.UUID(int=i)),
                "X": EntityProperty(EdmType.BINARY, bytes([i, 255])),
            },
        )
    return table


def keys(entities):
    return [e.RowKey for e in entities]


def test_string_filters_with_awkward_values(service, rows):
    # The legacy SDK sends the filter form-encoded: spaces as '+', a literal '+' as %2B.
    for i, s in enumerate(AWKWARD):
        quoted = s.replace("'", "''")
        assert keys(service.query_entities(rows, filter=f"S eq '{quoted}'")) == [f"{i:02}"], s


def test_filters_on_every_type(service, rows):
    cases = {
        "I ge 7L": ["07", "08"],
        f"L eq {2**40 + 3}L": ["03"],
        "D lt 1.6": ["00", "01"],
        "B eq false and I lt 4L": ["01", "03"],
        "T ge datetime'2020-01-08T00:00:00Z'": ["07", "08"],
        f"G eq guid'{uuid.UUID(int=5)}'": ["05"],
        "X eq X'04ff'": ["04"],
        "PartitionKey eq 'f' and RowKey gt '06'": ["07", "08"],
        "not (I lt 8L)": ["08"],
    }
    for flt, want in cases.items():
        assert keys(service.query_entities(rows, filter=flt)) == want, flt


def test_select_returns_only_the_named_properties(service, rows):
    got = list(service.query_entities(rows, filter="I eq 3L", select="S,I"))
    assert len(got) == 1
    assert {k for k in got[0] if k != "etag"} == {"S", "I"}
    assert got[0].S == "x&y=z"


def test_upserts_merge_and_replace(service, table):
    service.insert_or_replace_entity(table, {"PartitionKey": "p", "RowKey": "1", "A": 1, "B": 2})
    service.insert_or_merge_entity(table, {"PartitionKey": "p", "RowKey": "1", "C": 3})
    got = service.get_entity(table, "p", "1")
    assert (got.A, got.B, got.C) == (1, 2, 3)
    service.insert_or_replace_entity(table, {"PartitionKey": "p", "RowKey": "1", "D": 4})
    got = service.get_entity(table, "p", "1")
    assert "A" not in got and got.D == 4
    service.merge_entity(table, {"PartitionKey": "p", "RowKey": "1", "E": 5})
    service.update_entity(table, {"PartitionKey": "p", "RowKey": "1", "F": 6})
    got = service.get_entity(table, "p", "1")
    assert "E" not in got and got.F == 6
    assert refused(lambda: service.merge_entity(table, {"PartitionKey": "p", "RowKey": "none"}), 404) == "ResourceNotFound"


def test_etags_match_and_mismatch(service, table):
    # The SDK rebuilds each entity's ETag from its Timestamp (W/"datetime'<quoted>'"),
    # and sends it back in If-Match with the colons percent-encoded.
    etag = service.insert_entity(table, {"PartitionKey": "p", "RowKey": "e", "V": 1})
    assert service.get_entity(table, "p", "e").etag == etag
    new = service.update_entity(table, {"PartitionKey": "p", "RowKey": "e", "V": 2}, if_match=etag)
    assert refused(lambda: service.merge_entity(table, {"PartitionKey": "p", "RowKey": "e", "V": 3}, if_match=etag), 412) == (
        "UpdateConditionNotSatisfied"
    )
    assert refused(lambda: service.update_entity(table, {"PartitionKey": "p", "RowKey": "e"}, if_match=etag), 412) == (
        "UpdateConditionNotSatisfied"
    )
    assert refused(lambda: service.delete_entity(table, "p", "e", if_match=etag), 412) == "UpdateConditionNotSatisfied"
    read = service.get_entity(table, "p", "e")
    assert read.V == 2 and read.etag == new
    service.merge_entity(table, {"PartitionKey": "p", "RowKey": "e", "W": 3}, if_match=read.etag)
    service.delete_entity(table, "p", "e", if_match=service.get_entity(table, "p", "e").etag)
    assert refused(lambda: service.delete_entity(table, "p", "e"), 404) == "ResourceNotFound"
