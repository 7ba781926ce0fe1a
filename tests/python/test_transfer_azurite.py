"""The data tools against Azurite, the official emulator (npm package `azurite`, installed
in tests/azurite by scripts/test and started here): a table with every EDM type and edge
value moves from Azurite to Tafel by export + import and by copy, and back from Tafel to
Azurite, compared entity by entity, type by type, through the SDK."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest
from azure.data.tables import TableServiceClient

from conftest import ACCOUNT, KEY, REPO_ROOT, free_port, tafel_binary, unique_table_name
from edge_data import edge_entities, table_of

AZURITE = REPO_ROOT / "tests" / "azurite" / "node_modules" / ".bin" / "azurite-table"


def tafel(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(tafel_binary()), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def azurite(tmp_path_factory):
    if not AZURITE.exists():
        pytest.fail(f"{AZURITE} is missing: run `npm ci` in tests/azurite (scripts/test does)", pytrace=False)
    port = free_port()
    work = tmp_path_factory.mktemp("azurite")
    log = open(work / "azurite.log", "wb")
    proc = subprocess.Popen(
        [str(AZURITE), "--tableHost", "127.0.0.1", "--tablePort", str(port), "--inMemoryPersistence",
         "--skipApiVersionCheck", "--disableProductStyleUrl"],
        cwd=str(work),
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Azurite did not start: {(work / 'azurite.log').read_text()[-2000:]}", pytrace=False)
            time.sleep(0.2)
    yield (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
           f"TableEndpoint=http://127.0.0.1:{port}/{ACCOUNT};")
    proc.terminate()
    proc.wait(timeout=20)
    log.close()


def seeded(conn_str: str) -> tuple[str, dict]:
    table = unique_table_name("edges")
    with TableServiceClient.from_connection_string(conn_str) as svc:
        client = svc.create_table(table)
        for e in edge_entities():
            client.create_entity(e)
        return table, table_of(svc, table)


def test_a_table_moves_from_azurite_to_tafel_by_file_and_by_copy(azurite, server, tmp_path):
    table, expected = seeded(azurite)
    assert len(expected) == 257
    path = tmp_path / "from-azurite.jsonl.zst"
    r = tafel("export", "--from", azurite, "--table", table, "--out", str(path))
    assert r.returncode == 0, r.stderr
    imported, copied = unique_table_name("imp"), unique_table_name("cp")
    r = tafel("import", "--to", server.conn_str, "--table", imported, "--in", str(path), "--create-table")
    assert r.returncode == 0, r.stderr
    r = tafel("copy", "--from", azurite, "--table", table, "--to", server.conn_str, "--to-table", copied,
              "--create-table")
    assert r.returncode == 0, r.stderr
    with TableServiceClient.from_connection_string(server.conn_str) as svc:
        assert table_of(svc, imported) == expected
        assert table_of(svc, copied) == expected


def test_a_table_moves_from_tafel_to_azurite(azurite, server, tmp_path):
    table, expected = seeded(server.conn_str)
    r = tafel("copy", "--from", server.conn_str, "--table", table, "--to", azurite, "--create-table")
    assert r.returncode == 0, r.stderr
    path = tmp_path / "from-tafel.csv"
    r = tafel("export", "--from", server.conn_str, "--table", table, "--out", str(path))
    assert r.returncode == 0, r.stderr
    from_csv = unique_table_name("csv")
    r = tafel("import", "--to", azurite, "--table", from_csv, "--in", str(path), "--create-table")
    assert r.returncode == 0, r.stderr
    with TableServiceClient.from_connection_string(azurite) as svc:
        assert table_of(svc, table) == expected
        assert table_of(svc, from_csv) == expected


def test_azurite_is_followed_by_polling_and_a_feed_is_asked_for_plainly(azurite, server, tmp_path):
    """Azurite has no change feed: `--follow` says so and what to do; `--since` copies what
    changed since a time; `--follow --poll` keeps a Tafel table in step with it (but for
    deletes, which polling cannot see)."""
    import signal
    from datetime import datetime, timezone

    table, _ = seeded(azurite)
    r = tafel("copy", "--from", azurite, "--table", table, "--to", server.conn_str, "--to-table",
              unique_table_name("nofeed"), "--create-table", "--follow")
    assert r.returncode == 1 and "--poll" in r.stderr and "no change feed" in r.stderr, r.stderr
    time.sleep(1.1)
    since = datetime.now(timezone.utc)
    time.sleep(1.1)
    with TableServiceClient.from_connection_string(azurite) as svc:
        client = svc.get_table_client(table)
        client.upsert_entity({"PartitionKey": "many", "RowKey": "0001", "N": 1001})
        client.create_entity({"PartitionKey": "new", "RowKey": "1", "When": since})
        changed = {k: v for k, v in table_of(svc, table).items() if k in {("many", "0001"), ("new", "1")}}
    since_copy = unique_table_name("since")
    r = tafel("copy", "--from", azurite, "--table", table, "--to", server.conn_str, "--to-table", since_copy,
              "--create-table", "--since", since.isoformat())
    assert r.returncode == 0, r.stderr
    with TableServiceClient.from_connection_string(server.conn_str) as svc:
        assert table_of(svc, since_copy) == changed

    followed = unique_table_name("poll")
    err = open(tmp_path / "poll.stderr", "w+")
    proc = subprocess.Popen([str(tafel_binary()), "copy", "--from", azurite, "--table", table, "--to", server.conn_str,
                             "--to-table", followed, "--create-table", "--follow", "--poll", "--poll-interval", "0.2"],
                            cwd=str(tmp_path), stdout=subprocess.DEVNULL, stderr=err)
    try:
        with TableServiceClient.from_connection_string(azurite) as a, \
                TableServiceClient.from_connection_string(server.conn_str) as t:
            def in_step(want):
                deadline = time.monotonic() + 60
                while True:
                    try:
                        if table_of(t, followed) == want:
                            return
                    except Exception:  # the copy has not created its table yet
                        pass
                    assert time.monotonic() < deadline, "the target never came into step"
                    time.sleep(0.1)
            in_step(table_of(a, table))
            a.get_table_client(table).upsert_entity({"PartitionKey": "new", "RowKey": "2", "S": "later"})
            in_step(table_of(a, table))
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    err.seek(0)
    assert proc.returncode == 130 and "deletes at the source are NOT seen" in err.read()
