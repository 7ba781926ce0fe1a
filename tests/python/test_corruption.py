"""Damage to the embedded store's files, as bit rot leaves it, through the real binary: a
damaged entity answers 500 with a message that says so (never its bytes), a query over it
too, a merge does not build on it; every other entity reads as written; `tafel check`
names the damaged entity (table, keys), exits non-zero, and changes no file; on an intact
store it exits 0, also after a kill -9 left records in the log."""

from __future__ import annotations

import hashlib
import subprocess
import uuid
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient, UpdateMode

from conftest import BACKEND, TafelServer, tafel_binary

pytestmark = pytest.mark.skipif(BACKEND != "embedded", reason="the embedded store's own files")

MARK = "damage-me-0042"


def check(data_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(tafel_binary()), "check", "--data-dir", str(data_dir)],
                          capture_output=True, text=True, timeout=120)


def digests(data_dir: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(data_dir.iterdir()) if p.is_file()}


def fill(srv: TafelServer, table_name: str) -> dict:
    rows = {}
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        table = svc.create_table(table_name)
        for i in range(200):
            e = {"PartitionKey": "p", "RowKey": f"r{i:04d}", "Text": f"row {i} " * 20, "N": i}
            if i == 42:
                e["Text"] = MARK * 10
            table.create_entity(e)
            rows[e["RowKey"]] = e
    return rows


@pytest.fixture
def store(tmp_path):
    srv = TafelServer(tmp_path / "data", tmp_path / f"tafel-rot-{uuid.uuid4().hex[:6]}.log")
    srv.start()
    yield srv
    srv.stop()


def test_an_intact_store_checks_clean_after_a_clean_stop_and_after_kill_9(store):
    fill(store, "intact")
    store.kill9()
    # The last writes are in the log only; check replays them in memory.
    before = digests(store.data_dir)
    result = check(store.data_dir)
    assert result.returncode == 0, result.stderr
    assert "no damage found" in result.stderr
    assert "200 entities" in result.stderr, result.stderr
    assert digests(store.data_dir) == before
    store.start()
    store.stop()
    result = check(store.data_dir)
    assert result.returncode == 0 and "200 entities" in result.stderr, result.stderr


def test_a_check_refuses_a_store_a_server_has_open(store):
    result = check(store.data_dir)
    assert result.returncode != 0
    assert "in use by a running Tafel" in result.stderr, result.stderr


def test_a_damaged_entity_is_never_returned_nor_built_on_and_check_names_it(store):
    rows = fill(store, "rotten")
    store.stop()
    store_file = store.data_dir / "tafel.redb"
    data = bytearray(store_file.read_bytes())
    # Every copy of the row's text redb's copy-on-write left: the live one among them.
    at = data.find(MARK.encode())
    assert at >= 0
    while at >= 0:
        data[at + 3] ^= 0x01
        at = data.find(MARK.encode(), at + 1)
    store_file.write_bytes(bytes(data))

    before = digests(store.data_dir)
    result = check(store.data_dir)
    assert result.returncode != 0
    assert 'damaged: entity devstoreaccount1/rotten PartitionKey "p" RowKey "r0042": ' \
           "its value failed its checksum" in result.stdout, result.stdout + result.stderr
    assert digests(store.data_dir) == before, "check changed a file"

    store.start()
    # No retries: the SDK retries a 500 with backoff, seconds per call, to the same answer.
    with TableServiceClient.from_connection_string(store.conn_str, retry_total=0) as svc:
        table = svc.get_table_client("rotten")
        with pytest.raises(HttpResponseError) as read:
            table.get_entity("p", "r0042")
        assert read.value.status_code == 500
        assert read.value.response.headers.get("x-ms-error-code") == "InternalError"
        assert "damaged" in read.value.response.text(), read.value.response.text()
        with pytest.raises(HttpResponseError) as query:
            list(table.query_entities("N ge 0"))
        assert query.value.status_code == 500
        # A merge would have decoded the damaged row as "no properties" and written the
        # row over with only its own: it fails, and the row stays as it was.
        with pytest.raises(HttpResponseError) as merge:
            table.update_entity({"PartitionKey": "p", "RowKey": "r0042", "N": -1}, mode=UpdateMode.MERGE)
        assert merge.value.status_code == 500
        with pytest.raises(HttpResponseError):
            table.get_entity("p", "r0042")
        # Every other row reads as written.
        for key, want in rows.items():
            if key == "r0042":
                continue
            got = table.get_entity("p", key)
            assert (got["Text"], got["N"]) == (want["Text"], want["N"])
    store.stop()
    assert check(store.data_dir).returncode != 0
