"""Faults between Tafel nodes and PostgreSQL: the database restarting under a write load,
a connection cut while a write's commit is on its way, a node cut off from the database while
another keeps serving. Each time: clients get 503 ServerBusy promptly (never a hang,
never a 500), nodes reconnect by themselves, and no acknowledged write is lost or
half-applied."""

from __future__ import annotations

import threading
import time
import uuid
from urllib.parse import urlsplit

import pytest
import requests

from conftest import TafelServer, assert_error, create_postgres_database, pg_ctl, postgres_only, unique_table_name
from pgproxy import DelayProxy
from roundtrips import batch_body

pytestmark = postgres_only

# A request answered later than this counts as a hang.
PROMPT = 12.0


def start_node(workdir, database_url: str, *extra: str) -> TafelServer:
    tag = uuid.uuid4().hex[:6]
    srv = TafelServer(workdir / f"fault-data-{tag}", workdir / f"fault-tafel-{tag}.log", extra_args=list(extra))
    srv.database_url = database_url
    srv.start()
    return srv


@pytest.fixture
def proxied(_workdir):
    """A node reaching its database through a proxy the test can cut."""
    database = create_postgres_database()
    parts = urlsplit(database)
    proxy = DelayProxy(parts.hostname, parts.port)
    srv = start_node(_workdir, proxy.url_for(database))
    yield srv, proxy, database
    srv.stop()
    proxy.close()


def test_database_restart_under_write_load_fails_fast_and_loses_nothing(_workdir):
    srv = start_node(_workdir, create_postgres_database())
    try:
        write_through_a_database_crash(srv)
    finally:
        srv.stop()


def write_through_a_database_crash(srv: TafelServer) -> None:
    table = unique_table_name("restart")
    assert srv.raw.create_table(table).status_code == 201
    acknowledged, statuses, slow = [], [], []
    stop = threading.Event()

    def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            key = f"w{n}-{i:06d}"
            started = time.monotonic()
            try:
                r = srv.raw.insert(table, {"PartitionKey": "p", "RowKey": key, "N": i}, timeout=PROMPT + 5)
            except Exception as e:  # noqa: BLE001 - a transport error is a finding too
                statuses.append(repr(e))
                continue
            if time.monotonic() - started > PROMPT:
                slow.append((key, r.status_code))
            statuses.append(r.status_code)
            if r.status_code == 201:
                acknowledged.append(key)
            elif r.status_code == 503:
                time.sleep(0.05)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        before = len(acknowledged)
        # A crash of the database, then its restart.
        pg_ctl("stop")
        try:
            time.sleep(2.0)
            during = set(statuses[-20:])
        finally:
            pg_ctl("start")
        # The node reconnects by itself: writes succeed again.
        recovered_at = len(acknowledged)
        deadline = time.monotonic() + 30
        while len(acknowledged) < recovered_at + 20 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert before > 0, statuses[:20]
    assert len(acknowledged) >= recovered_at + 20, "writes did not resume after the database came back"
    assert not slow, f"requests hung past {PROMPT}s: {slow[:5]}"
    odd = [s for s in statuses if s not in (201, 503)]
    assert not odd, f"only 201 and 503 ServerBusy expected, got {sorted(set(map(str, odd)))}"
    assert 503 in during, statuses[-20:]
    # Every acknowledged write is there.
    stored = {e["RowKey"] for e in srv.raw.query_all(table)}
    missing = [k for k in acknowledged if k not in stored]
    assert not missing, f"{len(missing)} acknowledged writes lost: {missing[:5]}"


# A value written only by the inserts under test: the proxy cuts the connection at the
# message that carries it, the insert's single statement, which commits as it ends. Other
# writes are cut at their COMMIT, which may travel in a message of its own.
CUT_MARK = "cut-where-this-commits"


@pytest.mark.parametrize("reaches_database", [True, False], ids=["commit-arrives", "commit-lost"])
def test_connection_cut_during_commit_is_an_error_and_all_or_nothing(proxied, reaches_database):
    srv, proxy, _ = proxied
    table = unique_table_name("cut")
    assert srv.raw.create_table(table).status_code == 201
    base = f"http://127.0.0.1:{srv.port}/devstoreaccount1/{table}"
    mark = CUT_MARK.encode()
    # A single insert (one statement), then a 100-entity batch of inserts (one statement),
    # then an upsert (a transaction of two round trips), each cut off as it commits.
    proxy.cut_after(mark, forward=reaches_database)
    r = srv.raw.insert(table, {"PartitionKey": "p", "RowKey": "single", "V": 1, "M": CUT_MARK}, timeout=PROMPT)
    assert not proxy.fault_pending(), "the fault never struck"
    assert_error(r, 503, "ServerBusy")
    entities = [{"PartitionKey": "b", "RowKey": f"{i:03d}", "V": i} for i in range(100)]
    entities[-1]["M"] = CUT_MARK
    proxy.cut_after(mark, forward=reaches_database)
    body = batch_body(base, [("POST", e) for e in entities])
    r = srv.raw.post("/$batch", body=body, content_type="multipart/mixed; boundary=b", timeout=PROMPT)
    assert not proxy.fault_pending(), "the fault never struck"
    # A batch answers 202 with the failed operation's status inside.
    assert r.status_code == 202 and "HTTP/1.1 503" in r.text, (r.status_code, r.text[:800])
    proxy.cut_after(b"COMMIT", forward=reaches_database)
    r = srv.raw.put(f"/{table}(PartitionKey='u',RowKey='upsert')", json={"V": 2}, timeout=PROMPT)
    assert not proxy.fault_pending(), "the fault never struck"
    assert_error(r, 503, "ServerBusy")
    # The node reconnects by itself; the writes are wholly there or wholly absent,
    # each exactly once.
    stored = srv.raw.query_all(table)
    keys = sorted(e["RowKey"] for e in stored)
    if reaches_database:
        assert keys == sorted([f"{i:03d}" for i in range(100)] + ["single", "upsert"]), keys[:5]
        assert all(e["V"] == int(e["RowKey"]) for e in stored if e["PartitionKey"] == "b")
    else:
        assert keys == []
    # A retry by the client of the insert it was not told about sees the truth.
    again = srv.raw.insert(table, {"PartitionKey": "p", "RowKey": "single", "V": 1})
    assert again.status_code == (409 if reaches_database else 201), again.text


def test_node_cut_off_from_the_database_fails_fast_while_another_serves(_workdir, proxied):
    cut, proxy, database = proxied
    direct = start_node(_workdir, database)
    try:
        table = unique_table_name("island")
        assert direct.raw.create_table(table).status_code == 201
        assert cut.raw.insert(table, {"PartitionKey": "p", "RowKey": "before"}).status_code == 201
        proxy.refuse = True
        proxy.cut()
        for i in range(5):
            started = time.monotonic()
            r = cut.raw.insert(table, {"PartitionKey": "p", "RowKey": f"cut{i}"}, timeout=PROMPT + 5)
            assert time.monotonic() - started < PROMPT
            assert_error(r, 503, "ServerBusy")
            got = cut.raw.get_entity(table, "p", "before", timeout=PROMPT + 5)
            assert_error(got, 503, "ServerBusy")
            # The other node serves throughout.
            assert direct.raw.insert(table, {"PartitionKey": "p", "RowKey": f"other{i}"}).status_code == 201
        assert requests.get(cut.admin_url + "/ready", timeout=PROMPT).status_code == 503
        assert requests.get(direct.admin_url + "/ready", timeout=PROMPT).status_code == 200
        proxy.refuse = False
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            r = cut.raw.insert(table, {"PartitionKey": "p", "RowKey": "after"})
            if r.status_code == 201:
                break
            time.sleep(0.2)
        assert r.status_code == 201, r.text
        keys = {e["RowKey"] for e in cut.raw.query_all(table)}
        assert keys == {"before", "after"} | {f"other{i}" for i in range(5)}
    finally:
        direct.stop()


def test_database_that_stops_answering_fails_requests_within_the_timeout(_workdir):
    """A link where packets vanish: the proxy keeps the connection open and forwards
    nothing. The request fails after --postgres-timeout, not never."""
    database = create_postgres_database()
    parts = urlsplit(database)
    proxy = DelayProxy(parts.hostname, parts.port)
    srv = start_node(_workdir, proxy.url_for(database), "--postgres-timeout", "2")
    try:
        table = unique_table_name("stall")
        assert srv.raw.create_table(table).status_code == 201
        proxy.delay = 3600.0
        started = time.monotonic()
        r = srv.raw.insert(table, {"PartitionKey": "p", "RowKey": "r"}, timeout=30)
        took = time.monotonic() - started
        assert_error(r, 503, "ServerBusy")
        assert 1.5 < took < 8, took
        proxy.delay = 0.0
        proxy.cut()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            got = srv.raw.get_entity(table, "p", "r")
            if got.status_code != 503:
                break
            time.sleep(0.2)
        # The stalled write never reached the database, or reached it whole.
        assert got.status_code in (200, 404), got.text
    finally:
        srv.stop()
        proxy.close()
