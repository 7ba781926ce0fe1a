"""`serve --in-memory` (Azurite's --inMemoryPersistence): the SDK's operations served from
memory, not one file made or held open, the data gone at exit, and a cap
(--in-memory-max-mb) answered as a full disk is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient, TableTransactionError

from conftest import BACKEND, free_port
from launch import Launched, run_tafel

pytestmark = pytest.mark.skipif(BACKEND != "embedded", reason="--in-memory is the embedded store's mode")


def regular_files_open(pid: int) -> list:
    out = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("/") and Path(target).is_file():
            out.append(target)
    return out


def test_in_memory_serves_the_sdk_makes_no_file_and_forgets_at_exit(tmp_path):
    port = free_port()
    data_dir = tmp_path / "never"
    args = ["serve", "--in-memory", "--port", str(port), "--admin-port", str(free_port()),
            "--data-dir", str(data_dir), "--drain-seconds", "0"]
    srv = Launched(args, port, tmp_path)
    srv.wait_listening()
    try:
        with TableServiceClient.from_connection_string(srv.conn_str()) as svc:
            table = svc.create_table("memory")
            table.create_entity({"PartitionKey": "p", "RowKey": "1", "n": 1})
            table.submit_transaction([("upsert", {"PartitionKey": "p", "RowKey": str(i), "n": i}) for i in range(2, 50)])
            with pytest.raises(TableTransactionError):
                table.submit_transaction([("create", {"PartitionKey": "p", "RowKey": "1"})])
            assert len(list(table.query_entities("n ge 10"))) == 40
            table.update_entity({"PartitionKey": "p", "RowKey": "1", "n": 100})
            assert table.get_entity("p", "1")["n"] == 100
            # Enough for a few checkpoints of the in-memory log.
            big = {f"B{j}": os.urandom(60_000) for j in range(4)}
            for i in range(120):
                table.upsert_entity({"PartitionKey": "big", "RowKey": f"{i:03d}", **big})
            assert len(list(table.query_entities("PartitionKey eq 'big'", select=["RowKey"]))) == 120
        # Nothing but the output file the test gave it is open, and nothing was made.
        opened = set(regular_files_open(srv.proc.pid))
        assert opened == {str(srv.log_path)}, opened
    finally:
        assert srv.stop() == 0, srv.output()
    assert not data_dir.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tafel.out"]

    again = Launched(args, port, tmp_path)
    again.wait_listening()
    try:
        with TableServiceClient.from_connection_string(again.conn_str()) as svc:
            assert list(svc.list_tables()) == []
    finally:
        again.stop()


def test_the_in_memory_cap_is_answered_as_a_full_disk(tmp_path):
    port = free_port()
    srv = Launched(["serve", "--in-memory", "--in-memory-max-mb", "8", "--port", str(port), "--no-admin",
                    "--drain-seconds", "0"], port, tmp_path)
    srv.wait_listening()
    acknowledged = []
    try:
        with TableServiceClient.from_connection_string(srv.conn_str(), retry_total=0) as svc:
            table = svc.create_table("capped")
            failure = None
            for i in range(200):
                e = {"PartitionKey": "p", "RowKey": f"{i:04d}", **{f"B{j}": os.urandom(60_000) for j in range(4)}}
                try:
                    table.create_entity(e)
                except HttpResponseError as err:
                    failure = err
                    break
                acknowledged.append(e["RowKey"])
            assert failure is not None, "200 entities of 240 KiB fit in 8 MiB"
            assert failure.status_code == 500
            assert failure.response.headers.get("x-ms-error-code") == "InternalError"
            assert "disk is full" in failure.response.text(), failure.response.text()
            # Room never comes back in memory: the message must not promise it does.
            assert "--in-memory-max-mb, once the server restarts" in failure.response.text()
            assert 10 < len(acknowledged) < 40
            # Reads go on, with every acknowledged write.
            keys = [e["RowKey"] for e in table.list_entities(select=["RowKey"])]
            assert keys == acknowledged
    finally:
        srv.stop()
    # The log says it was the cap.
    assert "No space left" in srv.output(), srv.output()[-3000:]


def test_in_memory_is_refused_with_the_postgres_backend_and_its_cap_without_it(tmp_path):
    r = run_tafel("serve", "--in-memory", "--backend", "postgres", "--postgres-url", "postgresql://x@127.0.0.1:1/x",
                  "--no-admin", "--port", str(free_port()), cwd=tmp_path)
    assert r.returncode != 0
    assert "--in-memory" in r.stderr and "postgres" in r.stderr, r.stderr
    r = run_tafel("serve", "--in-memory-max-mb", "64", "--no-admin", cwd=tmp_path)
    assert r.returncode != 0 and "--in-memory" in r.stderr, r.stderr
