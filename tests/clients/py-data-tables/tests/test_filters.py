"""Filters on every type, with the SDK's own parameter escaping for awkward string values."""

import uuid
from datetime import datetime, timezone

import pytest
from azure.data.tables import EdmType, EntityProperty

AWKWARD = [
    "with space",
    "it's quoted",
    "a+b",
    "x&y=z",
    "#hash",
    "100%",
    "%2B encoded",
    "Zoë 東京",
    "",
]


@pytest.fixture
def rows(table):
    for i, s in enumerate(AWKWARD):
        table.create_entity(
            {
                "PartitionKey": "f",
                "RowKey": f"{i:02}",
                "S": s,
                "I": i,
                "L": EntityProperty(2**40 + i, EdmType.INT64),
                "D": i + 0.5,
                "B": i % 2 == 0,
                "T": datetime(2020, 1, 1 + i, tzinfo=timezone.utc),
                "G": uuid.UUID(int=i),
                "X": bytes([i, 255]),
            }
        )
    return table


def keys(entities):
    return [e["RowKey"] for e in entities]


@pytest.mark.parametrize("i", range(len(AWKWARD)))
def test_string_equality_with_awkward_values(rows, i):
    got = rows.query_entities("S eq @s", parameters={"s": AWKWARD[i]})
    assert keys(got) == [f"{i:02}"]


def test_a_literal_filter_with_plus_and_spaces(rows):
    assert keys(rows.query_entities("S eq 'a+b' or S eq 'with space'")) == ["00", "02"]


def test_filters_on_every_type(rows):
    cases = {
        "I ge 7": ["07", "08"],
        "L eq @l": ["03"],
        "D lt 1.6": ["00", "01"],
        "B eq false and I lt 4": ["01", "03"],
        "T ge @t": ["07", "08"],
        "G eq @g": ["05"],
        "X eq @x": ["04"],
        "PartitionKey eq 'f' and RowKey gt '06'": ["07", "08"],
        "not (I lt 8)": ["08"],
    }
    params = {
        "l": 2**40 + 3,
        "t": datetime(2020, 1, 8, tzinfo=timezone.utc),
        "g": uuid.UUID(int=5),
        "x": bytes([4, 255]),
    }
    for flt, want in cases.items():
        used = {k: v for k, v in params.items() if f"@{k}" in flt}
        assert keys(rows.query_entities(flt, parameters=used)) == want, flt


def test_select_returns_only_the_named_properties(rows):
    got = list(rows.query_entities("I eq 3", select=["S", "I"]))
    assert len(got) == 1
    assert {k for k in got[0].keys()} == {"S", "I"}
    assert got[0]["S"] == "x&y=z"


def test_a_filter_on_a_missing_property_matches_nothing(rows):
    assert keys(rows.query_entities("Missing eq 'x'")) == []
