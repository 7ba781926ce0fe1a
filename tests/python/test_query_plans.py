"""What operators see of entity queries' plans (docs/indexes.md, "Seeing the plan"): the access
log's plan and rows examined, the metrics tafel_query_rows_examined and tafel_table_scans_total,
and --scan-warn-rows's warning for a query that read more rows than it allows without an index."""

from __future__ import annotations

import json
import time

import pytest

from conftest import ACCOUNT, TafelServer, bulk_insert, declare_index, scrape, unique_table_name, value

WARN = "without an index"


@pytest.fixture
def plans_server(_workdir):
    name = unique_table_name("s")
    access = _workdir / f"access-{name}.log"
    srv = TafelServer(
        _workdir / f"data-{name}",
        _workdir / f"tafel-{name}.log",
        extra_args=["--scan-warn-rows", "50", "--access-log", str(access), "--log-format", "json"],
    )
    srv.access_path = access
    srv.start()
    yield srv
    srv.stop()


def seed(srv, table: str) -> None:
    """120 entities: partitions p0..p3 of 30, a unique Email and a Status of two values."""
    assert srv.raw.create_table(table).status_code == 201
    bulk_insert(
        srv.raw,
        table,
        [
            {"PartitionKey": f"p{i % 4}", "RowKey": f"r{i:03}", "Email": f"u{i}@x", "Status": "ab"[i % 2]}
            for i in range(120)
        ],
    )


def ask(srv, table: str, flt: str) -> tuple[str, int]:
    r = srv.raw.request("GET", f"/{table}()", query={"$filter": flt})
    assert r.status_code == 200, (flt, r.status_code, r.text)
    return r.headers["x-tafel-query-plan"], int(r.headers["x-tafel-rows-examined"])


def warnings(srv, since: int) -> list[dict]:
    out = []
    for line in srv.log_text(since).splitlines():
        if WARN in line:
            out.append(json.loads(line))
    return out


def access_lines(srv, table: str, want: int) -> list[dict]:
    """The access log's entity-query lines for `table`, once `want` of them are written."""
    deadline = time.monotonic() + 10
    while True:
        text = srv.access_path.read_text() if srv.access_path.exists() else ""
        lines = [json.loads(l) for l in text.splitlines() if l.strip()]
        mine = [l for l in lines if l["table"] == table and l["operation"] == "QueryEntities"]
        if len(mine) >= want:
            return mine
        assert time.monotonic() < deadline, text[-2000:]
        time.sleep(0.05)


def test_a_scan_past_scan_warn_rows_is_warned_logged_and_counted_by_table(plans_server):
    srv, table = plans_server, unique_table_name("plans")
    seed(srv, table)
    mark = srv.log_size()

    assert ask(srv, table, "Status eq 'a'") == ("table-scan", 120)
    assert ask(srv, table, "PartitionKey eq 'p1' and RowKey eq 'r001'") == ("point", 1)
    # 30 rows of one partition: a key range under the limit is not warned of.
    assert ask(srv, table, "PartitionKey eq 'p2' and Status eq 'a'") == ("partition-range", 30)

    time.sleep(0.2)
    warned = warnings(srv, mark)
    assert len(warned) == 1, warned
    fields = warned[0].get("fields", warned[0])
    assert fields["table"] == table and fields["plan"] == "table-scan", warned
    assert fields["rows_examined"] == 120 and fields["filter"] == "Status eq 'a'", warned
    assert warned[0]["level"] == "WARN", warned

    logged = access_lines(srv, table, 3)
    assert [(l["plan"], l["rows_examined"]) for l in logged] == [
        ("table-scan", 120),
        ("point", 1),
        ("partition-range", 30),
    ], logged
    # Other operations carry neither field.
    text = srv.access_path.read_text()
    inserts = [json.loads(l) for l in text.splitlines() if '"InsertEntity"' in l]
    assert inserts and all("plan" not in l and "rows_examined" not in l for l in inserts)

    samples = scrape(srv)
    assert value(samples, "tafel_table_scans_total", account=ACCOUNT, table=table) == 1
    assert value(samples, "tafel_query_rows_examined_count", plan="table-scan") == 1
    assert value(samples, "tafel_query_rows_examined_sum", plan="table-scan") == 120
    assert value(samples, "tafel_query_rows_examined_count", plan="partition-range") == 1
    assert value(samples, "tafel_query_rows_examined_bucket", plan="table-scan", le="100") == 0
    assert value(samples, "tafel_query_rows_examined_bucket", plan="table-scan", le="1000") == 1


def test_a_query_answered_from_an_index_is_not_warned_of(plans_server):
    srv, table = plans_server, unique_table_name("plans")
    seed(srv, table)
    # Waits for the online build by the listing, not by queries: one asked during the build
    # would scan (and count a table scan).
    declare_index(srv, table, "Status", timeout=30)
    mark = srv.log_size()
    # 60 candidates, more than the limit: read from the index, so no warning.
    assert ask(srv, table, "Status eq 'a'") == ("index:Status", 60)
    time.sleep(0.2)
    assert warnings(srv, mark) == []
    assert access_lines(srv, table, 1)[-1]["plan"] == "index:Status"
    samples = scrape(srv)
    assert value(samples, "tafel_query_rows_examined_count", plan="index") >= 1
    assert value(samples, "tafel_table_scans_total", account=ACCOUNT, table=table) == 0

