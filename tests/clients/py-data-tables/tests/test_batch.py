"""Entity group transactions ($batch) with every operation kind; atomic on failure."""

import pytest
from azure.data.tables import TableTransactionError

from conftest import code_of, needs_batch


@needs_batch
def test_a_mixed_transaction_applies_every_operation(table):
    table.create_entity({"PartitionKey": "b", "RowKey": "upd", "V": 1, "Keep": "x"})
    table.create_entity({"PartitionKey": "b", "RowKey": "mrg", "V": 1, "Keep": "x"})
    table.create_entity({"PartitionKey": "b", "RowKey": "del", "V": 1})
    results = table.submit_transaction(
        [
            ("create", {"PartitionKey": "b", "RowKey": "new", "V": "a b+c&d"}),
            ("update", {"PartitionKey": "b", "RowKey": "upd", "V": 2}, {"mode": "replace"}),
            ("update", {"PartitionKey": "b", "RowKey": "mrg", "V": 2}, {"mode": "merge"}),
            ("upsert", {"PartitionKey": "b", "RowKey": "ups", "V": 3}, {"mode": "merge"}),
            ("upsert", {"PartitionKey": "b", "RowKey": "upr", "V": 4}, {"mode": "replace"}),
            ("delete", {"PartitionKey": "b", "RowKey": "del"}),
        ]
    )
    assert len(results) == 6
    assert all("etag" in r for r in results[:5])
    got = {e["RowKey"]: e for e in table.list_entities()}
    assert sorted(got) == ["mrg", "new", "upd", "upr", "ups"]
    assert got["new"]["V"] == "a b+c&d"
    assert got["upd"]["V"] == 2 and "Keep" not in got["upd"]
    assert got["mrg"]["V"] == 2 and got["mrg"]["Keep"] == "x"
    assert (got["ups"]["V"], got["upr"]["V"]) == (3, 4)


@needs_batch
def test_a_failing_operation_rolls_back_the_whole_transaction(table):
    table.create_entity({"PartitionKey": "b", "RowKey": "exists"})
    with pytest.raises(TableTransactionError) as err:
        table.submit_transaction(
            [
                ("create", {"PartitionKey": "b", "RowKey": "first"}),
                ("create", {"PartitionKey": "b", "RowKey": "exists"}),
            ]
        )
    assert code_of(err.value) == "EntityAlreadyExists"
    assert "1:" in str(err.value.message) or "1:" in str(err.value)
    assert sorted(e["RowKey"] for e in table.list_entities()) == ["exists"]

