"""Optimistic concurrency under contention: no lost updates."""

import threading
from concurrent.futures import ThreadPoolExecutor

from conftest import entity_path

THREADS = 16
ROUNDS = 25


def test_conditional_increment_no_lost_updates(raw, raw_table):
    path = entity_path(raw_table, "counter", "c")
    r = raw.insert(raw_table, {"PartitionKey": "counter", "RowKey": "c", "Counter": 0})
    assert r.status_code == 201, r.text
    lock = threading.Lock()
    written = []  # values written by successful updates
    etags = []
    stats = {"ok": 0, "conflict": 0, "other": []}
    barrier = threading.Barrier(THREADS)

    def worker(w):
        barrier.wait()
        for i in range(ROUNDS):
            g = raw.get(path)
            assert g.status_code == 200, g.text
            value = g.json()["Counter"]
            etag = g.headers["ETag"]
            body = {"Counter": value + 1, "LastWriter": w}
            if (w + i) % 2:
                u = raw.put(path, json=body, headers={"If-Match": etag})
            else:
                u = raw.request("MERGE", path, json=body, headers={"If-Match": etag})
            with lock:
                if u.status_code == 204:
                    stats["ok"] += 1
                    written.append(value + 1)
                    etags.append(u.headers.get("ETag"))
                elif u.status_code == 412 and u.headers.get("x-ms-error-code") == "UpdateConditionNotSatisfied":
                    stats["conflict"] += 1
                else:
                    stats["other"].append((u.status_code, u.text[:200]))

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(worker, range(THREADS)))

    assert not stats["other"], stats["other"][:5]
    assert stats["ok"] + stats["conflict"] == THREADS * ROUNDS
    assert stats["ok"] > 0
    final = raw.get(path).json()["Counter"]
    assert final == stats["ok"], f"lost updates: counter={final}, successful updates={stats['ok']}"
    # Every successful update saw the previous value: values written are exactly 1..ok.
    assert sorted(written) == list(range(1, stats["ok"] + 1)), "two updates succeeded from the same read"
    assert len(set(etags)) == len(etags), "an ETag was handed out twice"


def test_concurrent_insert_same_key_one_winner(raw, raw_table):
    barrier = threading.Barrier(THREADS)

    def insert(w):
        barrier.wait()
        r = raw.insert(raw_table, {"PartitionKey": "race", "RowKey": "one", "W": w})
        return r.status_code, r.headers.get("x-ms-error-code"), w

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(insert, range(THREADS)))
    winners = [w for s, _, w in results if s == 201]
    assert len(winners) == 1, results
    assert all((s, c) == (409, "EntityAlreadyExists") for s, c, w in results if s != 201), results
    assert raw.get_entity(raw_table, "race", "one").json()["W"] == winners[0]


def test_concurrent_conditional_delete_one_winner(raw, raw_table):
    r = raw.insert(raw_table, {"PartitionKey": "del", "RowKey": "one"})
    etag = r.headers["ETag"]
    barrier = threading.Barrier(THREADS)

    def delete(_):
        barrier.wait()
        d = raw.delete(entity_path(raw_table, "del", "one"), headers={"If-Match": etag})
        return d.status_code, d.headers.get("x-ms-error-code")

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(delete, range(THREADS)))
    assert sum(1 for s, _ in results if s == 204) == 1, results
    # Losers see either the entity gone (404) or, if they raced the ETag check, 412.
    assert all(
        (s, c) in ((404, "ResourceNotFound"), (412, "UpdateConditionNotSatisfied")) for s, c in results if s != 204
    ), results
