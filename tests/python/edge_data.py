"""Entities at the edges of the data model, and a way to compare tables of them type by
type: what the data tools' round trips (test_transfer, test_backup) move and check."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from azure.data.tables import EdmType, EntityProperty, TableServiceClient

INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)


def edge_entities():
    """Every EDM type at its edges, awkward keys, wide and big entities."""
    yield {
        "PartitionKey": "types", "RowKey": "max",
        "I64": EntityProperty(INT64_MAX, EdmType.INT64), "I32": 2**31 - 1, "D": 1.7976931348623157e308,
        "Whole": EntityProperty(5.0, EdmType.DOUBLE), "B": True, "S": "",
        "When": datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
        "Id": uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e"), "Bin": b"\x00\xff" * 100,
    }
    yield {
        "PartitionKey": "types", "RowKey": "min",
        "I64": EntityProperty(INT64_MIN, EdmType.INT64), "I32": -(2**31), "D": -5e-324,
        "Nan": EntityProperty(float("nan"), EdmType.DOUBLE), "Inf": float("-inf"), "B": False,
        "When": datetime(1601, 1, 1, tzinfo=timezone.utc), "Bin": b"",
    }
    yield {"PartitionKey": "keys", "RowKey": "ünïcödé ✓ 'quoted' 100% & + ; , =", "Ctl": "tab\tnew\nline\x01"}
    yield {"PartitionKey": "", "RowKey": "", "Empty": "keys"}
    yield {"PartitionKey": "wide", "RowKey": "252", **{f"P{i:03d}": i for i in range(252)}}
    yield {"PartitionKey": "big", "RowKey": "64k", "S": "x" * 32_000}  # 64 KB in UTF-16
    yield {"PartitionKey": "big", "RowKey": "1m", **{f"B{i}": bytes([i]) * 60_000 for i in range(16)}}
    for i in range(250):  # more than two changesets in one partition
        yield {"PartitionKey": "many", "RowKey": f"{i:04d}", "N": i}


def ticks(wire: str) -> str:
    """A DateTime as written on the wire, to 100 ns: servers write the same instant with
    different numbers of fraction digits (Azurite six, Azure and Tafel up to seven, trailing
    zeros dropped)."""
    whole, _, fraction = wire.rstrip("Z").partition(".")
    return f"{whole}.{fraction.ljust(7, '0')}Z"


def typed(e) -> dict:
    """An entity's properties as (type, value) pairs, for comparing type by type."""
    out = {}
    for k, v in e.items():
        if isinstance(v, EntityProperty):
            v = (v.edm_type, v.value)
        elif isinstance(v, float) and v != v:
            v = ("nan",)
        elif isinstance(v, datetime):
            v = ("dt", ticks(getattr(v, "tables_service_value", None) or v.isoformat()))
        out[k] = (type(v).__name__, v)
    return out


def table_of(svc: TableServiceClient, table: str) -> dict:
    return {(e["PartitionKey"], e["RowKey"]): typed(e) for e in svc.get_table_client(table).list_entities()}


def as_data(value):
    """The SDK's service-property objects as plain data (their repr shows nothing, so
    comparing reprs compares nothing)."""
    if isinstance(value, (list, tuple)):
        return [as_data(v) for v in value]
    if isinstance(value, dict):
        return {k: as_data(v) for k, v in value.items()}
    if hasattr(value, "__dict__"):
        return {k: as_data(v) for k, v in vars(value).items() if not k.startswith("_")}
    return value


def store_state(conn_strs: dict) -> dict:
    """Everything a server holds, per account (``{account: connection string}``): its
    service properties, and per table its access policies and entities type by type
    with their Timestamps and ETags. What a backup or a snapshot must bring back."""
    out = {}
    for account, conn_str in conn_strs.items():
        with TableServiceClient.from_connection_string(conn_str) as svc:
            tables = {}
            for t in svc.list_tables():
                tc = svc.get_table_client(t.name)
                policies = {k: (v.permission, v.start, v.expiry) if v else None
                            for k, v in tc.get_table_access_policy().items()}
                meta = {(e["PartitionKey"], e["RowKey"]): (e.metadata["timestamp"], e.metadata["etag"])
                        for e in tc.list_entities()}
                tables[t.name] = (policies, table_of(svc, t.name), meta)
            out[account] = (as_data(svc.get_service_properties()), tables)
    return out
