"""Purge by filter (docs/lifecycle.md): ``POST /accounts/A/tables/T/purge`` on the admin
listener starts a job that deletes every matching entity in bounded transactions;
``GET /purge-jobs/ID`` shows its progress; a job a kill -9 interrupted resumes when the
server starts again; ``tafel purge`` drives it. Data is written by the Python SDK; what
survives is checked by queries and ``$count``, the deletes in the change feed, the
counters in ``/stats``."""

import json
import subprocess
import time
import uuid

import pytest
import requests
from azure.data.tables import TableServiceClient

from conftest import (
    ACCOUNT,
    BACKEND,
    TafelServer,
    declare_index,
    create_postgres_database,
    free_port,
    postgres_only,
    tafel_binary,
    unique_table_name,
)


@pytest.fixture(scope="module")
def srv(_workdir):
    name = uuid.uuid4().hex[:8]
    s = TafelServer(_workdir / f"purge-{name}", _workdir / f"purge-{name}.log", extra_args=["--change-retention", "1h"])
    s.start()
    yield s
    s.stop()


def fill(svc: TableServiceClient, name: str, partitions: str, rows: int):
    tc = svc.create_table(name)
    for pk in partitions:
        for lo in range(0, rows, 100):
            tc.submit_transaction(
                [("create", {"PartitionKey": pk, "RowKey": f"{i:05}", "n": i}) for i in range(lo, min(rows, lo + 100))]
            )
    return tc


def start(s, table: str, body=None, **kw) -> requests.Response:
    return requests.post(
        f"{s.admin_url}/accounts/{ACCOUNT}/tables/{table}/purge", json=body if body is not None else {}, timeout=10, **kw
    )


def job(s, job_id: str) -> dict:
    r = requests.get(f"{s.admin_url}/purge-jobs/{job_id}", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def purge(s, table: str, body=None) -> dict:
    """Runs a purge to its end; the finished job."""
    r = start(s, table, body)
    assert r.status_code == 202, r.text
    started = r.json()
    assert r.headers["Location"] == f"/purge-jobs/{started['id']}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        j = job(s, started["id"])
        if j["state"] != "running":
            assert j["state"] == "done", j
            return j
        time.sleep(0.05)
    raise AssertionError(f"purge {started['id']} did not finish")


def count(s, table: str) -> int:
    r = s.raw.get(f"/{table}/$count", accept=None)
    assert r.status_code == 200, r.text
    return int(r.text)


def stats(s, table: str) -> dict:
    r = requests.get(f"{s.admin_url}/accounts/{ACCOUNT}/tables/{table}/stats", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def keys(tc) -> set:
    return {(e["PartitionKey"], e["RowKey"]) for e in tc.list_entities()}


def feed(s, table: str, after: str) -> list:
    out = []
    while True:
        r = s.raw.get("/$changes", query={"after": after, "table": table}, accept=None)
        assert r.status_code == 200, r.text
        lines = [json.loads(line) for line in r.text.splitlines() if line]
        if not lines:
            return out
        out += lines
        after = r.headers["x-tafel-next-after"]


def feed_deletes(s, table: str, after: str) -> list:
    return [c for c in feed(s, table, after) if c["op"] == "delete"]


def feed_head(s) -> str:
    r = s.raw.get("/$changes", query={"after": "latest"}, accept=None)
    assert r.status_code == 200, r.text
    return r.headers["x-tafel-head"]


def test_purge_by_filter_partition_both_and_all_leaves_exactly_the_rest(srv):
    name = unique_table_name("purge")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        tc = fill(svc, name, "abc", 250)
        expected = {(pk, f"{i:05}") for pk in "abc" for i in range(250)}
        head = feed_head(srv)
        full_bytes = stats(srv, name)["bytes"]

        # A filter on a property: a scan with a residual, across partitions.
        j = purge(srv, name, {"filter": "n ge 200", "batch": 64})
        expected = {k for k in expected if int(k[1]) < 200}
        assert j["deleted"] == 150 and j["filter"] == "n ge 200"
        assert keys(tc) == expected and count(srv, name) == len(expected) == 600
        # A partition: its key range only.
        j = purge(srv, name, {"partition": "a"})
        expected = {k for k in expected if k[0] != "a"}
        assert j["deleted"] == 200 and keys(tc) == expected and count(srv, name) == 400
        # Both: the partition's entities that match.
        j = purge(srv, name, {"partition": "b", "filter": "n lt 10 or RowKey eq '00150'"})
        expected = {k for k in expected if not (k[0] == "b" and (int(k[1]) < 10 or k[1] == "00150"))}
        assert j["deleted"] == 11 and keys(tc) == expected and count(srv, name) == 389
        st = stats(srv, name)
        assert st["entities"] == 389 and 0 < st["bytes"] < full_bytes
        # Nothing matches: a job that deletes nothing.
        assert purge(srv, name, {"filter": "n gt 100000"})["deleted"] == 0
        # No filter, no partition: the whole table, emptied at once (done in the answer).
        r = start(srv, name)
        assert r.status_code == 202, r.text
        j = r.json()
        assert j["state"] == "done" and j["deleted"] == 389, j
        assert count(srv, name) == 0 and keys(tc) == set()
        st = stats(srv, name)
        assert (st["entities"], st["bytes"]) == (0, 0)
        # Every entity purged by filter is a delete in the change feed, once; the
        # truncate is one change of its own.
        changes = feed(srv, name, head)
        deletes = [c for c in changes if c["op"] == "delete"]
        assert len(deletes) == 361
        assert len({(c["PartitionKey"], c["RowKey"]) for c in deletes}) == 361
        assert [c["op"] for c in changes][-1] == "truncateTable"
        assert [c["op"] for c in changes].count("truncateTable") == 1
        # The table is still there and writable.
        tc.create_entity({"PartitionKey": "a", "RowKey": "again", "n": 1})
        assert count(srv, name) == 1


def test_bad_requests_change_nothing(srv):
    name = unique_table_name("purgebad")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        fill(svc, name, "ab", 20)
    before = requests.get(f"{srv.admin_url}/purge-jobs", timeout=10).json()["jobs"]
    r = start(srv, name, {"filter": "n gt"})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "InvalidFilter" and "filter" in r.json()["message"]
    r = start(srv, name, {"filter": "n gt 1", "partition": "a", "extra": 1})
    assert r.status_code == 400 and "extra" in r.json()["message"]
    r = start(srv, name, {"batch": 5000})
    assert r.status_code == 400 and "batch" in r.json()["message"]
    r = requests.post(
        f"{srv.admin_url}/accounts/{ACCOUNT}/tables/{name}/purge",
        data="not json",
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert r.status_code == 400
    r = start(srv, "nosuchtable", {"filter": "n gt 1"})
    assert r.status_code == 404 and r.json()["error"] == "TableNotFound"
    r = requests.post(f"{srv.admin_url}/accounts/nosuchaccount/tables/{name}/purge", json={}, timeout=10)
    assert r.status_code == 404 and r.json()["error"] == "AccountNotFound"
    assert requests.get(f"{srv.admin_url}/purge-jobs/0000", timeout=10).status_code == 404
    r = requests.get(f"{srv.admin_url}/accounts/{ACCOUNT}/tables/{name}/purge", timeout=10)
    assert r.status_code == 405 and r.headers["Allow"] == "POST"
    assert count(srv, name) == 40
    assert requests.get(f"{srv.admin_url}/purge-jobs", timeout=10).json()["jobs"] == before


def tafel_purge(s, *args, input_text=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(tafel_binary()), "purge", "--admin-url", s.admin_url, *args],
        capture_output=True,
        text=True,
        input=input_text,
        timeout=60,
    )


def test_tafel_purge_command(srv):
    name = unique_table_name("purgecli")
    svc = TableServiceClient.from_connection_string(srv.conn_str)
    tc = fill(svc, name, "xy", 30)
    # Without --yes and no terminal to ask on: refused, nothing deleted.
    p = tafel_purge(srv, "--table", name, "--partition", "x", input_text="y\n")
    assert p.returncode == 1 and "--yes" in p.stderr, p
    assert count(srv, name) == 60
    p = tafel_purge(srv, "--table", name, "--partition", "x", "--filter", "n lt 5", "--yes")
    assert p.returncode == 0, p
    assert "purged 5 entities" in p.stderr + p.stdout
    assert count(srv, name) == 55
    assert ("x", "00004") not in keys(tc) and ("y", "00004") in keys(tc)
    p = tafel_purge(srv, "--table", name, "--filter", "n lt", "--yes")
    assert p.returncode == 1 and "tafel purge:" in p.stderr and "filter" in p.stderr, p
    p = tafel_purge(srv, "--table", "nosuchtable", "--yes")
    assert p.returncode == 1 and "404" in p.stderr, p
    p = tafel_purge(srv, "--table", name, "--yes", "--no-wait")
    assert p.returncode == 0 and p.stdout.strip(), p
    deadline = time.monotonic() + 30
    while job(srv, p.stdout.strip())["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job(srv, p.stdout.strip())["state"] == "done" and count(srv, name) == 0
    assert "--partition" in tafel_purge(srv, "--help").stdout


@pytest.mark.parametrize("stop", ["kill9", "sigterm"])
def test_a_purge_stopped_mid_job_resumes_on_restart(_workdir, stop):
    name = uuid.uuid4().hex[:8]
    s = TafelServer(_workdir / f"purgekill-{name}", _workdir / f"purgekill-{name}.log")
    s.start()
    try:
        table = unique_table_name("purgekill")
        with TableServiceClient.from_connection_string(s.conn_str) as svc:
            tc = fill(svc, table, "pq", 1500)
            tc.create_entity({"PartitionKey": "keep", "RowKey": "1", "n": -1})
        # One key per transaction: slow enough for the kill to land mid-job.
        r = start(s, table, {"filter": "n ge 0", "batch": 1})
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        deadline = time.monotonic() + 30
        while job(s, job_id)["deleted"] < 50 and time.monotonic() < deadline:
            time.sleep(0.01)
        if stop == "kill9":
            s.kill9()
        else:
            assert s.stop() == 0
        s.start()
        # Its record is in the store: the restarted server knows the job, mid-way.
        record = job(s, job_id)
        assert record["state"] in ("running", "done") and record["deleted"] >= 50, record
        deadline = time.monotonic() + 120
        while job(s, job_id)["state"] == "running" and time.monotonic() < deadline:
            time.sleep(0.1)
        done = job(s, job_id)
        assert done["state"] == "done", done
        assert count(s, table) == 1 and stats(s, table)["entities"] == 1
        with TableServiceClient.from_connection_string(s.conn_str) as svc:
            assert keys(svc.get_table_client(table)) == {("keep", "1")}
        # A batch deleted just before the kill may go uncounted; never more than one.
        assert 2999 <= done["deleted"] <= 3000, done
    finally:
        s.kill9()


@postgres_only
def test_a_purge_whose_node_is_killed_is_finished_by_another_node(_workdir):
    """Job records live in the database: node B sees node A's job and, once A stops
    renewing its claim (kill -9), takes it over from A's last recorded position."""
    database = create_postgres_database()
    nodes = []
    for name in "ab":
        tag = f"{name}-{uuid.uuid4().hex[:6]}"
        n = TafelServer(_workdir / f"purgenode-{tag}", _workdir / f"purgenode-{tag}.log", port=free_port())
        n.database_url = database
        n.start()
        nodes.append(n)
    a, b = nodes
    try:
        table = unique_table_name("purgenode")
        with TableServiceClient.from_connection_string(a.conn_str) as svc:
            fill(svc, table, "pq", 1500).create_entity({"PartitionKey": "keep", "RowKey": "1", "n": -1})
        r = start(a, table, {"filter": "n ge 0", "batch": 1})
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        deadline = time.monotonic() + 30
        while job(a, job_id)["deleted"] < 50 and time.monotonic() < deadline:
            time.sleep(0.01)
        # B sees A's job while A runs it, and does not run it too.
        seen = job(b, job_id)
        assert seen["state"] == "running" and seen["deleted"] >= 50, seen
        a.kill9()
        deadline = time.monotonic() + 120
        while job(b, job_id)["state"] == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
        done = job(b, job_id)
        assert done["state"] == "done", done
        assert count(b, table) == 1 and stats(b, table)["entities"] == 1
        with TableServiceClient.from_connection_string(b.conn_str) as svc:
            assert keys(svc.get_table_client(table)) == {("keep", "1")}
        assert 2999 <= done["deleted"] <= 3000, done
    finally:
        for n in nodes:
            n.kill9()


def test_a_whole_table_truncate_is_one_change_and_leaves_the_table_usable(srv):
    """Through the SDK: 2,000 entities gone in one commit, the table kept (writable,
    counted from zero), one truncateTable in the feed, and no delete."""
    name = unique_table_name("purgetrunc")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        tc = fill(svc, name, "abcd", 500)
        head = feed_head(srv)
        j = purge(srv, name)
        assert j["deleted"] == 2000 and j["filter"] is None and j["partition"] is None, j
        assert count(srv, name) == 0 and keys(tc) == set()
        assert [c["op"] for c in feed(srv, name, head)] == ["truncateTable"]
        tc.create_entity({"PartitionKey": "a", "RowKey": "00001", "n": 7})
        assert keys(tc) == {("a", "00001")} and count(srv, name) == 1
        assert stats(srv, name)["entities"] == 1


def test_a_truncate_takes_the_index_entries_and_keeps_the_index(srv):
    name = unique_table_name("purgeidx")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        tc = fill(svc, name, "ab", 100)
        declare_index(srv, name, "n")
        assert purge(srv, name)["deleted"] == 200
        r = srv.raw.request("GET", f"/{name}()", query={"$filter": "n eq 5"})
        assert r.status_code == 200 and r.headers["x-tafel-query-plan"] == "index:n", r.headers
        assert r.json()["value"] == []
        tc.create_entity({"PartitionKey": "c", "RowKey": "x", "n": 5})
        r = srv.raw.request("GET", f"/{name}()", query={"$filter": "n eq 5"})
        assert [(e["PartitionKey"], e["RowKey"]) for e in r.json()["value"]] == [("c", "x")]
