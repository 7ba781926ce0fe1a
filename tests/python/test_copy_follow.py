"""The change feed's consumers against real servers: `tafel copy --follow` keeps a second
Tafel equal to a source under a write load of inserts, merges, replaces, deletes and batches,
type by type, across a Ctrl-C and a --resume; `tafel watch` prints the feed as JSON lines;
`tafel copy --since` and `--follow --poll` follow a source without a feed by its Timestamps
(a Tafel started without --change-retention stands in for Azure and Azurite), and say that
deletes are not seen; `--follow` without a feed fails saying what to do."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest
import requests
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.data.tables import EdmType, EntityProperty, TableServiceClient, UpdateMode

from conftest import ACCOUNT, TafelServer, tafel_binary, unique_table_name
from edge_data import INT64_MAX, INT64_MIN, edge_entities, table_of


def tafel(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(tafel_binary()), *args], capture_output=True, text=True, timeout=timeout, **kw)


def start_server(workdir, name: str, *extra: str, **kw) -> TafelServer:
    tag = uuid.uuid4().hex[:6]
    srv = TafelServer(workdir / f"data-{name}-{tag}", workdir / f"tafel-{name}-{tag}.log", extra_args=list(extra), **kw)
    srv.start()
    return srv


@pytest.fixture(scope="module")
def servers(_workdir):
    """A source with a change feed, a target, and a source without a feed."""
    out = {
        "feed": start_server(_workdir, "feed", "--change-retention", "1h"),
        "target": start_server(_workdir, "target"),
        "plain": start_server(_workdir, "plain"),
    }
    yield out
    for srv in out.values():
        srv.stop()


def random_entity(rnd: random.Random, pk: str, rk: str) -> dict:
    """An entity of a random subset of the eight types: merges add and keep properties,
    replaces drop them."""
    e = {"PartitionKey": pk, "RowKey": rk}
    candidates = {
        "I64": lambda: EntityProperty(rnd.randint(INT64_MIN, INT64_MAX), EdmType.INT64),
        "I32": lambda: rnd.randint(-(2**31), 2**31 - 1),
        "D": lambda: rnd.choice([rnd.random() * 1e300, -0.5, EntityProperty(7.0, EdmType.DOUBLE)]),
        "B": lambda: rnd.random() < 0.5,
        "S": lambda: rnd.choice(["", "ünï ✓", "x" * rnd.randint(1, 3000)]),
        "When": lambda: datetime(2000, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=rnd.randint(0, 10**15)),
        "Id": lambda: uuid.UUID(int=rnd.getrandbits(128)),
        "Bin": lambda: rnd.randbytes(rnd.randint(0, 64)),
    }
    for name, make in candidates.items():
        if rnd.random() < 0.6:
            e[name] = make()
    return e


class Writer(threading.Thread):
    """Writes to one table until stopped: inserts, merges, replaces (as upserts and as
    conditional updates), deletes and batches, over a small key space so every kind of
    write meets existing and missing keys."""

    def __init__(self, conn_str: str, table: str, seed: int):
        super().__init__(daemon=True)
        self.conn_str, self.table, self.rnd = conn_str, table, random.Random(seed)
        self.stop_flag = threading.Event()
        self.writes = 0
        self.error: Exception | None = None

    def run(self):
        try:
            with TableServiceClient.from_connection_string(self.conn_str) as svc:
                client = svc.get_table_client(self.table)
                while not self.stop_flag.is_set():
                    self.one(client)
                    self.writes += 1
        except Exception as e:  # reported by the test
            self.error = e

    def one(self, client):
        rnd = self.rnd
        pk, rk = f"p{rnd.randint(0, 3)}", f"r{rnd.randint(0, 24):02d}"
        kind = rnd.choice(["insert", "merge", "replace", "update", "delete", "batch"])
        try:
            if kind == "insert":
                client.create_entity(random_entity(rnd, pk, rk))
            elif kind == "merge":
                client.upsert_entity(random_entity(rnd, pk, rk), mode=UpdateMode.MERGE)
            elif kind == "replace":
                client.upsert_entity(random_entity(rnd, pk, rk), mode=UpdateMode.REPLACE)
            elif kind == "update":
                client.update_entity(random_entity(rnd, pk, rk), mode=rnd.choice([UpdateMode.MERGE, UpdateMode.REPLACE]))
            elif kind == "delete":
                client.delete_entity(pk, rk)
            else:
                rks = rnd.sample(range(25), rnd.randint(2, 8))
                ops = []
                for i in rks:
                    k = f"r{i:02d}"
                    op = rnd.choice(["upsert", "delete", "merge"])
                    if op == "delete":
                        ops.append(("delete", {"PartitionKey": pk, "RowKey": k}))
                    else:
                        mode = UpdateMode.REPLACE if op == "upsert" else UpdateMode.MERGE
                        ops.append(("upsert", random_entity(rnd, pk, k), {"mode": mode}))
                client.submit_transaction(ops)
        except HttpResponseError:
            pass  # an insert of a taken key, an update or a batch delete of a missing one


def head(srv: TafelServer) -> int:
    r = srv.raw.get("/$changes", query={"after": "latest"}, accept=None)
    assert r.status_code == 200, r.text
    return int(r.headers["x-tafel-head"])


def rows(svc: TableServiceClient, table: str) -> dict:
    """table_of, or {} while the table does not exist yet (the copy creates it)."""
    try:
        return table_of(svc, table)
    except ResourceNotFoundError:
        return {}


def state(path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def wait_for(cond, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def start_follow(srv_from: TafelServer, srv_to: TafelServer, table: str, cwd, *extra: str) -> subprocess.Popen:
    args = [str(tafel_binary()), "copy", "--from", srv_from.conn_str, "--table", table, "--to", srv_to.conn_str,
            "--create-table", "--follow", *extra]
    err = open(cwd / f"copy-{uuid.uuid4().hex[:6]}.stderr", "w+")
    proc = subprocess.Popen(args, cwd=str(cwd), stdout=subprocess.DEVNULL, stderr=err, text=True)
    proc.err_file = err  # type: ignore[attr-defined]
    return proc


def interrupt(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    proc.err_file.seek(0)  # type: ignore[attr-defined]
    return proc.err_file.read()  # type: ignore[attr-defined]


def test_copy_follow_keeps_a_target_equal_under_load_across_ctrl_c_and_resume(servers, tmp_path):
    source, target = servers["feed"], servers["target"]
    table = unique_table_name("follow")
    with TableServiceClient.from_connection_string(source.conn_str) as svc:
        client = svc.create_table(table)
        for e in edge_entities():
            client.create_entity(e)
    writer = Writer(source.conn_str, table, seed=47)
    writer.start()
    checkpoint = tmp_path / f"copy-{table}.follow"
    proc = start_follow(source, target, table, tmp_path)
    try:
        # Stopped once it has copied the table and applied some of the feed.
        wait_for(lambda: state(checkpoint).get("copied") and state(checkpoint).get("applied", 0) > 50,
                 "the copy to apply changes")
        err = interrupt(proc)
        assert proc.returncode == 130, err
        assert "--resume" in err and "lag" in err, err
        stopped_at = int(state(checkpoint)["after"])
        writes_at_stop = writer.writes
        wait_for(lambda: writer.writes > writes_at_stop + 100, "writes while the copy is stopped")
        proc = start_follow(source, target, table, tmp_path, "--resume")
        wait_for(lambda: int(state(checkpoint).get("after", 0)) > stopped_at, "the resumed copy to move on")
    finally:
        writer.stop_flag.set()
        writer.join(timeout=60)
    assert writer.error is None, writer.error
    try:
        # Lag 0: every change the source committed is applied.
        final = head(source)
        wait_for(lambda: int(state(checkpoint).get("after", 0)) >= final, "the copy's lag to reach 0")
        assert state(checkpoint)["caught_up"] is True
        with TableServiceClient.from_connection_string(source.conn_str) as s, \
                TableServiceClient.from_connection_string(target.conn_str) as t:
            want = table_of(s, table)
            assert len(want) > 100
            assert table_of(t, table) == want
    finally:
        err = interrupt(proc)
    assert proc.returncode == 130, err
    assert "changes applied in all" in err, err


def test_copy_follow_applies_table_deletion_and_recreation(servers, tmp_path):
    source, target = servers["feed"], servers["target"]
    table = unique_table_name("recreate")
    with TableServiceClient.from_connection_string(source.conn_str) as svc:
        svc.create_table(table).create_entity({"PartitionKey": "a", "RowKey": "old"})
    checkpoint = tmp_path / f"copy-{table}.follow"
    proc = start_follow(source, target, table, tmp_path)
    try:
        wait_for(lambda: state(checkpoint).get("copied"), "the initial copy")
        with TableServiceClient.from_connection_string(source.conn_str) as svc:
            svc.delete_table(table)
            svc.create_table(table).create_entity({"PartitionKey": "a", "RowKey": "new", "N": 1})
        final = head(source)
        wait_for(lambda: int(state(checkpoint).get("after", 0)) >= final, "the copy to catch up")
        with TableServiceClient.from_connection_string(target.conn_str) as t:
            assert list(table_of(t, table)) == [("a", "new")]
    finally:
        interrupt(proc)


def test_copy_follow_applies_a_truncate(servers, tmp_path):
    """A whole-table purge is one truncateTable change: the follower empties its
    target's table, and what is written after the truncate lands in it."""
    source, target = servers["feed"], servers["target"]
    table = unique_table_name("truncate")
    with TableServiceClient.from_connection_string(source.conn_str) as svc:
        tc = svc.create_table(table)
        for i in range(20):
            tc.create_entity({"PartitionKey": "a", "RowKey": f"{i:03}"})
    checkpoint = tmp_path / f"copy-{table}.follow"
    proc = start_follow(source, target, table, tmp_path)
    try:
        wait_for(lambda: state(checkpoint).get("copied"), "the initial copy")
        r = requests.post(f"{source.admin_url}/accounts/{ACCOUNT}/tables/{table}/purge", timeout=30)
        assert r.status_code == 202 and r.json()["state"] == "done", r.text
        with TableServiceClient.from_connection_string(source.conn_str) as svc:
            svc.get_table_client(table).create_entity({"PartitionKey": "b", "RowKey": "after"})
        final = head(source)
        wait_for(lambda: int(state(checkpoint).get("after", 0)) >= final, "the copy to catch up")
        with TableServiceClient.from_connection_string(target.conn_str) as t:
            assert list(table_of(t, table)) == [("b", "after")]
    finally:
        interrupt(proc)


def test_watch_prints_the_feed_as_json_lines(servers):
    source = servers["feed"]
    table = unique_table_name("watch")
    with TableServiceClient.from_connection_string(source.conn_str) as svc:
        client = svc.create_table(table)
        client.create_entity({"PartitionKey": "p", "RowKey": "1", "Big": EntityProperty(INT64_MAX, EdmType.INT64)})
        client.upsert_entity({"PartitionKey": "p", "RowKey": "1", "S": "x"}, mode=UpdateMode.MERGE)
        client.submit_transaction([("create", {"PartitionKey": "p", "RowKey": "2"}),
                                   ("create", {"PartitionKey": "p", "RowKey": "3"})])
        client.delete_entity("p", "1")
    r = tafel("watch", "--from", source.conn_str, "--table", table, "--once")
    assert r.returncode == 0, r.stderr
    changes = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(c["op"], c.get("RowKey")) for c in changes] == [
        ("createTable", None), ("insert", "1"), ("merge", "1"), ("insert", "2"), ("insert", "3"), ("delete", "1")]
    assert {c["table"] for c in changes} == {table}
    merged = changes[2]["entity"]
    assert merged["Big"] == str(INT64_MAX) and merged["Big@odata.type"] == "Edm.Int64" and merged["S"] == "x"
    assert changes[3]["txn"] == changes[4]["txn"] != changes[2]["txn"], "one batch, one txn"
    positions = [int(c["position"]) for c in changes]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    # From a position: what follows it; from now: nothing yet.
    r = tafel("watch", "--from", source.conn_str, "--table", table, "--once", "--after", changes[3]["position"])
    assert r.returncode == 0, r.stderr
    assert [json.loads(line)["RowKey"] for line in r.stdout.splitlines()] == ["3", "1"]
    assert f"--after {changes[5]['position']}" in r.stderr
    r = tafel("watch", "--from", source.conn_str, "--table", table, "--once", "--now")
    assert r.returncode == 0 and r.stdout == "", (r.stdout, r.stderr)


def test_watch_follows_until_ctrl_c(servers):
    source = servers["feed"]
    table = unique_table_name("watchlive")
    with TableServiceClient.from_connection_string(source.conn_str) as svc:
        client = svc.create_table(table)
        proc = subprocess.Popen([str(tafel_binary()), "watch", "--from", source.conn_str, "--table", table, "--now"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1)  # the watch is waiting on the head by now (no assertion rests on it)
            client.create_entity({"PartitionKey": "p", "RowKey": "live"})
            line = proc.stdout.readline()  # a long poll answers as the change commits
            assert json.loads(line)["RowKey"] == "live"
        finally:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_follow_without_a_feed_fails_saying_what_to_do(servers, tmp_path):
    source, target = servers["plain"], servers["target"]
    table = unique_table_name("nofeed")
    with TableServiceClient.from_connection_string(source.conn_str) as svc:
        svc.create_table(table)
    r = tafel("copy", "--from", source.conn_str, "--table", table, "--to", target.conn_str, "--create-table",
              "--follow", cwd=str(tmp_path))
    assert r.returncode == 1, r.stderr
    assert "--change-retention" in r.stderr and "--poll" in r.stderr, r.stderr
    r = tafel("watch", "--from", source.conn_str, "--once")
    assert r.returncode == 1 and "--change-retention" in r.stderr, r.stderr


def test_copy_since_and_follow_by_polling_a_source_without_a_feed(servers, tmp_path):
    source, target = servers["plain"], servers["target"]
    table = unique_table_name("since")
    with TableServiceClient.from_connection_string(source.conn_str) as svc:
        client = svc.create_table(table)
        for i in range(20):
            client.create_entity({"PartitionKey": "old", "RowKey": f"{i:02d}"})
        time.sleep(1.1)
        since = datetime.now(timezone.utc)
        time.sleep(1.1)
        for e in edge_entities():
            client.create_entity(e)
        client.upsert_entity({"PartitionKey": "old", "RowKey": "07", "Touched": True})
        want = {k: v for k, v in table_of(svc, table).items() if k[0] != "old" or k[1] == "07"}
    copy = unique_table_name("sincecopy")
    r = tafel("copy", "--from", source.conn_str, "--table", table, "--to", target.conn_str, "--to-table", copy,
              "--create-table", "--since", since.isoformat(), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    with TableServiceClient.from_connection_string(target.conn_str) as t:
        assert table_of(t, copy) == want
    r = tafel("copy", "--from", source.conn_str, "--table", table, "--to", target.conn_str, "--to-table", copy,
              "--since", "yesterday", cwd=str(tmp_path))
    assert r.returncode == 1 and "RFC 3339" in r.stderr, r.stderr

    # --follow --poll: the whole table, then what changes; a delete is not seen.
    proc = start_follow(source, target, table, tmp_path, "--poll", "--poll-interval", "0.2")
    try:
        with TableServiceClient.from_connection_string(source.conn_str) as s, \
                TableServiceClient.from_connection_string(target.conn_str) as t:
            wait_for(lambda: rows(t, table) == table_of(s, table), "the first round")
            client = s.get_table_client(table)
            client.upsert_entity({"PartitionKey": "old", "RowKey": "03", "N": EntityProperty(5, EdmType.INT64)})
            client.create_entity({"PartitionKey": "new", "RowKey": "1", "When": since})
            client.delete_entity("old", "00")
            want = table_of(s, table)
            wait_for(lambda: {k: v for k, v in rows(t, table).items() if k != ("old", "00")} == want,
                     "the polls to bring the changes")
            assert ("old", "00") in table_of(t, table), "deletes are not seen by polling"
    finally:
        err = interrupt(proc)
    assert proc.returncode == 130, err
    assert "deletes at the source are NOT seen" in err, err


def test_the_explorer_shows_a_tables_changes_live(servers, _workdir):
    from explorer_browser import Browser
    from test_explorer import open_table, sign_in

    source = servers["feed"]
    table = unique_table_name("live")
    with TableServiceClient.from_connection_string(source.conn_str) as svc:
        client = svc.create_table(table)
        client.create_entity({"PartitionKey": "p", "RowKey": "before"})
        b = Browser(_workdir / f"downloads-{uuid.uuid4().hex[:6]}")
        try:
            sign_in(b, source)
            open_table(b, source, table)
            b.click("#live-changes")
            b.wait(lambda: "At position" in b.text("#changes-status"), "the feed read from now")
            assert not b.all("#changes tbody tr"), "from now: the earlier insert is not shown"
            client.upsert_entity({"PartitionKey": "p", "RowKey": "live", "N": 7}, mode=UpdateMode.MERGE)
            client.delete_entity("p", "before")
            b.wait(lambda: len(b.all("#changes tbody tr")) == 2, "both changes shown as they commit")
            rows = [r.get_attribute("data-op") for r in b.all("#changes tbody tr")]
            assert rows == ["delete", "insert"], "newest first"
            assert "N=7" in b.text("#changes tbody")
        finally:
            b.quit()
