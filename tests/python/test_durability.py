"""Durability: acknowledged writes survive kill -9 and graceful shutdown (SIGTERM)."""

import threading
import time
import uuid

import pytest

from conftest import (
    BACKEND, JSON_FULL, TafelServer, assert_error, bulk_insert, embedded_only, entity_path, scrape,
    unique_table_name, value,
)


def snapshot(srv, table):
    """Every entity of the table at fullmetadata (incl. Timestamp and odata.etag)."""
    return srv.raw.query_all(table, accept=JSON_FULL)


def tables(srv, prefix):
    r = srv.raw.get("/Tables", query={"$filter": f"TableName ge '{prefix}' and TableName lt '{prefix}{{'"})
    assert r.status_code == 200, r.text
    return sorted(t["TableName"] for t in r.json()["value"])


def populate(srv, n=500):
    raw = srv.raw
    table = unique_table_name("dur")
    assert raw.create_table(table).status_code == 201
    other = unique_table_name("durother")
    assert raw.create_table(other).status_code == 201
    gone = unique_table_name("durgone")
    assert raw.create_table(gone).status_code == 201
    assert raw.delete_table(gone).status_code == 204
    entities = [
        {
            "PartitionKey": f"p{i % 7}",
            "RowKey": f"{i:06d}",
            "N": i,
            "Big": str(2**40 + i),
            "Big@odata.type": "Edm.Int64",
            "D": 0.5 + i,
            "When": "2024-06-04T08:15:30.1234567Z",
            "When@odata.type": "Edm.DateTime",
            "Bytes": "AAECAw==",
            "Bytes@odata.type": "Edm.Binary",
            # Every third entity carries a long string (several hundred bytes).
            "Text": "ü" * (i % 50) if i % 3 else "ü" * (130 + i % 50),
        }
        for i in range(n)
    ]
    bulk_insert(raw, table, entities, threads=8)
    # Overwrites and deletes must be durable too (last write wins).
    for i in range(0, n, 10):
        r = raw.request("MERGE", entity_path(table, f"p{i % 7}", f"{i:06d}"), json={"Merged": True}, headers={"If-Match": "*"})
        assert r.status_code == 204, r.text
    for i in range(5, n, 20):
        r = raw.delete(entity_path(table, f"p{i % 7}", f"{i:06d}"), headers={"If-Match": "*"})
        assert r.status_code == 204, r.text
    return table, other, gone


def check_same(srv, table, before, names_before, prefix="dur"):
    after = snapshot(srv, table)
    assert len(after) == len(before)
    assert after == before, "entities changed across restart"
    assert tables(srv, prefix) == names_before
    # ETag headers on single reads still match.
    for e in before[:: max(1, len(before) // 10)]:
        r = srv.raw.get_entity(table, e["PartitionKey"], e["RowKey"])
        assert r.status_code == 200, r.text
        assert r.headers["ETag"] == e["odata.etag"]


def checkpoints(srv):
    """How many checkpoints the server has made, from its /metrics."""
    samples = scrape(srv)
    name = "tafel_store_checkpoint_seconds_count"
    assert (name, ()) in samples, f"no {name} in /metrics"
    return value(samples, name)


def kill9_while_writing(srv, writer, threads, enough):
    """Runs `writer(w, stop)` on `threads` threads until `enough()` holds (or 60 s pass),
    SIGKILLs the server under them and joins them; returns whether `enough()` held."""
    stop = threading.Event()
    pool = [threading.Thread(target=writer, args=(w, stop)) for w in range(threads)]
    for th in pool:
        th.start()
    deadline = time.monotonic() + 60
    held = False
    while time.monotonic() < deadline and not (held := enough()):
        time.sleep(0.02)
    srv.kill9()
    stop.set()
    for th in pool:
        th.join(30)
    return held


def test_kill9_keeps_acknowledged_writes(fresh_server):
    srv = fresh_server
    table, other, gone = populate(srv)
    before = snapshot(srv, table)
    assert len(before) == 500 - 25
    assert sum(1 for e in before if e.get("Merged")) == 50
    names_before = tables(srv, "dur")
    assert gone not in names_before and other in names_before

    srv.kill9()
    srv.start()
    check_same(srv, table, before, names_before)
    # Writable after recovery, and recovery is repeatable.
    assert_error(srv.raw.insert(table, {"PartitionKey": "p0", "RowKey": "000000"}), 409, "EntityAlreadyExists")
    r = srv.raw.insert(table, {"PartitionKey": "new", "RowKey": "1"})
    assert r.status_code == 201, r.text
    before = snapshot(srv, table)
    srv.kill9()
    srv.start()
    check_same(srv, table, before, names_before)


def test_sigterm_graceful_shutdown_and_restart(fresh_server):
    srv = fresh_server
    table, _, _ = populate(srv, n=300)
    before = snapshot(srv, table)
    names_before = tables(srv, "dur")
    t0 = time.monotonic()
    code = srv.stop()
    assert code == 0, f"tafel exit code after SIGTERM: {code}"
    assert time.monotonic() - t0 < 15
    srv.start()
    check_same(srv, table, before, names_before)


def test_kill9_during_concurrent_writes(fresh_server):
    """Every write acknowledged before SIGKILL is present afterwards, intact."""
    srv = fresh_server
    raw = srv.raw
    table = unique_table_name("crash")
    assert raw.create_table(table).status_code == 201
    acked = {}
    lock = threading.Lock()

    def writer(w, stop):
        i = 0
        while not stop.is_set() and i < 5000:
            rk = f"{w:02d}-{i:05d}"
            try:
                r = raw.insert(table, {"PartitionKey": f"w{w}", "RowKey": rk, "V": i}, headers={"Prefer": "return-no-content"}, timeout=10)
            except Exception:  # noqa: BLE001 - the server goes away mid-request
                return
            if r.status_code == 204:
                with lock:
                    acked[(f"w{w}", rk)] = i
            i += 1

    kill9_while_writing(srv, writer, 6, lambda: len(acked) >= 600)
    with lock:
        acked_now = dict(acked)
    assert len(acked_now) > 50, f"only {len(acked_now)} writes acknowledged before the kill"
    srv.start()
    stored = {(e["PartitionKey"], e["RowKey"]): e["V"] for e in raw.query_all(table)}
    missing = [k for k in acked_now if k not in stored]
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
    wrong = [k for k, v in acked_now.items() if stored[k] != v]
    assert not wrong, wrong[:5]


def test_sigterm_under_load_finishes_in_flight_writes_and_loses_none(fresh_server):
    """SIGTERM while writers keep their keep-alive connections busy: the serving
    threads stop taking requests and finish the ones they hold before the store
    shuts down, so no request gets a 5xx, the exit is clean and every acknowledged
    write is there after a restart."""
    srv = fresh_server
    raw = srv.raw
    table = unique_table_name("term")
    assert raw.create_table(table).status_code == 201
    acked = {}
    failures = []
    lock = threading.Lock()

    def writer(w):
        for i in range(5000):
            rk = f"{w:02d}-{i:05d}"
            try:
                r = raw.insert(table, {"PartitionKey": f"w{w}", "RowKey": rk, "V": i}, headers={"Prefer": "return-no-content"}, timeout=10)
            except Exception:  # noqa: BLE001 - connections close once the server drains
                return
            with lock:
                if r.status_code == 204:
                    acked[(f"w{w}", rk)] = i
                else:
                    failures.append((r.status_code, r.text[:200]))
                    return

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with lock:
            if len(acked) >= 300:
                break
        time.sleep(0.02)
    code = srv.stop()
    for t in threads:
        t.join(30)
    assert code == 0, f"tafel exit code after SIGTERM under load: {code}"
    assert not failures, f"requests failed during the drain: {failures[:3]}"
    with lock:
        acked_now = dict(acked)
    assert len(acked_now) >= 300
    srv.start()
    stored = {(e["PartitionKey"], e["RowKey"]): e["V"] for e in raw.query_all(table)}
    missing = [k for k in acked_now if k not in stored]
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"


ACL_XML = (
    '<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers><SignedIdentifier><Id>walpolicy</Id>'
    "<AccessPolicy><Permission>r</Permission></AccessPolicy></SignedIdentifier></SignedIdentifiers>"
)


@embedded_only
def test_kill9_right_after_writes_replays_the_write_ahead_log(fresh_server):
    """Writes acknowledged just before SIGKILL live only in the write-ahead log (the
    store checkpoints after a second of idleness or five of writes): every kind of
    change must come back from it, and a clean restart has nothing left to replay."""
    srv = fresh_server
    raw = srv.raw
    table = unique_table_name("wal")
    gone = unique_table_name("walgone")
    assert raw.create_table(table).status_code == 201
    assert raw.create_table(gone).status_code == 201
    for i in range(40):
        r = raw.insert(table, {"PartitionKey": "p", "RowKey": f"{i:03d}", "N": i}, headers={"Prefer": "return-no-content"})
        assert r.status_code == 204, r.text
    # Let the idle checkpoint run, so what follows is a short burst well inside
    # both checkpoint intervals, even on a slow machine.
    time.sleep(1.5)
    log_from = srv.log_size()
    for i in range(40, 45):
        r = raw.insert(table, {"PartitionKey": "p", "RowKey": f"{i:03d}", "N": i}, headers={"Prefer": "return-no-content"})
        assert r.status_code == 204, r.text
    r = raw.request("MERGE", entity_path(table, "p", "001"), json={"Merged": True}, headers={"If-Match": "*"})
    assert r.status_code == 204, r.text
    # A long value, and one replaced by a short one before the kill.
    long_text = "ü" * 300
    for rk, text in (("long", long_text), ("shrunk", long_text), ("shrunk", "short")):
        r = raw.put(entity_path(table, "p", rk), json={"PartitionKey": "p", "RowKey": rk, "N": -1, "Text": text})
        assert r.status_code == 204, r.text
    assert raw.delete(entity_path(table, "p", "002"), headers={"If-Match": "*"}).status_code == 204
    assert raw.delete_table(gone).status_code == 204
    r = raw.put(f"/{table}", query={"comp": "acl"}, body=ACL_XML, content_type="application/xml")
    assert r.status_code == 204, r.text
    srv.kill9()

    srv.start()
    assert "replaying the write-ahead log" in srv.log_text(log_from), srv.log_tail()
    after = snapshot(srv, table)
    assert [e["RowKey"] for e in after] == [f"{i:03d}" for i in range(45) if i != 2] + ["long", "shrunk"]
    assert [e["RowKey"] for e in after if e.get("Merged")] == ["001"]
    assert all(e["N"] == int(e["RowKey"]) for e in after[:-2])
    assert [(e["RowKey"], e["Text"]) for e in after[-2:]] == [("long", long_text), ("shrunk", "short")]
    assert tables(srv, "wal") == [table]
    acl = raw.get(f"/{table}", query={"comp": "acl"}, accept="application/xml")
    assert acl.status_code == 200 and "walpolicy" in acl.text, acl.text
    # New writes after recovery go on from where the log left off.
    r = raw.insert(table, {"PartitionKey": "p", "RowKey": "new"}, headers={"Prefer": "return-no-content"})
    assert r.status_code == 204, r.text

    assert srv.stop() == 0
    log_from = srv.log_size()
    srv.start()
    assert "replaying the write-ahead log" not in srv.log_text(log_from)
    assert len(snapshot(srv, table)) == 47


def test_kill9_during_checkpoints_keeps_acknowledged_batches(fresh_server):
    """Batches big enough that the store checkpoints every few hundred of them (its file's
    pages are then written and synced by a thread of their own while writes go on): every
    changeset acknowledged before SIGKILL is there afterwards, whole."""
    from azure.data.tables import TableClient

    srv = fresh_server
    table = unique_table_name("ckpt")
    assert srv.raw.create_table(table).status_code == 201
    text = "x" * 1500
    acked = []
    lock = threading.Lock()

    def writer(w, stop):
        with TableClient.from_connection_string(srv.conn_str, table) as t:
            b = 0
            while not stop.is_set():
                pk = f"w{w}-{b:05d}"
                ops = [("create", {"PartitionKey": pk, "RowKey": f"{i:03d}", "T": text, "N": i}) for i in range(100)]
                try:
                    t.submit_transaction(ops)
                except Exception:  # noqa: BLE001 - the server goes away mid-request
                    return
                with lock:
                    acked.append(pk)
                b += 1

    if BACKEND == "embedded":
        # ~160 KB a changeset: a checkpoint every hundred or so. The kill comes once two
        # have been made under the load, so it lands among them, not before the first.
        before = checkpoints(srv)
        made_two = kill9_while_writing(srv, writer, 6, lambda: len(acked) >= 100 and checkpoints(srv) >= before + 2)
        assert made_two, f"no two checkpoints under {len(acked)} changesets in 60 s"
    else:
        # The database makes changesets durable itself: the kill comes under the same load.
        kill9_while_writing(srv, writer, 6, lambda: len(acked) >= 200)
    with lock:
        acked_now = list(acked)
    assert len(acked_now) >= 100, f"only {len(acked_now)} changesets acknowledged before the kill"
    srv.start()
    counts = {}
    for e in srv.raw.query_all(table, query={"$select": "PartitionKey,N"}):
        counts[e["PartitionKey"]] = counts.get(e["PartitionKey"], 0) + 1
    lost = [pk for pk in acked_now if counts.get(pk) != 100]
    assert not lost, f"{len(lost)} acknowledged changesets lost or partial, e.g. {[(pk, counts.get(pk)) for pk in lost[:5]]}"
    assert all(n == 100 for n in counts.values()), "a changeset was applied in part"


@embedded_only
@pytest.mark.parametrize("bound_mb", ["64", "0"])
def test_writes_held_in_the_write_buffer_survive_kill9(_workdir, bound_mb):
    """Small writes are held in the write buffer (`--write-buffer-mb`), already synced to
    the log, until a checkpoint folds them into the store file; with 0 there is no
    buffer. Either way a kill -9 loses no acknowledged write."""
    name = uuid.uuid4().hex[:8]
    srv = TafelServer(
        _workdir / f"data-wb-{name}", _workdir / f"tafel-wb-{name}.log", extra_args=["--write-buffer-mb", bound_mb]
    )
    srv.start()
    try:
        raw = srv.raw
        table = unique_table_name("wbuf")
        assert raw.create_table(table).status_code == 201
        written = 0
        held = []
        # The gauge read right after the writes; an idle checkpoint (after a second)
        # may fold them first on a slow machine, so write and look again.
        for _ in range(5):
            for i in range(written, written + 20):
                r = raw.insert(table, {"PartitionKey": "p", "RowKey": f"{i:04d}", "N": i}, headers={"Prefer": "return-no-content"})
                assert r.status_code == 204, r.text
            written += 20
            r = raw.request("MERGE", entity_path(table, "p", "0001"), json={"Merged": True}, headers={"If-Match": "*"})
            assert r.status_code == 204, r.text
            held.append(value(scrape(srv), "tafel_store_write_buffer_bytes"))
            if held[-1] > 0:
                break
        if bound_mb == "0":
            assert held == [0] * 5, held
        else:
            assert held[-1] > 20 * 20, held
        assert raw.delete(entity_path(table, "p", "0002"), headers={"If-Match": "*"}).status_code == 204
        srv.kill9()

        srv.start()
        after = snapshot(srv, table)
        assert [e["RowKey"] for e in after] == [f"{i:04d}" for i in range(written) if i != 2]
        assert [e["RowKey"] for e in after if e.get("Merged")] == ["0001"]
        assert all(e["N"] == int(e["RowKey"]) for e in after)
        assert value(scrape(srv), "tafel_store_write_buffer_bytes") == 0
    finally:
        srv.kill9()
