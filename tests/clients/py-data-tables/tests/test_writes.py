"""Upsert, merge and replace, with and without ETags; delete."""

import pytest
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import UpdateMode

from conftest import code_of


def test_upsert_replace_and_merge(table):
    table.upsert_entity({"PartitionKey": "p", "RowKey": "1", "A": 1, "B": 2}, mode=UpdateMode.REPLACE)
    table.upsert_entity({"PartitionKey": "p", "RowKey": "1", "C": 3}, mode=UpdateMode.MERGE)
    got = table.get_entity("p", "1")
    assert (got["A"], got["B"], got["C"]) == (1, 2, 3)
    table.upsert_entity({"PartitionKey": "p", "RowKey": "1", "D": 4}, mode=UpdateMode.REPLACE)
    got = table.get_entity("p", "1")
    assert "A" not in got and got["D"] == 4
    table.upsert_entity({"PartitionKey": "p", "RowKey": "2", "E": 5}, mode=UpdateMode.MERGE)
    assert table.get_entity("p", "2")["E"] == 5


def test_update_with_a_matching_etag_succeeds_and_a_stale_one_is_412(table):
    table.create_entity({"PartitionKey": "p", "RowKey": "e", "V": 1})
    first = table.get_entity("p", "e")
    etag = first.metadata["etag"]
    table.update_entity(
        {"PartitionKey": "p", "RowKey": "e", "V": 2},
        mode=UpdateMode.MERGE,
        etag=etag,
        match_condition=MatchConditions.IfNotModified,
    )
    for mode in (UpdateMode.MERGE, UpdateMode.REPLACE):
        with pytest.raises(ResourceModifiedError) as err:
            table.update_entity(
                {"PartitionKey": "p", "RowKey": "e", "V": 3},
                mode=mode,
                etag=etag,
                match_condition=MatchConditions.IfNotModified,
            )
        assert err.value.status_code == 412
        assert code_of(err.value) == "UpdateConditionNotSatisfied"
    current = table.get_entity("p", "e")
    assert current["V"] == 2
    table.update_entity(
        {"PartitionKey": "p", "RowKey": "e", "V": 4},
        mode=UpdateMode.REPLACE,
        etag=current.metadata["etag"],
        match_condition=MatchConditions.IfNotModified,
    )
    assert table.get_entity("p", "e")["V"] == 4


def test_unconditional_update_of_a_missing_entity_is_404(table):
    with pytest.raises(ResourceNotFoundError) as err:
        table.update_entity({"PartitionKey": "p", "RowKey": "none", "V": 1}, mode=UpdateMode.REPLACE)
    assert code_of(err.value) == "ResourceNotFound"


def test_delete_with_a_stale_etag_is_412_and_with_the_current_one_deletes(table):
    table.create_entity({"PartitionKey": "p", "RowKey": "d", "V": 1})
    stale = table.get_entity("p", "d").metadata["etag"]
    table.update_entity({"PartitionKey": "p", "RowKey": "d", "V": 2})
    with pytest.raises(HttpResponseError) as err:
        table.delete_entity("p", "d", etag=stale, match_condition=MatchConditions.IfNotModified)
    assert err.value.status_code == 412
    current = table.get_entity("p", "d").metadata["etag"]
    table.delete_entity("p", "d", etag=current, match_condition=MatchConditions.IfNotModified)
    with pytest.raises(ResourceNotFoundError):
        table.get_entity("p", "d")
    # The SDK treats deleting a missing entity as success (it swallows the 404).
    table.delete_entity("p", "d")


def test_an_entity_with_a_bad_key_is_refused_with_azures_code(table):
    with pytest.raises(HttpResponseError) as err:
        table.create_entity({"PartitionKey": "a/b", "RowKey": "1"})
    assert err.value.status_code == 400
    assert code_of(err.value) in ("InvalidInput", "OutOfRangeInput")
