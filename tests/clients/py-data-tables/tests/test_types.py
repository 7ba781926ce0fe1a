"""All eight EDM types round-trip exactly, including the ones JSON cannot carry by itself."""

import math
import uuid
from datetime import datetime, timezone

from azure.data.tables import EdmType, EntityProperty, UpdateMode

from conftest import value

DT = datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=timezone.utc)


def test_every_edm_type_round_trips(table):
    entity = {
        "PartitionKey": "t",
        "RowKey": "1",
        "Str": "Zoë 東京 'quoted' + & # %",
        "Int32": -2147483648,
        "Int64": EntityProperty(2**53 + 1, EdmType.INT64),
        "Int64Min": EntityProperty(-(2**63), EdmType.INT64),
        "Double": 1.5e300,
        "WholeDouble": EntityProperty(2.0, EdmType.DOUBLE),
        "Bool": False,
        "When": DT,
        "Id": uuid.UUID("12345678-1234-5678-9abc-def012345678"),
        "Bytes": bytes(range(256)),
    }
    table.create_entity(entity)
    got = table.get_entity("t", "1")
    assert got["Str"] == entity["Str"]
    assert got["Int32"] == -2147483648 and isinstance(got["Int32"], int)
    assert value(got["Int64"]) == 2**53 + 1
    assert value(got["Int64Min"]) == -(2**63)
    assert got["Double"] == 1.5e300
    assert got["WholeDouble"] == 2.0 and isinstance(got["WholeDouble"], float)
    assert got["Bool"] is False
    assert got["When"] == DT
    assert got["Id"] == entity["Id"]
    assert got["Bytes"] == entity["Bytes"]


def test_a_datetime_with_seven_fractional_digits_keeps_all_seven(table):
    table.create_entity(
        {"PartitionKey": "t", "RowKey": "7", "When": EntityProperty("2024-01-02T03:04:05.1234567Z", EdmType.DATETIME)}
    )
    got = table.get_entity("t", "7")
    assert got["When"].tables_service_value == "2024-01-02T03:04:05.1234567Z"
    # Writing the entity back as read keeps the digits Python's datetime cannot hold.
    table.update_entity(got, mode=UpdateMode.REPLACE)
    assert table.get_entity("t", "7")["When"].tables_service_value == "2024-01-02T03:04:05.1234567Z"


def test_special_doubles_round_trip(table):
    table.create_entity({"PartitionKey": "t", "RowKey": "d", "Nan": math.nan, "Inf": math.inf, "NegInf": -math.inf})
    got = table.get_entity("t", "d")
    assert math.isnan(got["Nan"])
    assert got["Inf"] == math.inf and got["NegInf"] == -math.inf


def test_timestamp_is_the_servers_and_the_etag_follows_it(table):
    table.create_entity({"PartitionKey": "t", "RowKey": "ts"})
    got = table.get_entity("t", "ts")
    stamp = got.metadata["timestamp"]
    assert stamp.tzinfo is not None
    assert abs((datetime.now(timezone.utc) - stamp).total_seconds()) < 300
    assert "datetime'" in got.metadata["etag"]
