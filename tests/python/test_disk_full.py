"""A serving embedded node whose disk fills up, on a real full disk (a size-limited tmpfs;
the suite runs as root): the write that meets it fails with Azure's server-side status and
code and a message that says the disk is full, readiness says why, reads keep answering with
every acknowledged write; once space is freed writes resume by themselves, no restart, and
every acknowledged write is there, and still after a restart."""

from __future__ import annotations

import os
import time
import uuid

import pytest
import requests
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient

from conftest import BACKEND, TafelServer, grow_disk

pytestmark = pytest.mark.skipif(BACKEND != "embedded", reason="the embedded store's own disk")


def entity(i: int) -> dict:
    # Random bytes do not compress: ~240 KiB each, four Binary properties under 64 KiB.
    return {"PartitionKey": "p", "RowKey": f"{i:05d}", **{f"B{j}": os.urandom(60_000) for j in range(4)}}


def test_a_full_disk_fails_writes_clearly_and_loses_no_acknowledged_one(small_disk, tmp_path):
    # 160 MiB: the write-ahead log takes 128 of them, entities fill the rest.
    disk = small_disk("160m")
    srv = TafelServer(disk / "data", tmp_path / f"tafel-full-{uuid.uuid4().hex[:6]}.log")
    srv.start()
    acknowledged = {}
    try:
        # No retries: the SDK retries a 500 with backoff, seconds per call, to the same answer.
        with TableServiceClient.from_connection_string(srv.conn_str, retry_total=0) as svc:
            table = svc.create_table("fills")
            failure = None
            for i in range(2000):
                e = entity(i)
                try:
                    table.create_entity(e)
                except HttpResponseError as err:
                    failure = err
                    break
                acknowledged[e["RowKey"]] = e
            assert failure is not None, "2000 entities of 240 KiB fit on a 160 MiB disk beside the log"
            assert failure.status_code == 500
            assert failure.response.headers.get("x-ms-error-code") == "InternalError"
            assert "disk is full" in failure.response.text(), failure.response.text()
            assert len(acknowledged) > 10
            # Reads go on, and see every acknowledged write.
            for key in (min(acknowledged), max(acknowledged)):
                got = table.get_entity("p", key)
                assert got["B0"] == acknowledged[key]["B0"]
            assert len(list(table.list_entities(select=["RowKey"]))) == len(acknowledged)
            # Every later write fails the same way, not with some other error.
            with pytest.raises(HttpResponseError) as later:
                table.create_entity({"PartitionKey": "p", "RowKey": "small"})
            assert "disk is full" in later.value.response.text()
        ready = requests.get(srv.admin_url + "/ready", timeout=10)
        assert ready.status_code == 503 and "No space left" in ready.text, ready.text
        # Idle, the failed store does not try (and log) a checkpoint every second.
        failures = srv.log_path.read_text().count("commit failed")
        time.sleep(2.5)
        assert srv.log_path.read_text().count("commit failed") == failures

        # Room again, and no restart: writes resume within moments.
        grow_disk(disk, "512m")
        with TableServiceClient.from_connection_string(srv.conn_str, retry_total=0) as svc:
            table = svc.get_table_client("fills")
            deadline = time.monotonic() + 30
            while True:
                try:
                    table.create_entity({"PartitionKey": "p", "RowKey": "resumed"})
                    break
                except HttpResponseError as err:
                    # "disk is full" until the store notices the room, then 503 ServerBusy
                    # for the moment it takes to open again.
                    assert err.status_code in (500, 503), err
                    assert time.monotonic() < deadline, f"writes did not resume: {err}"
                    time.sleep(0.2)
            stored = {e["RowKey"]: e["B3"] for e in table.list_entities() if e["RowKey"] != "resumed"}
            assert stored.keys() == acknowledged.keys()
            assert all(stored[k] == acknowledged[k]["B3"] for k in stored)
        assert requests.get(srv.admin_url + "/ready", timeout=10).status_code == 200
        assert "writes resume" in srv.log_path.read_text()
    finally:
        srv.stop()
    srv.start()
    try:
        with TableServiceClient.from_connection_string(srv.conn_str) as svc:
            table = svc.get_table_client("fills")
            stored = {e["RowKey"]: e["B3"] for e in table.list_entities() if e["RowKey"] != "resumed"}
            assert stored.keys() == acknowledged.keys()
            assert all(stored[k] == acknowledged[k]["B3"] for k in stored)
            assert table.get_entity("p", "resumed")["RowKey"] == "resumed"
            table.create_entity({"PartitionKey": "p", "RowKey": "after"})
    finally:
        srv.stop()
