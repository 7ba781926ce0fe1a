"""Instant resets for test suites (docs/testing.md, "Snapshots and instant resets"):
named snapshots of the whole store on the admin listener (`/snapshots`), `tafel
snapshot`, and `DELETE /accounts/NAME/data`. Through the real SDK: a restore brings
back exactly what was saved (entities of every type with their ETags and Timestamps,
tables, ACLs, service properties, every account) and drops what came after; writes
after it survive a restart and a kill -9; snapshots survive a restart; `--in-memory`
has them too. PostgreSQL has no snapshots and says so (501); it empties accounts."""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import requests
from azure.core.exceptions import ResourceExistsError
from azure.data.tables import TableAccessPolicy, TableCorsRule, TableServiceClient, UpdateMode

from conftest import ACCOUNT, KEY, TafelServer, embedded_only, free_port, postgres_only, tafel_binary
from edge_data import as_data, edge_entities, store_state
from launch import Launched

TOKEN = "snapshot-test-token"
SECOND = "secondaccount"
SECOND_KEY = base64.b64encode(b"the second account's key, 32+ B").decode()
ACCOUNTS = ["--account", f"{ACCOUNT}:{KEY}", "--account", f"{SECOND}:{SECOND_KEY}"]
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def srv(_workdir):
    tag = uuid.uuid4().hex[:6]
    s = TafelServer(_workdir / f"data-snap-{tag}", _workdir / f"tafel-snap-{tag}.log",
                    extra_args=[*ACCOUNTS, "--admin-token", TOKEN])
    s.start()
    yield s
    s.kill9()


def conn(s: TafelServer, account: str = ACCOUNT, key: str = KEY) -> str:
    return s.conn_str_for("127.0.0.1", account, key)


def admin(s: TafelServer, method: str, path: str, token: bool = True) -> requests.Response:
    return requests.request(method, s.admin_url + path, headers=AUTH if token else {}, timeout=60)


def state(s: TafelServer) -> dict:
    """Everything a restore brings back, in both accounts."""
    return store_state({ACCOUNT: conn(s), SECOND: conn(s, SECOND, SECOND_KEY)})


def populate(s: TafelServer) -> None:
    with TableServiceClient.from_connection_string(conn(s)) as svc:
        edges = svc.create_table("edges")
        for e in edge_entities():
            edges.create_entity(e)
        start = datetime(2026, 1, 1, tzinfo=timezone.utc)
        edges.set_table_access_policy(signed_identifiers={
            "readers": TableAccessPolicy(permission="r", start=start, expiry=start + timedelta(days=30)),
        })
        plain = svc.create_table("plain")
        plain.submit_transaction([("create", {"PartitionKey": "p", "RowKey": f"{i:03d}", "n": i}) for i in range(50)])
        svc.set_service_properties(cors=[TableCorsRule(["https://a.example"], ["GET"], max_age_in_seconds=5)])
        assert as_data(svc.get_service_properties())["cors"], "the properties are compared"
    with TableServiceClient.from_connection_string(conn(s, SECOND, SECOND_KEY)) as svc:
        svc.create_table("theirs").create_entity({"PartitionKey": "x", "RowKey": "1", "v": "second"})


def change_everything(s: TafelServer) -> None:
    with TableServiceClient.from_connection_string(conn(s)) as svc:
        plain = svc.get_table_client("plain")
        plain.upsert_entity({"PartitionKey": "p", "RowKey": "000", "n": -1}, mode=UpdateMode.REPLACE)
        plain.delete_entity("p", "001")
        plain.create_entity({"PartitionKey": "p", "RowKey": "new", "n": 1})
        svc.get_table_client("edges").set_table_access_policy(signed_identifiers={
            "other": TableAccessPolicy(permission="raud", expiry=datetime(2031, 1, 1, tzinfo=timezone.utc)),
        })
        svc.delete_table("edges")
        svc.create_table("edges").create_entity({"PartitionKey": "same", "RowKey": "name"})
        svc.create_table("later").create_entity({"PartitionKey": "a", "RowKey": "b"})
        svc.set_service_properties(cors=[])
    with TableServiceClient.from_connection_string(conn(s, SECOND, SECOND_KEY)) as svc:
        svc.delete_table("theirs")


@embedded_only
def test_a_restore_brings_back_exactly_the_saved_state_and_later_writes_survive_restarts(srv):
    populate(srv)
    saved = state(srv)
    r = admin(srv, "PUT", "/snapshots/base")
    assert r.status_code == 201, r.text
    assert admin(srv, "PUT", "/snapshots/base").status_code == 409

    change_everything(srv)
    assert state(srv) != saved
    assert admin(srv, "PUT", "/snapshots/after-changes").status_code == 201

    r = admin(srv, "POST", "/snapshots/base/restore")
    assert r.status_code == 200, r.text
    assert state(srv) == saved
    # Saved after the one restored: gone with the state it held.
    names = [s["name"] for s in admin(srv, "GET", "/snapshots").json()["snapshots"]]
    assert names == ["base"]
    assert admin(srv, "POST", "/snapshots/after-changes/restore").status_code == 404

    # Writes after the restore work, on old and new tables alike.
    with TableServiceClient.from_connection_string(conn(srv)) as svc:
        svc.get_table_client("plain").create_entity({"PartitionKey": "p", "RowKey": "after", "n": 7})
        with pytest.raises(ResourceExistsError):
            svc.get_table_client("plain").create_entity({"PartitionKey": "p", "RowKey": "001", "n": 1})
        svc.create_table("later").create_entity({"PartitionKey": "a", "RowKey": "c"})
    after = state(srv)
    assert after != saved

    srv.restart()
    assert state(srv) == after
    assert [s["name"] for s in admin(srv, "GET", "/snapshots").json()["snapshots"]] == ["base"]

    # A restore, acknowledged writes after it, then kill -9: all of them are back.
    assert admin(srv, "POST", "/snapshots/base/restore").status_code == 200
    with TableServiceClient.from_connection_string(conn(srv)) as svc:
        svc.get_table_client("plain").create_entity({"PartitionKey": "p", "RowKey": "acked", "n": 8})
    acked = state(srv)
    srv.restart(graceful=False)
    assert state(srv) == acked
    assert admin(srv, "POST", "/snapshots/base/restore").status_code == 200
    assert state(srv) == saved

    assert admin(srv, "DELETE", "/snapshots/base").status_code == 204
    assert admin(srv, "GET", "/snapshots").json() == {"snapshots": []}
    assert admin(srv, "DELETE", "/snapshots/base").status_code == 404


def test_emptying_an_account_leaves_the_others(srv):
    populate(srv)
    before = state(srv)
    r = admin(srv, "DELETE", f"/accounts/{ACCOUNT}/data")
    assert r.status_code == 200, r.text
    assert r.json()["tables_deleted"] == 2
    now = state(srv)
    assert now[SECOND] == before[SECOND]
    assert now[ACCOUNT][1] == {}
    assert now[ACCOUNT][0] != before[ACCOUNT][0], "the service properties went back to the defaults"
    with TableServiceClient.from_connection_string(conn(srv)) as svc:
        # The names are free again, and the new tables empty.
        assert list(svc.create_table("edges").list_entities()) == []
    r = admin(srv, "DELETE", "/accounts/nosuchaccount/data")
    assert r.status_code == 404 and "nosuchaccount" in r.json()["message"]


@embedded_only
def test_names_are_checked_and_the_token_is_needed(srv):
    for bad in [".hidden", "a%20b", "x" * 65, "%C3%BC"]:
        r = admin(srv, "PUT", f"/snapshots/{bad}")
        assert r.status_code == 400, (bad, r.text)
        assert r.json()["error"] == "InvalidSnapshotName" and "snapshot name" in r.json()["message"]
    r = admin(srv, "POST", "/snapshots/never-saved/restore")
    assert r.status_code == 404 and r.json()["error"] == "SnapshotNotFound"
    assert admin(srv, "DELETE", "/snapshots/never-saved").status_code == 404
    assert admin(srv, "PUT", "/snapshots/s", token=False).status_code == 401
    assert admin(srv, "DELETE", f"/accounts/{ACCOUNT}/data", token=False).status_code == 401
    assert admin(srv, "GET", "/snapshots", token=False).status_code == 401
    assert admin(srv, "GET", "/snapshots/s").status_code == 405
    assert admin(srv, "GET", "/snapshots").json() == {"snapshots": []}


@postgres_only
def test_postgres_says_it_has_no_snapshots(srv):
    for method, path in [("PUT", "/snapshots/s"), ("POST", "/snapshots/s/restore"), ("GET", "/snapshots"),
                         ("DELETE", "/snapshots/s")]:
        r = admin(srv, method, path)
        assert r.status_code == 501, (method, path, r.text)
        assert r.json()["error"] == "NotSupportedByBackend"
        assert "PostgreSQL" in r.json()["message"] and "embedded" in r.json()["message"]


def tafel(s: TafelServer, *args: str, token: str | None = TOKEN) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TAFEL_ADMIN_TOKEN"}
    if token:
        env["TAFEL_ADMIN_TOKEN"] = token
    return subprocess.run([str(tafel_binary()), "snapshot", *args, "--admin-url", s.admin_url],
                          capture_output=True, text=True, timeout=60, env=env)


@embedded_only
def test_the_cli_saves_lists_restores_and_deletes(srv):
    populate(srv)
    saved = state(srv)
    r = tafel(srv, "save", "cli-base")
    assert r.returncode == 0 and "saved snapshot cli-base" in r.stdout, r.stderr
    change_everything(srv)
    r = tafel(srv, "list")
    assert r.returncode == 0 and r.stdout.startswith("cli-base\t"), r
    r = tafel(srv, "restore", "cli-base")
    assert r.returncode == 0 and "restored snapshot cli-base" in r.stdout, r.stderr
    assert state(srv) == saved
    r = tafel(srv, "restore", "missing")
    assert r.returncode == 1 and 'no snapshot named "missing"' in r.stderr, r
    r = tafel(srv, "save", "x", token=None)
    assert r.returncode == 1 and "401" in r.stderr, r
    r = tafel(srv, "empty-account", SECOND)
    assert r.returncode == 0, r.stderr
    assert state(srv)[SECOND][1] == {}
    r = tafel(srv, "delete", "cli-base")
    assert r.returncode == 0, r.stderr
    assert tafel(srv, "list").stdout == ""


@embedded_only
def test_an_in_memory_server_has_snapshots_too(tmp_path: Path):
    port, admin_port = free_port(), free_port()
    s = Launched(["serve", "--in-memory", "--port", str(port), "--admin-port", str(admin_port),
                  "--drain-seconds", "0"], port, tmp_path)
    s.wait_listening()
    url = f"http://127.0.0.1:{admin_port}"
    try:
        with TableServiceClient.from_connection_string(s.conn_str()) as svc:
            t = svc.create_table("mem")
            t.create_entity({"PartitionKey": "p", "RowKey": "1", "n": 1})
            assert requests.put(f"{url}/snapshots/m", timeout=30).status_code == 201
            for round in range(3):
                t.upsert_entity({"PartitionKey": "p", "RowKey": "1", "n": 100 + round})
                t.create_entity({"PartitionKey": "p", "RowKey": f"r{round}"})
                svc.create_table(f"extra{round}")
                assert requests.post(f"{url}/snapshots/m/restore", timeout=30).status_code == 200
                assert [e["n"] for e in t.list_entities()] == [1]
                assert [x.name for x in svc.list_tables()] == ["mem"]
    finally:
        assert s.stop() == 0, s.output()
