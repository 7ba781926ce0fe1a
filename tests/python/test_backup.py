"""`tafel backup` and `tafel restore` on real servers: a whole store (two accounts, every EDM
type and edge value, access policies, service properties) backed up from a serving
embedded node and restored onto PostgreSQL (when the suite has one; onto another embedded
store otherwise), then compared through the SDK entity by entity, type by type, Timestamp
and ETag included; a PostgreSQL database backed up directly; a backup taken under a
concurrent batch load restores a state that existed at one instant; damaged and truncated
files are refused before anything is written; online backups need the admin token."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import requests
from azure.data.tables import (
    TableAccessPolicy,
    TableAnalyticsLogging,
    TableCorsRule,
    TableRetentionPolicy,
    TableServiceClient,
)

from conftest import (
    ACCOUNT,
    BACKEND,
    KEY,
    POSTGRES_ADMIN_URL,
    TafelServer,
    create_postgres_database,
    grow_disk,
    tafel_binary,
    unique_table_name,
)
from edge_data import edge_entities, store_state

TOKEN = "backup-test-token"
SECOND = "secondaccount"
SECOND_KEY = base64.b64encode(b"the second account's key, 32+ B").decode()
ACCOUNTS = ["--account", f"{ACCOUNT}:{KEY}", "--account", f"{SECOND}:{SECOND_KEY}"]
# Restores go onto PostgreSQL when the suite has a server: the documented migration path.
TARGET = "postgres" if POSTGRES_ADMIN_URL else "embedded"


def tafel(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(tafel_binary()), *args], capture_output=True, text=True, timeout=timeout)


def conn(srv: TafelServer, account: str = ACCOUNT, key: str = KEY) -> str:
    return srv.conn_str_for("127.0.0.1", account, key)


def server(workdir: Path, name: str, backend: str, token: bool = True, database_url: str | None = None):
    tag = uuid.uuid4().hex[:6]
    args = [*ACCOUNTS, *(["--admin-token", TOKEN] if token else [])]
    srv = TafelServer(workdir / f"data-{name}-{tag}", workdir / f"tafel-{name}-{tag}.log", extra_args=args,
                      backend=backend)
    srv.database_url = database_url
    return srv


def restore_target(workdir: Path, backend: str = TARGET) -> tuple[list[str], TafelServer]:
    """`tafel restore`'s store flags for a new empty store, and a server (not started) on it."""
    url = create_postgres_database() if backend == "postgres" else None
    srv = server(workdir, "restored", backend, database_url=url)
    flags = (["--backend", "postgres", "--postgres-url", url] if url
             else ["--backend", "embedded", "--data-dir", str(srv.data_dir)])
    return flags, srv


def everything(srv: TafelServer) -> dict:
    """All a server holds, in both accounts (edge_data.store_state)."""
    return store_state({ACCOUNT: conn(srv), SECOND: conn(srv, SECOND, SECOND_KEY)})


@pytest.fixture(scope="module")
def source(_workdir):
    """An embedded server with two accounts' worth of everything a backup holds."""
    srv = server(_workdir, "source", "embedded")
    srv.start()
    with TableServiceClient.from_connection_string(conn(srv)) as svc:
        edges = svc.create_table("edges")
        for e in edge_entities():
            edges.create_entity(e)
        start = datetime(2026, 1, 1, tzinfo=timezone.utc)
        edges.set_table_access_policy(signed_identifiers={
            "readers": TableAccessPolicy(permission="r", start=start, expiry=start + timedelta(days=30)),
            "writers": TableAccessPolicy(permission="raud", expiry=start + timedelta(days=1)),
        })
        # Listing order is ordinal on the name as created.
        for name in ("Zeta", "alpha", "Beta"):
            svc.create_table(name).create_entity({"PartitionKey": name, "RowKey": "1"})
        svc.set_service_properties(
            analytics_logging=TableAnalyticsLogging(read=True, write=True, delete=False,
                                                    retention_policy=TableRetentionPolicy(enabled=True, days=5)),
            cors=[TableCorsRule(["https://app.example"], ["GET", "PUT"], max_age_in_seconds=60)],
        )
    with TableServiceClient.from_connection_string(conn(srv, SECOND, SECOND_KEY)) as svc:
        svc.create_table("other").create_entity({"PartitionKey": "p", "RowKey": "r", "Mine": "second"})
    yield srv
    srv.stop()


def test_a_serving_embedded_node_backs_up_and_restores_on_the_other_backend_whole(source, _workdir, tmp_path):
    before = everything(source)
    path = tmp_path / "all.backup"
    r = tafel("backup", "--from", source.admin_url, "--admin-token", TOKEN, "--out", str(path))
    assert r.returncode == 0, r.stderr
    assert "5 tables, 1 accounts' service properties, from embedded" in r.stderr
    assert not (tmp_path / "all.backup.partial").exists()
    header = path.read_bytes()[:400]
    assert header.startswith(b"TAFELBAK\x02\x00\x00\x00")
    assert b'"source":"embedded"' in header

    r = tafel("restore", "--check", str(path))
    assert r.returncode == 0, r.stderr
    assert "intact" in r.stderr and "5 tables" in r.stderr

    flags, restored = restore_target(_workdir)
    r = tafel("restore", str(path), *flags)
    assert r.returncode == 0, r.stderr
    assert f"→ {TARGET}" in r.stderr
    restored.start()
    try:
        assert everything(restored) == before
        with TableServiceClient.from_connection_string(conn(restored)) as svc:
            assert [t.name for t in svc.list_tables()] == ["Beta", "Zeta", "alpha", "edges"]
            # The restored store serves writes as any other.
            svc.get_table_client("alpha").upsert_entity({"PartitionKey": "alpha", "RowKey": "2"})
        # A restore writes only into an empty store.
        restored.stop()
        r = tafel("restore", str(path), *flags)
        assert r.returncode != 0
        assert "not empty" in r.stderr
    finally:
        restored.stop()


def indexes_of(srv: TafelServer, table: str) -> dict:
    r = requests.get(f"{srv.admin_url}/accounts/{ACCOUNT}/tables/{table}/indexes",
                     headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    assert r.status_code == 200, r.text
    return {i["property"]: (i["state"], i["entries"]) for i in r.json()["indexes"]}


def test_a_backup_carries_index_definitions_and_the_restore_makes_their_entries(_workdir, tmp_path):
    # From the suite's backend to the restore's target (PostgreSQL when the suite has one).
    url = create_postgres_database() if BACKEND == "postgres" else None
    srv = server(_workdir, "indexed", BACKEND, database_url=url)
    srv.start()
    try:
        with TableServiceClient.from_connection_string(conn(srv)) as svc:
            people = svc.create_table("people")
            for i in range(60):
                e = {"PartitionKey": f"p{i % 3}", "RowKey": f"{i:03}", "Age": i}
                if i % 4:
                    e["Email"] = f"u{i}@example.com"
                people.create_entity(e)
            # The index of every property (`*`): its definition round-trips too.
            things = svc.create_table("things")
            for i in range(20):
                things.create_entity({"PartitionKey": "t", "RowKey": f"{i:03}", "X": i, "Y": f"y{i % 5}"})
        r = requests.put(f"{srv.admin_url}/accounts/{ACCOUNT}/tables/things/indexes/*",
                         headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
        assert r.status_code in (201, 202), r.text
        for prop in ("Email", "Age"):
            r = requests.put(f"{srv.admin_url}/accounts/{ACCOUNT}/tables/people/indexes/{prop}",
                             headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
            assert r.status_code in (201, 202), r.text
        deadline = time.monotonic() + 60
        while set(indexes_of(srv, "people").values()) != {("ready", 45), ("ready", 60)}:
            assert time.monotonic() < deadline, indexes_of(srv, "people")
            time.sleep(0.1)
        while indexes_of(srv, "things") != {"*": ("ready", 40)}:
            assert time.monotonic() < deadline, indexes_of(srv, "things")
            time.sleep(0.1)
        path = tmp_path / "indexed.backup"
        r = tafel("backup", "--from", srv.admin_url, "--admin-token", TOKEN, "--out", str(path))
        assert r.returncode == 0, r.stderr
        before = everything(srv)
    finally:
        srv.stop()

    flags, restored = restore_target(_workdir)
    r = tafel("restore", str(path), *flags)
    assert r.returncode == 0, r.stderr
    restored.start()
    try:
        assert indexes_of(restored, "people") == {"Age": ("ready", 60), "Email": ("ready", 45)}
        assert everything(restored) == before
        r = restored.raw.request("GET", "/people()", query={"$filter": "Email eq 'u7@example.com'"})
        assert r.status_code == 200 and r.headers["x-tafel-query-plan"] == "index:Email", (r.status_code, r.headers)
        assert [e["RowKey"] for e in r.json()["value"]] == ["007"]
        assert indexes_of(restored, "things") == {"*": ("ready", 40)}
        r = restored.raw.request("GET", "/things()", query={"$filter": "Y eq 'y3'"})
        assert r.status_code == 200 and r.headers["x-tafel-query-plan"] == "index:Y", (r.status_code, r.headers)
        assert [e["RowKey"] for e in r.json()["value"]] == ["003", "008", "013", "018"]
    finally:
        restored.stop()


@pytest.mark.skipif(BACKEND != "postgres", reason="reads a PostgreSQL database directly")
def test_a_postgres_database_is_backed_up_directly_and_restores_embedded(_workdir, tmp_path):
    srv = server(_workdir, "pgsource", "postgres", database_url=create_postgres_database())
    srv.start()
    try:
        with TableServiceClient.from_connection_string(conn(srv)) as svc:
            t = svc.create_table("edges")
            for e in edge_entities():
                t.create_entity(e)
        before = everything(srv)
        path = tmp_path / "pg.backup"
        # No server needed: the database is read in one snapshot while nodes serve.
        r = tafel("backup", "--backend", "postgres", "--postgres-url", srv.database_url, "--out", str(path))
        assert r.returncode == 0, r.stderr
        assert "from postgres" in r.stderr
    finally:
        srv.stop()
    flags, restored = restore_target(_workdir, "embedded")
    r = tafel("restore", str(path), *flags)
    assert r.returncode == 0, r.stderr
    restored.start()
    try:
        assert everything(restored) == before
    finally:
        restored.stop()


def test_a_backup_under_a_batch_load_restores_one_instant(_workdir, tmp_path):
    """Writers each append numbered batches to a partition of their own, in order; each
    batch writes rows and a marker in one changeset. A snapshot of one instant holds,
    per writer, batches 0..n-1 whole and nothing else, n between the batches acknowledged
    before the backup began and those acknowledged when it ended."""
    srv = server(_workdir, "loaded", BACKEND)
    srv.start()
    table = unique_table_name("load")
    svc = TableServiceClient.from_connection_string(conn(srv))
    svc.create_table(table)
    # Padding that sorts before the writers' rows, so reading the table takes a while.
    pad = tmp_path / "pad.jsonl"
    pad.write_text("".join(json.dumps({"PartitionKey": "a-pad", "RowKey": f"{i:06d}", "S": "x" * 1000}) + "\n"
                           for i in range(30_000)))
    r = tafel("import", "--to", conn(srv), "--table", table, "--in", str(pad), "-q")
    assert r.returncode == 0, r.stderr
    writers, acked, stop = 4, [0] * 4, threading.Event()
    errors = []

    def write(w: int):
        client = TableServiceClient.from_connection_string(conn(srv)).get_table_client(table)
        i = 0
        while not stop.is_set():
            ops = [("create", {"PartitionKey": f"w{w}", "RowKey": f"r{i:06d}-{j}", "V": i}) for j in range(4)]
            ops.append(("create", {"PartitionKey": f"w{w}", "RowKey": f"m{i:06d}"}))
            try:
                client.submit_transaction(ops)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
                return
            i += 1
            acked[w] = i

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        at_start = list(acked)
        path = tmp_path / "load.backup"
        r = tafel("backup", "--from", srv.admin_url, "--admin-token", TOKEN, "--out", str(path))
        at_end = list(acked)
        time.sleep(0.3)
    finally:
        stop.set()
        for t in threads:
            t.join()
        svc.close()
        srv.stop()
    assert r.returncode == 0, r.stderr
    assert not errors, errors
    assert at_end != at_start, "no batch was acknowledged while the backup ran"

    flags, restored = restore_target(_workdir, BACKEND)
    r = tafel("restore", str(path), *flags)
    assert r.returncode == 0, r.stderr
    restored.start()
    try:
        with TableServiceClient.from_connection_string(conn(restored)) as rsvc:
            rows = [(e["PartitionKey"], e["RowKey"]) for e in rsvc.get_table_client(table).list_entities()]
    finally:
        restored.stop()
    assert sum(1 for pk, _ in rows if pk == "a-pad") == 30_000
    for w in range(writers):
        keys = {rk for pk, rk in rows if pk == f"w{w}"}
        markers = sorted(int(k[1:]) for k in keys if k.startswith("m"))
        n = len(markers)
        assert markers == list(range(n)), f"writer {w}: batches missing in between"
        assert keys == {f"m{i:06d}" for i in range(n)} | {f"r{i:06d}-{j}" for i in range(n) for j in range(4)}, \
            f"writer {w}: a batch restored in part"
        assert at_start[w] <= n <= at_end[w], (w, at_start[w], n, at_end[w])


@pytest.fixture(scope="module")
def small_backup(source, tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("small") / "small.backup"
    r = tafel("backup", "--from", source.admin_url, "--admin-token", TOKEN, "--out", str(path))
    assert r.returncode == 0, r.stderr
    return path.read_bytes()


def damaged(good: bytes):
    """Bad files and what the refusal must say (one of the messages)."""
    yield "empty", b"", ("not a Tafel backup",)
    yield "not a backup", b"PK\x03\x04" + good[4:], ("not a Tafel backup",)
    yield "future version", good[:8] + b"\x09\x00\x00\x00" + good[12:], ("format version 9",)
    for cut in (20, len(good) // 2, len(good) - 1):
        yield f"truncated at {cut}", good[:cut], ("truncated",)
    for at in (len(good) // 3, len(good) // 2, len(good) - 8):
        b = bytearray(good)
        b[at] ^= 0x5A
        # A flip in a compressed block's size reads as data ending early.
        yield f"byte {at} flipped", bytes(b), ("damaged", "truncated")
    yield "data after the end", good + b"\x00" * 16, ("damaged",)


def test_a_damaged_or_truncated_backup_is_refused_before_anything_is_written(small_backup, _workdir, tmp_path):
    flags, restored = restore_target(_workdir)
    for what, data, messages in damaged(small_backup):
        path = tmp_path / "bad.backup"
        path.write_bytes(data)
        for mode in (["--check"], flags):
            r = tafel("restore", str(path), *mode)
            assert r.returncode != 0, what
            assert any(m in r.stderr for m in messages), (what, r.stderr)
    restored.start()
    try:
        for account, key in ((ACCOUNT, KEY), (SECOND, SECOND_KEY)):
            with TableServiceClient.from_connection_string(conn(restored, account, key)) as svc:
                assert list(svc.list_tables()) == [], "a refused backup wrote something"
    finally:
        restored.stop()


def test_online_backups_need_the_admin_token(source, _workdir, tmp_path):
    out = tmp_path / "x.backup"
    r = tafel("backup", "--from", source.admin_url, "--admin-token", "wrong", "--out", str(out))
    assert r.returncode != 0 and "401" in r.stderr
    open_srv = server(_workdir, "notoken", BACKEND, token=False)
    open_srv.start()
    try:
        r = tafel("backup", "--from", open_srv.admin_url, "--out", str(out))
    finally:
        open_srv.stop()
    assert r.returncode != 0
    assert "--admin-token" in r.stderr
    assert not out.exists() and not Path(f"{out}.partial").exists()


def test_a_backup_to_standard_output_restores(small_backup, source, _workdir, tmp_path):
    r = subprocess.run([str(tafel_binary()), "backup", "--from", source.admin_url, "--admin-token", TOKEN,
                        "--out", "-", "-q"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(b"TAFELBAK") and len(r.stdout) > 1000
    path = tmp_path / "piped.backup"
    path.write_bytes(r.stdout)
    assert tafel("restore", "--check", str(path)).returncode == 0


def test_a_stopped_embedded_store_is_backed_up_from_its_directory(_workdir, tmp_path):
    srv = server(_workdir, "offline", "embedded")
    srv.start()
    with TableServiceClient.from_connection_string(conn(srv)) as svc:
        svc.create_table("kept").create_entity({"PartitionKey": "p", "RowKey": "r", "N": 7})
    before = everything(srv)
    srv.stop()
    path = tmp_path / "offline.backup"
    r = tafel("backup", "--backend", "embedded", "--data-dir", str(srv.data_dir), "--out", str(path))
    assert r.returncode == 0, r.stderr
    flags, restored = restore_target(_workdir, "embedded")
    assert tafel("restore", str(path), *flags).returncode == 0
    restored.start()
    try:
        assert everything(restored) == before
    finally:
        restored.stop()
    # A directory with no store is not backed up as an empty one.
    r = tafel("backup", "--backend", "embedded", "--data-dir", str(tmp_path / "nothing-here"), "--out", str(path))
    assert r.returncode != 0 and "no Tafel store" in r.stderr
    assert not (tmp_path / "nothing-here").exists()


def test_a_restore_cut_short_by_a_full_disk_is_never_served(_workdir, tmp_path, small_disk):
    disk = small_disk("160m")
    # ~110 MiB of entities that do not compress: a backup file of about that, which
    # does not fit beside the log on the small disk once loaded.
    rows = tmp_path / "big.jsonl"
    with rows.open("w") as f:
        for i in range(3500):
            f.write(json.dumps({"PartitionKey": f"p{i // 100:03d}", "RowKey": f"{i:05d}",
                                "Blob": base64.b64encode(os.urandom(24_000)).decode()}) + "\n")
    srv = server(_workdir, "full", "embedded")
    srv.start()
    try:
        r = tafel("import", "--to", conn(srv), "--table", "big", "--in", str(rows), "--create-table")
        assert r.returncode == 0, r.stderr
        backup = tmp_path / "big.backup"
        r = tafel("backup", "--from", srv.admin_url, "--admin-token", TOKEN, "--out", str(backup))
        assert r.returncode == 0, r.stderr
    finally:
        srv.stop()
    data = disk / "data"
    r = tafel("restore", str(backup), "--backend", "embedded", "--data-dir", str(data), timeout=120)
    assert r.returncode != 0, "a restore onto a full disk reported success"
    assert "No space left" in r.stderr or "space" in r.stderr.lower(), r.stderr
    # Room again (as after freeing space): the half-loaded store is still not served.
    grow_disk(disk, "512m")
    r = subprocess.run([str(tafel_binary()), "--backend", "embedded", "--port", "0", "--admin-port", "0",
                        "--data-dir", str(data)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "restore that did not finish" in r.stderr and "big.backup" in r.stderr, r.stderr
    # Nor is a new restore mixed into it.
    r = tafel("restore", str(backup), "--backend", "embedded", "--data-dir", str(data), timeout=120)
    assert r.returncode != 0 and "not empty" in r.stderr, r.stderr
