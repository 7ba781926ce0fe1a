"""Undelete (docs/lifecycle.md): with ``serve --table-soft-delete DURATION`` a deleted table
disappears at once for the Table API (and its name is free) but stays restorable for DURATION:
``GET /accounts/A/deleted-tables`` and ``POST …/deleted-tables/ID/restore`` on the admin
listener, and ``tafel undelete``. Tables are made, filled, deleted and read back through the
Python SDK; the admin API through plain HTTP."""

import subprocess
import time
from datetime import datetime, timezone

import pytest
import requests
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableAccessPolicy, TableServiceClient

from conftest import ACCOUNT, BACKEND, TafelServer, unique_table_name
from launch import run_tafel

UTC = timezone.utc
KEEP = ["--table-soft-delete", "1h"]


@pytest.fixture(scope="module")
def soft(_workdir):
    srv = TafelServer(_workdir / "undelete-data", _workdir / "undelete.log", extra_args=KEEP)
    srv.start()
    yield srv
    srv.stop()


def deleted(srv, account: str = ACCOUNT) -> list:
    r = requests.get(f"{srv.admin_url}/accounts/{account}/deleted-tables", timeout=10)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()["deletedTables"]


def restore(srv, id_: str, as_name: str | None = None) -> requests.Response:
    # Always JSON: the listener refuses a POST that a web form could send.
    body = {"as": as_name} if as_name else {}
    return requests.post(
        f"{srv.admin_url}/accounts/{ACCOUNT}/deleted-tables/{id_}/restore", json=body, timeout=10
    )


def stats(srv, table: str) -> dict:
    r = requests.get(f"{srv.admin_url}/accounts/{ACCOUNT}/tables/{table}/stats", timeout=10)
    assert r.status_code == 200, (r.status_code, r.text)
    return {k: r.json()[k] for k in ("entities", "bytes")}


def rows(svc: TableServiceClient, table: str) -> list:
    return sorted((dict(e) for e in svc.get_table_client(table).list_entities()), key=lambda e: (e["PartitionKey"], e["RowKey"]))


def fill(svc: TableServiceClient, name: str) -> None:
    tc = svc.create_table(name)
    for pk in "abc":
        tc.submit_transaction([("create", {"PartitionKey": pk, "RowKey": f"{i:03}", "n": i, "s": "x" * i}) for i in range(20)])
    tc.set_table_access_policy(
        {"reader": TableAccessPolicy(permission="r", start=datetime(2024, 1, 2, tzinfo=UTC), expiry=datetime(2031, 1, 1, tzinfo=UTC))}
    )


def undelete(srv, *args: str) -> subprocess.CompletedProcess:
    return run_tafel("undelete", "--account", ACCOUNT, *args, env={"TAFEL_ADMIN_URL": srv.admin_url})


def test_a_deleted_table_comes_back_with_its_entities_policies_and_counts(soft):
    name = unique_table_name("ud")
    svc = TableServiceClient.from_connection_string(soft.conn_str)
    fill(svc, name)
    before = (rows(svc, name), stats(soft, name))
    policy = svc.get_table_client(name).get_table_access_policy()

    svc.delete_table(name)
    # Gone at once for the Table API: listing, reads, writes.
    assert name not in [t.name for t in svc.list_tables()]
    with pytest.raises(ResourceNotFoundError):
        svc.get_table_client(name).get_entity("a", "001")
    with pytest.raises(ResourceNotFoundError):
        svc.get_table_client(name).create_entity({"PartitionKey": "a", "RowKey": "z"})
    [kept] = [t for t in deleted(soft) if t["name"] == name]
    assert (kept["entities"], kept["bytes"]) == (60, before[1]["bytes"])
    assert kept["deletedAt"] < kept["restorableUntil"]

    # The name is free at once: a new, empty table takes it.
    svc.create_table(name)
    assert rows(svc, name) == []
    r = restore(soft, kept["id"])
    assert r.status_code == 409 and r.json()["error"] == "TableAlreadyExists", r.text
    for bad in ["1abc", "ab", "tables", "a-b"]:
        r = restore(soft, kept["id"], bad)
        assert r.status_code == 400 and r.json()["error"] == "InvalidResourceName", (bad, r.text)
    assert restore(soft, "999999999").status_code == 404

    other = unique_table_name("udas")
    r = restore(soft, kept["id"], other)
    assert r.status_code == 200 and r.json()["table"] == other, r.text
    assert name in [t.name for t in svc.list_tables()] and other in [t.name for t in svc.list_tables()]
    assert (rows(svc, other), stats(soft, other)) == before
    assert svc.get_table_client(other).get_table_access_policy().keys() == policy.keys()
    assert svc.get_table_client(other).get_table_access_policy()["reader"].permission == "r"
    # The restored table takes writes, and restoring twice finds nothing.
    svc.get_table_client(other).create_entity({"PartitionKey": "d", "RowKey": "1"})
    assert stats(soft, other)["entities"] == 61
    r = restore(soft, kept["id"])
    assert r.status_code == 404 and r.json()["error"] == "DeletedTableNotFound", r.text
    assert kept["id"] not in [t["id"] for t in deleted(soft)]


def test_tafel_undelete_restores_the_latest_deletion_and_fails_clearly(soft):
    name = unique_table_name("udcli")
    svc = TableServiceClient.from_connection_string(soft.conn_str)
    svc.create_table(name).create_entity({"PartitionKey": "p", "RowKey": "first"})
    svc.delete_table(name)
    svc.create_table(name).create_entity({"PartitionKey": "p", "RowKey": "second"})
    svc.delete_table(name)

    listed = undelete(soft, "--list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count(f"\t{name}\t") == 2, listed.stdout
    done = undelete(soft, "--table", name)
    assert done.returncode == 0, done.stderr
    assert [e["RowKey"] for e in rows(svc, name)] == ["second"]
    # The older one: its name is taken now.
    taken = undelete(soft, "--table", name)
    assert taken.returncode == 1 and "exists" in taken.stderr and "--as" in taken.stderr, taken.stderr
    other = unique_table_name("udcli")
    done = undelete(soft, "--table", name.upper(), "--as", other)
    assert done.returncode == 0 and other in done.stdout, done.stderr
    assert [e["RowKey"] for e in rows(svc, other)] == ["first"]
    missing = undelete(soft, "--table", name)
    assert missing.returncode == 1 and "no deleted table named" in missing.stderr, missing.stderr
    bad = undelete(soft, "--table", "nosuch", "--as", "1bad")
    assert bad.returncode == 1
    usage = run_tafel("undelete", "--account", ACCOUNT)
    assert usage.returncode == 2 and "--table" in usage.stderr
    unreachable = run_tafel("undelete", "--account", ACCOUNT, "--list", "--admin-url", "http://127.0.0.1:1", "--timeout", "2")
    assert unreachable.returncode == 1 and "tafel undelete:" in unreachable.stderr


def test_a_kept_table_is_removed_after_its_time(_workdir):
    srv = TafelServer(_workdir / "undelete-short", _workdir / "undelete-short.log", extra_args=["--table-soft-delete", "2s"])
    srv.start()
    try:
        name = unique_table_name("udttl")
        svc = TableServiceClient.from_connection_string(srv.conn_str)
        svc.create_table(name).create_entity({"PartitionKey": "p", "RowKey": "r"})
        svc.delete_table(name)
        [kept] = deleted(srv)
        deadline = time.monotonic() + 10
        while deleted(srv) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert deleted(srv) == []
        assert restore(srv, kept["id"]).status_code == 404
        # Listed no more at once; removed by the sweep within a second (embedded).
        time.sleep(2)
    finally:
        srv.stop()
    if BACKEND == "embedded":
        # The sweep took the rows too: `tafel check` finds the store holds none.
        out = subprocess.run([str(srv.binary), "check", "--data-dir", str(srv.data_dir)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        assert " 0 tables, 0 entities" in out.stdout + out.stderr, out.stdout + out.stderr


def test_off_by_default_nothing_is_kept(server):
    name = unique_table_name("udoff")
    svc = TableServiceClient.from_connection_string(server.conn_str)
    svc.create_table(name).create_entity({"PartitionKey": "p", "RowKey": "r"})
    svc.delete_table(name)
    assert [t for t in deleted(server) if t["name"] == name] == []
    svc.create_table(name)
    assert rows(svc, name) == []
    svc.delete_table(name)


def test_a_deleted_table_stays_restorable_after_kill_9(_workdir):
    srv = TafelServer(_workdir / "undelete-kill", _workdir / "undelete-kill.log", extra_args=KEEP)
    srv.start()
    name = unique_table_name("udkill")
    svc = TableServiceClient.from_connection_string(srv.conn_str)
    fill(svc, name)
    before = (rows(svc, name), stats(srv, name))
    svc.delete_table(name)
    srv.kill9()
    srv.start()
    [kept] = [t for t in deleted(srv) if t["name"] == name]
    assert restore(srv, kept["id"]).status_code == 200
    svc = TableServiceClient.from_connection_string(srv.conn_str)
    assert (rows(svc, name), stats(srv, name)) == before
    # Deleted again and left kept: `tafel check` counts its rows as a table's.
    svc.delete_table(name)
    srv.stop()
    if BACKEND == "embedded":
        out = subprocess.run([str(srv.binary), "check", "--data-dir", str(srv.data_dir)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr


def test_every_kept_table_restores_by_its_listed_id(soft):
    """PostgreSQL's table ids are random BIGINTs, negative half the time: the listed id of
    one was 0, and its restore 404."""
    svc = TableServiceClient.from_connection_string(soft.conn_str)
    names = [unique_table_name("udid") for _ in range(8)]
    for name in names:
        svc.create_table(name).create_entity({"PartitionKey": "p", "RowKey": name})
        svc.delete_table(name)
    listed = {t["name"]: t["id"] for t in deleted(soft)}
    assert len({listed[n] for n in names}) == len(names)
    for name in names:
        r = restore(soft, listed[name])
        assert r.status_code == 200 and r.json()["table"] == name, (name, listed[name], r.text)
        assert [e["RowKey"] for e in rows(svc, name)] == [name]
