"""$top and continuation tokens over more than 1,000 rows (the service's own page limit)."""

from conftest import BATCH_OK

N = 1205


def fill(table, n):
    rows = [{"PartitionKey": "p", "RowKey": f"{i:05}", "N": i} for i in range(n)]
    if not BATCH_OK:
        for row in rows:
            table.create_entity(row)
        return
    for start in range(0, n, 100):
        table.submit_transaction([("create", row) for row in rows[start : start + 100]])


def test_every_row_once_across_server_pages(table):
    fill(table, N)
    got = [e["N"] for e in table.list_entities()]
    assert got == list(range(N))


def test_pages_of_a_chosen_size_resume_from_a_token(table):
    fill(table, N)
    pages = table.query_entities("N ge 5", results_per_page=400).by_page()
    first = [e["N"] for e in next(pages)]
    assert first == list(range(5, 405))
    token = pages.continuation_token
    assert token
    rest = table.query_entities("N ge 5", results_per_page=400).by_page(continuation_token=token)
    sizes = []
    seen = list(first)
    for page in rest:
        items = [e["N"] for e in page]
        sizes.append(len(items))
        seen.extend(items)
    assert sizes == [400, 400]
    assert seen == list(range(5, N))


def test_a_top_over_the_limit_is_capped_at_1000_per_page(table):
    fill(table, N)
    pages = table.list_entities(results_per_page=1000).by_page()
    assert len(list(next(pages))) == 1000
    assert len(list(next(pages))) == N - 1000
