"""Secondary indexes (docs/indexes.md): the admin API and `tafel index`, queries answered from
an index exactly as the scan answers them (a differential test over random filters, every page
compared), the x-tafel-query-plan header, and entries kept exact across writes and kill -9. On
both backends; on PostgreSQL also across two nodes sharing the database."""

from __future__ import annotations

import random
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from azure.data.tables import EdmType, EntityProperty, TableServiceClient, UpdateMode

from conftest import (
    BACKEND,
    TafelServer,
    bulk_insert,
    declare_index,
    index_listing,
    index_url,
    postgres_only,
    unique_table_name,
    wait_index_ready,
)


def query(srv, table: str, flt: str, top: int | None = None, token: dict | None = None):
    q = {"$filter": flt}
    if top is not None:
        q["$top"] = str(top)
    q.update(token or {})
    r = srv.raw.request("GET", f"/{table}()", query=q)
    assert r.status_code == 200, (flt, r.status_code, r.text)
    nxt = None
    if "x-ms-continuation-NextPartitionKey" in r.headers:
        nxt = {"NextPartitionKey": r.headers["x-ms-continuation-NextPartitionKey"]}
        if "x-ms-continuation-NextRowKey" in r.headers:
            nxt["NextRowKey"] = r.headers["x-ms-continuation-NextRowKey"]
    return r, nxt


def plain(e: dict) -> dict:
    """An entity without what differs between two tables holding the same data."""
    return {k: v for k, v in e.items() if not k.startswith("odata.") and k != "Timestamp"}


def pages(srv, table: str, flt: str, top: int | None) -> tuple[list[list[dict]], set[str]]:
    out, plans, token = [], set(), None
    for _ in range(10_000):
        r, token = query(srv, table, flt, top, token)
        plans.add(r.headers["x-tafel-query-plan"])
        assert int(r.headers["x-tafel-rows-examined"]) >= len(r.json()["value"])
        out.append([plain(e) for e in r.json()["value"]])
        if token is None:
            return out, plans
    raise AssertionError("continuation never ended")


def all_matches(srv, table: str, flt: str) -> list[tuple[str, str]]:
    return [(e["PartitionKey"], e["RowKey"]) for page in pages(srv, table, flt, None)[0] for e in page]


def test_index_answers_a_cross_partition_eq_with_the_plan_header(server, service):
    name = unique_table_name("idx")
    table = service.create_table(name)
    for i in range(200):
        e = {"PartitionKey": f"p{i % 20:02d}", "RowKey": f"r{i:04d}", "Age": EntityProperty(i, EdmType.INT64)}
        if i % 7:
            e["Email"] = f"user{i % 50}@example.com"
        table.create_entity(e)
    flt = "Email eq 'user3@example.com'"
    r, _ = query(server, name, flt)
    assert r.headers["x-tafel-query-plan"] == "table-scan"
    assert r.headers["x-tafel-rows-examined"] == "200"
    scanned = [plain(e) for e in r.json()["value"]]

    made = declare_index(server, name, "Email")
    assert made["state"] == "ready" and made["created"] is True
    assert made["entries"] == sum(1 for i in range(200) if i % 7)
    again = requests.put(index_url(server, name, "Email"), timeout=30)
    assert again.status_code == 200 and again.json()["created"] is False

    r, _ = query(server, name, flt)
    assert r.headers["x-tafel-query-plan"] == "index:Email"
    assert [plain(e) for e in r.json()["value"]] == scanned
    assert r.headers["x-tafel-rows-examined"] == str(len(scanned))
    # The SDK's own query gets the same entities, in key order.
    got = list(table.query_entities("Email eq @e", parameters={"e": "user3@example.com"}))
    assert [(e["PartitionKey"], e["RowKey"]) for e in got] == [(e["PartitionKey"], e["RowKey"]) for e in scanned]

    # A range on an indexed Int64.
    declare_index(server, name, "Age")
    r, _ = query(server, name, "Age ge 100L and Age lt 110L")
    assert r.headers["x-tafel-query-plan"] == "index:Age"
    assert [e["RowKey"] for e in r.json()["value"]] == sorted(f"r{i:04d}" for i in range(100, 110))
    assert r.headers["x-tafel-rows-examined"] == "10"

    # The key planner's plans.
    r, _ = query(server, name, "PartitionKey eq 'p03'")
    assert r.headers["x-tafel-query-plan"] == "partition-range"
    r, _ = query(server, name, "PartitionKey eq 'p03' and RowKey eq 'r0003'")
    assert r.headers["x-tafel-query-plan"] == "point"
    assert r.headers["x-tafel-rows-examined"] == "1"

    listed = index_listing(server, name)
    assert set(listed) == {"Email", "Age"} and listed["Age"]["entries"] == 200
    r = requests.delete(index_url(server, name, "Email"), timeout=30)
    assert r.status_code == 204
    assert requests.delete(index_url(server, name, "Email"), timeout=30).status_code == 404
    r, _ = query(server, name, flt)
    assert r.headers["x-tafel-query-plan"] == "table-scan"
    assert [plain(e) for e in r.json()["value"]] == scanned


def test_admin_index_api_refuses_what_it_cannot_index(server):
    name = unique_table_name("idx")
    assert requests.put(index_url(server, name, "Email"), timeout=30).status_code == 404
    server.raw.create_table(name)
    r = requests.put(index_url(server, name, "PartitionKey"), timeout=30)
    assert r.status_code == 400 and r.json()["error"] == "InvalidPropertyName"
    r = requests.get(f"{server.admin_url}/accounts/nosuchaccount/tables/{name}/indexes", timeout=30)
    assert r.status_code == 404 and r.json()["error"] == "AccountNotFound"


def test_tafel_index_cli_creates_lists_and_drops(server):
    name = unique_table_name("idx")
    server.raw.create_table(name)
    server.raw.insert(name, {"PartitionKey": "a", "RowKey": "1", "Email": "x@y"})
    cli = [str(server.binary), "index", "--admin-url", server.admin_url, "--table", name]
    out = subprocess.run(cli + ["create", "Email"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"indexed {name}.Email: 1 entries" in out.stdout
    # --no-wait returns once the index is declared; here it is ready at once (no entities).
    other = unique_table_name("idx")
    server.raw.create_table(other)
    out = subprocess.run([*cli[:-1], other, "create", "--no-wait", "Email"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and f"indexed {other}.Email: 0 entries" in out.stdout, out.stdout + out.stderr
    out = subprocess.run(cli + ["list"], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["Email", "ready", "1"]
    out = subprocess.run(cli + ["drop", "Email"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    out = subprocess.run(cli + ["drop", "Email"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "IndexNotFound" not in out.stdout and "no index" in out.stderr


# --- The differential test: the same data with and without indexes, every page compared.

WORDS = ["", "a", "ab", "b", "ba", "c", "Ω", "a\u00e9"]


def random_entity(rng: random.Random, i: int) -> dict:
    e = {"PartitionKey": f"p{rng.randrange(12):02d}", "RowKey": f"r{i:05d}"}
    if rng.random() < 0.8:
        e["S"] = rng.choice(WORDS)
    if rng.random() < 0.8:
        e["N"] = str(rng.randrange(-5, 15))
        e["N@odata.type"] = "Edm.Int64"
    if rng.random() < 0.7:
        e["I"] = rng.randrange(0, 8)
    if rng.random() < 0.5:
        e["D"] = rng.choice([0.0, -0.0, 1.5, 2.5, -3.0])
        e["D@odata.type"] = "Edm.Double"
    if rng.random() < 0.5:
        e["B"] = rng.random() < 0.5
    if rng.random() < 0.1:
        # The same name with another type: type-strict comparisons must still agree.
        e["S"] = rng.randrange(0, 3)
    return e


def random_atom(rng: random.Random) -> str:
    op = rng.choice(["eq", "eq", "ne", "lt", "le", "gt", "ge"])
    kind = rng.randrange(9)
    if kind <= 2:
        word = rng.choice(WORDS).replace("'", "''")
        return f"S {op} '{word}'"
    if kind <= 4:
        return f"N {op} {rng.randrange(-6, 16)}L"
    if kind == 5:
        return f"I {op} {rng.randrange(-1, 9)}"
    if kind == 6:
        return f"D {op} {rng.choice(['0.0', '1.5', '-3.0', '2.0'])}"
    if kind == 7:
        return f"B eq {rng.choice(['true', 'false'])}"
    return rng.choice([f"PartitionKey {op} 'p{rng.randrange(12):02d}'", f"RowKey {op} 'r{rng.randrange(400):05d}'"])


def random_filter(rng: random.Random, depth: int = 0) -> str:
    if depth >= 2 or rng.random() < 0.4:
        return random_atom(rng)
    kind = rng.random()
    if kind < 0.1:
        return f"not ({random_filter(rng, depth + 1)})"
    joiner = " and " if kind < 0.55 else " or "
    parts = [f"({random_filter(rng, depth + 1)})" for _ in range(rng.randrange(2, 4))]
    return joiner.join(parts)


# Indexes declared before the data, after half of it, after all of it. `*` indexes every
# property (B has no index of its own), sharing S's entries with its declared index.
INDEX_SETS = {"declared": (["S"], ["N", "I"], ["D"]), "every-property": (["S"], ["*"], [])}


@pytest.mark.parametrize("index_set", list(INDEX_SETS))
def test_index_pages_equal_the_scans_for_random_filters(server, index_set):
    before, half, whole = INDEX_SETS[index_set]
    rng = random.Random(59)
    plain_t, indexed_t = unique_table_name("scan"), unique_table_name("idx")
    for t in (plain_t, indexed_t):
        assert server.raw.create_table(t).status_code == 201
    # Indexes on one table before its data and after part of it: both paths fill them.
    for prop in before:
        declare_index(server, indexed_t, prop)
    rows = [random_entity(rng, i) for i in range(400)]
    bulk_insert(server.raw, plain_t, rows)
    bulk_insert(server.raw, indexed_t, rows[:200])
    for prop in half:
        declare_index(server, indexed_t, prop)
    bulk_insert(server.raw, indexed_t, rows[200:])
    for prop in whole:
        declare_index(server, indexed_t, prop)
    used = 0
    for n in range(400):
        flt = random_filter(rng)
        top = rng.choice([None, 1, 3, 7, 50])
        want, _ = pages(server, plain_t, flt, top)
        got, plans = pages(server, indexed_t, flt, top)
        assert got == want, f"filter #{n} {flt!r} $top={top}: pages differ (plans {plans})"
        used += any(p.startswith("index:") for p in plans)
    assert used > 100, f"only {used} of 400 filters used an index"


# --- Kept exact on every write path, and across kill -9.


def test_index_stays_exact_across_writes_table_delete_and_kill9(fresh_server):
    srv = fresh_server
    svc = TableServiceClient.from_connection_string(srv.conn_str)
    name = unique_table_name("idx")
    table = svc.create_table(name)
    declare_index(srv, name, "Email")
    # Beside it, a table indexed on every property: 10 entities of two properties, 20 entries.
    every = unique_table_name("all")
    svc.create_table(every)
    declare_index(srv, every, "*")
    for i in range(10):
        srv.raw.insert(every, {"PartitionKey": "p", "RowKey": f"{i}", "A": f"a{i % 2}", "B": i})
    rng = random.Random(7)
    emails = [f"u{i}@x" for i in range(6)]
    live: dict[tuple[str, str], dict] = {}

    def entity(pk, rk):
        e = {"PartitionKey": pk, "RowKey": rk}
        if rng.random() < 0.8:
            e["Email"] = rng.choice(emails)
        return e

    for step in range(300):
        pk, rk = f"p{rng.randrange(5)}", f"r{rng.randrange(40):02d}"
        op = rng.choice(["insert", "upsert", "merge", "update", "delete", "batch"])
        if op == "insert" and (pk, rk) not in live:
            e = entity(pk, rk)
            table.create_entity(e)
            live[(pk, rk)] = e
        elif op == "upsert":
            e = entity(pk, rk)
            table.upsert_entity(e, mode=UpdateMode.REPLACE)
            live[(pk, rk)] = e
        elif op == "merge" and (pk, rk) in live:
            e = entity(pk, rk)
            table.update_entity(e, mode=UpdateMode.MERGE)
            live[(pk, rk)] = {**live[(pk, rk)], **e}
        elif op == "update" and (pk, rk) in live:
            e = entity(pk, rk)
            table.update_entity(e, mode=UpdateMode.REPLACE)
            live[(pk, rk)] = e
        elif op == "delete" and (pk, rk) in live:
            table.delete_entity(pk, rk)
            del live[(pk, rk)]
        elif op == "batch":
            rks = sorted({f"r{rng.randrange(40):02d}" for _ in range(4)})
            ops = []
            for b_rk in rks:
                e = entity(pk, b_rk)
                if (pk, b_rk) in live and rng.random() < 0.3:
                    ops.append(("delete", e))
                    del live[(pk, b_rk)]
                else:
                    ops.append(("upsert", e, {"mode": UpdateMode.MERGE}))
                    live[(pk, b_rk)] = {**live.get((pk, b_rk), {}), **e}
            table.submit_transaction(ops)

    def check():
        want_entries = sum(1 for e in live.values() if "Email" in e)
        assert index_listing(srv, name)["Email"]["entries"] == want_entries
        for em in emails:
            want = sorted(k for k, e in live.items() if e.get("Email") == em)
            r, _ = query(srv, name, f"Email eq '{em}'")
            assert r.headers["x-tafel-query-plan"] == "index:Email"
            assert [(e["PartitionKey"], e["RowKey"]) for e in r.json()["value"]] == want, em
        assert index_listing(srv, every)["*"]["entries"] == 20
        r, _ = query(srv, every, "A eq 'a1'")
        assert r.headers["x-tafel-query-plan"] == "index:A" and len(r.json()["value"]) == 5

    check()
    srv.kill9()
    srv.start()
    check()
    if BACKEND == "embedded":
        # `tafel check` compares every index entry with its entity, offline.
        srv.stop()
        out = subprocess.run([str(srv.binary), "check", "--quiet", "--data-dir", str(srv.data_dir)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"{sum(1 for e in live.values() if 'Email' in e) + 20} index entries" in out.stderr, out.stderr
        srv.start()
    # A deleted table takes its indexes with it: one made again by that name has none.
    svc = TableServiceClient.from_connection_string(srv.conn_str)
    svc.delete_table(name)
    svc.create_table(name)
    assert index_listing(srv, name) == {}
    srv.raw.insert(name, {"PartitionKey": "a", "RowKey": "1", "Email": "u1@x"})
    r, _ = query(srv, name, "Email eq 'u1@x'")
    assert r.headers["x-tafel-query-plan"] == "table-scan"
    assert len(r.json()["value"]) == 1


@postgres_only
def test_an_index_declared_on_one_postgres_node_is_kept_by_another(server, tmp_path):
    """Nodes keep no index state of their own: node B, which has been inserting into the
    table (its one-round-trip inserts guess the table has no index), indexes its writes the
    moment node A declares the index, and queries on either node use it."""
    other = TafelServer(tmp_path / "node-b", tmp_path / "node-b.log")
    other.database_url = server.database_url
    other.start()
    try:
        name = unique_table_name("idx")
        server.raw.create_table(name)
        for i in range(20):
            assert other.raw.insert(name, {"PartitionKey": "p", "RowKey": f"a{i:02d}", "Email": f"u{i % 4}@x"}
                                    ).status_code == 201
        declare_index(server, name, "Email")
        for i in range(20):
            assert other.raw.insert(name, {"PartitionKey": "q", "RowKey": f"b{i:02d}", "Email": f"u{i % 4}@x"}
                                    ).status_code == 201
        assert index_listing(other, name)["Email"] == {"property": "Email", "state": "ready", "entries": 40}
        for srv in (server, other):
            r, _ = query(srv, name, "Email eq 'u1@x'")
            assert r.headers["x-tafel-query-plan"] == "index:Email"
            assert [e["RowKey"] for e in r.json()["value"]] == [f"a{i:02d}" for i in range(1, 20, 4)] + [
                f"b{i:02d}" for i in range(1, 20, 4)]
        assert requests.delete(index_url(other, name, "Email"), timeout=30).status_code == 204
        other.raw.insert(name, {"PartitionKey": "r", "RowKey": "c", "Email": "u1@x"})
        r, _ = query(server, name, "Email eq 'u1@x'")
        assert r.headers["x-tafel-query-plan"] == "table-scan" and len(r.json()["value"]) == 11
    finally:
        other.stop()


# --- Built online: progress, reads and writes during the build, kill -9 in the middle.


def seed(srv, table: str, n: int) -> None:
    """`n` entities in partitions of 100, one batch each: `Email` u{i % 1000}@x on four of
    five, `Age` on all (an Int64, i)."""
    client = TableServiceClient.from_connection_string(srv.conn_str).get_table_client(table)

    def batch(part: int) -> None:
        rows = []
        for i in range(part * 100, min(n, part * 100 + 100)):
            e = {"PartitionKey": f"p{part:05d}", "RowKey": f"r{i:07d}", "Age": EntityProperty(i, EdmType.INT64)}
            if i % 5:
                e["Email"] = f"u{i % 1000}@x"
            rows.append(("upsert", e))
        client.submit_transaction(rows)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(batch, range((n + 99) // 100)))


def keys_of(r) -> list[tuple[str, str]]:
    return [(e["PartitionKey"], e["RowKey"]) for e in r.json()["value"]]


def test_an_index_on_a_table_with_data_builds_online_and_resumes_after_kill9(fresh_server):
    srv = fresh_server
    name = unique_table_name("online")
    srv.raw.create_table(name)
    n = 100_000
    seed(srv, name, n)
    want = sorted((f"p{i // 100:05d}", f"r{i:07d}") for i in range(n) if i % 5 and i % 1000 == 7)
    r = requests.put(index_url(srv, name, "Email"), timeout=60)
    assert r.status_code == 202, (r.status_code, r.text)
    assert r.json()["state"] == "building" and r.json()["progress"]["total"] == n, r.text
    # Reads and writes go on during the build; queries scan until the index is ready.
    seen, added = [], 0
    while True:
        listed = index_listing(srv, name)["Email"]
        if listed["state"] == "ready":
            break
        seen.append(listed["progress"])
        w = srv.raw.insert(name, {"PartitionKey": "w", "RowKey": f"{added:05d}", "Email": "u7@x"})
        assert w.status_code == 201, w.text
        want.append(("w", f"{added:05d}"))
        added += 1
        q, _ = query(srv, name, "Email eq 'u7@x'")
        assert keys_of(q) == sorted(want)
        # The index answers only once ready (the build may end between the listing and the query).
        if q.headers["x-tafel-query-plan"] != "table-scan":
            assert q.headers["x-tafel-query-plan"] == "index:Email"
            assert index_listing(srv, name)["Email"]["state"] == "ready"
    assert seen and seen[0]["total"] >= n, seen
    assert all(0 <= p["done"] <= p["total"] for p in seen), seen
    assert listed["entries"] == n - n // 5 + added
    q, _ = query(srv, name, "Email eq 'u7@x'")
    assert q.headers["x-tafel-query-plan"] == "index:Email" and keys_of(q) == sorted(want)

    # kill -9 right after the index is declared: the restarted server resumes its build.
    r = requests.put(index_url(srv, name, "Age"), timeout=60)
    assert r.status_code == 202 and r.json()["state"] == "building", r.text
    srv.kill9()
    since = srv.log_size()
    srv.start()
    ready = wait_index_ready(srv, name, "Age")
    assert ready["entries"] == n
    # On PostgreSQL the line follows the build's last commit, which the state read above may see first.
    srv.wait_for_log("index built online", since=since)
    q, _ = query(srv, name, "Age ge 1000L and Age lt 1010L")
    assert q.headers["x-tafel-query-plan"] == "index:Age"
    assert keys_of(q) == [(f"p{i // 100:05d}", f"r{i:07d}") for i in range(1000, 1010)]
    if BACKEND != "embedded":
        return
    srv.stop()
    out = subprocess.run([str(srv.binary), "check", "--quiet", "--data-dir", str(srv.data_dir)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{(n - n // 5 + added) + n} index entries" in out.stderr, out.stderr


def test_tafel_index_create_waits_for_the_build_with_progress(server):
    name = unique_table_name("online")
    server.raw.create_table(name)
    seed(server, name, 20_000)
    cli = [str(server.binary), "index", "--admin-url", server.admin_url, "--table", name]
    out = subprocess.run(cli + ["create", "Email"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"indexed {name}.Email: 16000 entries" in out.stdout, out.stdout
    assert f"indexing {name}.Email:" in out.stderr, out.stderr
    assert index_listing(server, name)["Email"]["state"] == "ready"
    out = subprocess.run(cli + ["create", "--no-wait", "Age"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"{name}.Age is building" in out.stdout and "of 20000 entities" in out.stdout, out.stdout
    wait_index_ready(server, name, "Age")


# --- The index of every property (`*`).


def test_the_index_of_every_property_serves_each_property_and_drops_what_only_it_asked_for(server):
    name = unique_table_name("idx")
    server.raw.create_table(name)
    rows = [{"PartitionKey": f"p{i % 4}", "RowKey": f"{i:03}", "A": f"a{i % 10}", "B": i,
             "C@odata.type": "Edm.Int64", "C": str(i % 3)} for i in range(60)]
    for i, e in enumerate(rows):
        if i % 5 == 0:
            del e["A"]
    bulk_insert(server.raw, name, rows)
    has_a = sum(1 for e in rows if "A" in e)
    # `tafel index create '*'` waits for the build and says how many entries it made.
    cli = [str(server.binary), "index", "--admin-url", server.admin_url, "--table", name]
    out = subprocess.run(cli + ["create", "*"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"indexed {name}.*: {has_a + 120} entries" in out.stdout, out.stdout
    assert index_listing(server, name)["*"]["entries"] == has_a + 120
    # Every property is indexed: the plan names the property used.
    for flt, prop in (("A eq 'a3'", "A"), ("B ge 10 and B lt 13", "B"), ("C eq 2L", "C"),
                      ("A eq 'a1' or B eq 7", "A,B")):
        r, _ = query(server, name, flt)
        assert r.headers["x-tafel-query-plan"] == f"index:{prop}", (flt, r.headers)
    r, _ = query(server, name, "B ge 10 and B lt 13")
    # In key order: 12 is in p0, 10 in p2, 11 in p3.
    assert [e["RowKey"] for e in r.json()["value"]] == ["012", "010", "011"]
    # Keys and Timestamp are not indexed properties: the key planner or a scan serves them.
    r, _ = query(server, name, "Timestamp ge datetime'2000-01-01T00:00:00Z'")
    assert r.headers["x-tafel-query-plan"] == "table-scan" and len(r.json()["value"]) == 60
    assert requests.put(index_url(server, name, "Timestamp"), timeout=30).status_code == 400
    # A declared index on A shares `*`'s entries: `*` lists those of the others.
    made = declare_index(server, name, "A")
    assert made["entries"] == has_a
    assert index_listing(server, name)["*"]["entries"] == 120
    # Dropping A while `*` stays keeps its entries: queries on A still use them.
    assert requests.delete(index_url(server, name, "A"), timeout=30).status_code == 204
    assert index_listing(server, name) == {"*": {"property": "*", "state": "ready", "entries": has_a + 120}}
    r, _ = query(server, name, "A eq 'a3'")
    assert r.headers["x-tafel-query-plan"] == "index:A" and len(r.json()["value"]) == 6
    # Dropping `*` keeps the entries of declared indexes only.
    declare_index(server, name, "B")
    assert requests.delete(index_url(server, name, "*"), timeout=30).status_code == 204
    assert index_listing(server, name) == {"B": {"property": "B", "state": "ready", "entries": 60}}
    r, _ = query(server, name, "A eq 'a3'")
    assert r.headers["x-tafel-query-plan"] == "table-scan" and len(r.json()["value"]) == 6
    r, _ = query(server, name, "B eq 3")
    assert r.headers["x-tafel-query-plan"] == "index:B"
    out = subprocess.run(cli + ["drop", "*"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "no index" in out.stderr, out.stdout + out.stderr
