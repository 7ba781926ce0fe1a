"""Round trips to the database per Table API operation, on the postgres backend.

A Tafel node reaches PostgreSQL through a ``DelayProxy``. Each operation runs ``repeat``
times with the proxy adding nothing and ``repeat`` times with it adding ``rtt`` to every
round trip; the difference of the fastest latencies, divided by ``rtt``, is the number of
round trips the operation makes to the database (the work on this machine, the proxy's
own included, cancels out). The fastest, not the median: every round trip adds ``rtt`` to
every run, so the fastest still counts each one, while a run slowed by a busy machine (CI
runs three lanes at once) moved a median far run by a third of a round trip.

Run by ``test_pg_roundtrips.py`` (which fails when an operation exceeds its target) and by
``scripts/pg-roundtrips`` (which prints the table BENCHMARKS.md records).
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from typing import List, NamedTuple

from rawhttp import entity_path

# Operation -> most round trips it may take (issue #27's targets).
TARGETS = {
    "get entity": 1,
    "query a partition (one page)": 1,
    "query with a filter (one page)": 1,
    "list tables": 1,
    "insert": 1,
    "insert, key taken (409)": 2,
    "replace (upsert)": 2,
    "replace If-Match": 2,
    "merge (upsert)": 2,
    "merge If-Match": 2,
    "delete": 2,
    "delete If-Match": 2,
    "batch of 100 inserts": 1,
    "batch of 100 mixed upserts": 2,
    "create table": 1,
    "delete table": 1,
}


class Result(NamedTuple):
    operation: str
    near_ms: float
    far_ms: float
    round_trips: float
    target: int


def batch_body(base: str, ops: List[tuple]) -> str:
    """A one-changeset $batch body of JSON writes, ``ops`` as ``(method, entity)``: POST
    inserts into the table; PUT and MERGE go to the entity's own URL."""
    parts = []
    for method, e in ops:
        url = base
        if method != "POST":
            url = f"{base}(PartitionKey='{e['PartitionKey']}',RowKey='{e['RowKey']}')"
        parts.append(
            "--cs\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
            f"{method} {url} HTTP/1.1\r\nContent-Type: application/json\r\n"
            "Accept: application/json;odata=minimalmetadata\r\nPrefer: return-no-content\r\n"
            f"DataServiceVersion: 3.0;\r\n\r\n{json.dumps(e)}\r\n"
        )
    return (
        "--b\r\nContent-Type: multipart/mixed; boundary=cs\r\n\r\n"
        + "".join(parts)
        + "--cs--\r\n\r\n--b--\r\n"
    )


def measure(server, proxy, rtt: float, repeat: int = 9) -> List[Result]:
    """Runs every operation of ``TARGETS`` against ``server``, whose database is behind
    ``proxy``, near (no delay) and ``rtt`` seconds of round trip away."""
    raw = server.raw
    table = "rt" + uuid.uuid4().hex[:12]
    assert raw.create_table(table).status_code == 201
    base = f"http://127.0.0.1:{server.port}/devstoreaccount1/{table}"
    payload = "x" * 200
    for i in range(200):
        r = raw.insert(table, {"PartitionKey": "q", "RowKey": f"{i:05d}", "V": i, "S": payload})
        assert r.status_code == 201, r.text
    counter = iter(range(10**9))

    def fresh() -> dict:
        return {"PartitionKey": "w", "RowKey": f"k{next(counter):08d}", "S": payload}

    def written() -> tuple:
        e = fresh()
        r = raw.insert(table, e)
        assert r.status_code == 201, r.text
        return e, r.headers["ETag"]

    def expect(status: int, r) -> None:
        assert r.status_code == status, (r.status_code, r.text)

    # Each: (setup, timed action). Setup runs untimed and hands its result to the action.
    def op_insert(_):
        expect(201, raw.insert(table, fresh()))

    def op_taken(e):
        expect(409, raw.insert(table, e[0]))

    def op_replace(e):
        expect(204, raw.put(entity_path(table, e[0]["PartitionKey"], e[0]["RowKey"]), json={"V": 1}))

    def op_replace_if(e):
        path = entity_path(table, e[0]["PartitionKey"], e[0]["RowKey"])
        expect(204, raw.put(path, json={"V": 2}, headers={"If-Match": e[1]}))

    def op_merge(e):
        path = entity_path(table, e[0]["PartitionKey"], e[0]["RowKey"])
        expect(204, raw.request("MERGE", path, json={"M": 1}))

    def op_merge_if(e):
        path = entity_path(table, e[0]["PartitionKey"], e[0]["RowKey"])
        expect(204, raw.request("MERGE", path, json={"M": 2}, headers={"If-Match": e[1]}))

    def op_delete(e):
        path = entity_path(table, e[0]["PartitionKey"], e[0]["RowKey"])
        expect(204, raw.delete(path, headers={"If-Match": "*"}))

    def op_delete_if(e):
        path = entity_path(table, e[0]["PartitionKey"], e[0]["RowKey"])
        expect(204, raw.delete(path, headers={"If-Match": e[1]}))

    def op_get(_):
        expect(200, raw.get_entity(table, "q", "00042"))

    def op_partition(_):
        r = raw.get(f"/{table}()", query={"$filter": "PartitionKey eq 'q'", "$top": "100"})
        expect(200, r)
        assert len(r.json()["value"]) == 100

    def op_filter(_):
        r = raw.get(f"/{table}()", query={"$filter": "V ge 150"})
        expect(200, r)
        assert len(r.json()["value"]) == 50

    def op_list(_):
        expect(200, raw.get("/Tables", query={"$top": "50"}))

    def batch_setup(_):
        pk = "b" + uuid.uuid4().hex[:8]
        return [{"PartitionKey": pk, "RowKey": f"{i:03d}", "S": payload} for i in range(100)]

    def send_batch(ops):
        r = raw.post("/$batch", body=batch_body(base, ops), content_type="multipart/mixed; boundary=b")
        expect(202, r)
        assert "HTTP/1.1 4" not in r.text, r.text[:1000]

    def op_batch_insert(entities):
        send_batch([("POST", e) for e in entities])

    def mixed_setup(_):
        entities = batch_setup(None)
        for e in entities[:50]:
            expect(201, raw.insert(table, e))
        return entities

    def op_batch_mixed(entities):
        # Merges of 50 existing rows, upserts of 50 new ones.
        send_batch([("MERGE", e) for e in entities[:50]] + [("PUT", e) for e in entities[50:]])

    def table_name(_):
        return "rtt" + uuid.uuid4().hex[:12]

    def op_create_table(name):
        expect(201, raw.create_table(name))

    def created_table(_):
        name = table_name(None)
        expect(201, raw.create_table(name))
        return name

    def op_delete_table(name):
        expect(204, raw.delete_table(name))

    plan: List[tuple] = [
        ("get entity", None, op_get),
        ("query a partition (one page)", None, op_partition),
        ("query with a filter (one page)", None, op_filter),
        ("list tables", None, op_list),
        ("insert", None, op_insert),
        ("insert, key taken (409)", lambda _: written(), op_taken),
        ("replace (upsert)", lambda _: written(), op_replace),
        ("replace If-Match", lambda _: written(), op_replace_if),
        ("merge (upsert)", lambda _: written(), op_merge),
        ("merge If-Match", lambda _: written(), op_merge_if),
        ("delete", lambda _: written(), op_delete),
        ("delete If-Match", lambda _: written(), op_delete_if),
        ("batch of 100 inserts", batch_setup, op_batch_insert),
        ("batch of 100 mixed upserts", mixed_setup, op_batch_mixed),
        ("create table", table_name, op_create_table),
        ("delete table", created_table, op_delete_table),
    ]
    results = []
    for name, setup, action in plan:
        medians, fastest = [], []
        for delay in (0.0, rtt / 2):
            proxy.delay = delay
            times = []
            for _ in range(repeat):
                arg = setup(None) if setup else None
                started = time.perf_counter()
                action(arg)
                times.append(time.perf_counter() - started)
            medians.append(statistics.median(times))
            fastest.append(min(times))
        near, far = medians
        trips = (fastest[1] - fastest[0]) / rtt
        results.append(Result(name, near * 1000, far * 1000, trips, TARGETS[name]))
    proxy.delay = 0.0
    return results


def table(results: List[Result], rtt: float) -> str:
    lines = [
        f"| operation | median latency | with +{rtt * 1000:.0f} ms RTT | round trips | target |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.operation} | {r.near_ms:.1f} ms | {r.far_ms:.1f} ms | {r.round_trips:.2f} | ≤ {r.target} |"
        )
    return "\n".join(lines)



def main() -> None:
    """Prints the table for one node on a fresh database of the running cluster."""
    import argparse
    import tempfile
    from pathlib import Path
    from urllib.parse import urlsplit

    from conftest import TafelServer, create_postgres_database
    from pgproxy import DelayProxy

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rtt-ms", type=float, default=20.0, help="round-trip time the proxy adds")
    parser.add_argument("--repeat", type=int, default=15, help="runs of each operation, near and far")
    args = parser.parse_args()
    database = create_postgres_database()
    parts = urlsplit(database)
    proxy = DelayProxy(parts.hostname, parts.port)
    work = Path(tempfile.mkdtemp(prefix="tafel-roundtrips-"))
    srv = TafelServer(work / "data", work / "tafel.log", backend="postgres")
    srv.database_url = proxy.url_for(database)
    srv.start()
    try:
        rtt = args.rtt_ms / 1000
        print(table(measure(srv, proxy, rtt, repeat=args.repeat), rtt))
    finally:
        srv.stop()
        proxy.close()


if __name__ == "__main__":
    main()
