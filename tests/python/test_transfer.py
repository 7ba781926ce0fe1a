"""`tafel export`, `tafel import` and `tafel copy` between two real Tafel servers: every EDM
type and edge value round trip through JSONL, CSV, zstd and a direct copy, compared entity by
entity and type by type through the SDK; rejected rows with Azure's errors and their exit
status; an import interrupted with Ctrl-C and resumed gives exactly the source; a changeset
whose answer is lost is retried without failing on its own success; clear failures."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest
from azure.data.tables import TableServiceClient

from conftest import TafelServer, scrape, tafel_binary, unique_table_name
from edge_data import edge_entities, table_of

def tafel(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(tafel_binary()), *args], capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def two(_workdir):
    """A source and a target server, each with its own store."""
    servers = []
    for name in ("source", "target"):
        tag = uuid.uuid4().hex[:6]
        srv = TafelServer(_workdir / f"data-{name}-{tag}", _workdir / f"tafel-{name}-{tag}.log")
        srv.start()
        servers.append(srv)
    yield servers
    for srv in servers:
        srv.stop()


@pytest.fixture(scope="module")
def source(two):
    srv = two[0]
    table = unique_table_name("src")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        client = svc.create_table(table)
        for e in edge_entities():
            client.create_entity(e)
        expected = table_of(svc, table)
    return srv, table, expected


@pytest.mark.parametrize("name", ["out.jsonl", "out.csv", "out.jsonl.zst", "out.csv.zst"])
def test_export_then_import_gives_the_same_entities_type_by_type(two, source, tmp_path, name):
    srv, table, expected = source
    target = two[1]
    path = tmp_path / name
    r = tafel("export", "--from", srv.conn_str, "--table", table, "--out", str(path))
    assert r.returncode == 0, r.stderr
    assert f"{len(expected)} rows" in r.stderr
    copy = unique_table_name("imp")
    r = tafel("import", "--to", target.conn_str, "--table", copy, "--in", str(path), "--create-table")
    assert r.returncode == 0, r.stderr
    assert f"{len(expected)} written, 0 rejected" in r.stderr
    # A finished import leaves nothing to resume and no empty rejects file.
    assert not list(tmp_path.glob("*.checkpoint")) and not list(tmp_path.glob("*.rejects.jsonl"))
    with TableServiceClient.from_connection_string(target.conn_str) as svc:
        assert table_of(svc, copy) == expected


def test_copy_streams_a_table_and_a_filtered_part_of_it(two, source):
    srv, table, expected = source
    target = two[1]
    r = tafel("copy", "--from", srv.conn_str, "--table", table, "--to", target.conn_str, "--to-table", "copied",
              "--create-table", cwd=str(srv.data_dir.parent))
    assert r.returncode == 0, r.stderr
    r = tafel("copy", "--from", srv.conn_str, "--table", table, "--filter", "PartitionKey eq 'many' and N ge 200",
              "--to", target.conn_str, "--to-table", "copiedpart", "--create-table", cwd=str(srv.data_dir.parent))
    assert r.returncode == 0, r.stderr
    with TableServiceClient.from_connection_string(target.conn_str) as svc:
        assert table_of(svc, "copied") == expected
        assert sorted(k for k in table_of(svc, "copiedpart")) == [("many", f"{i:04d}") for i in range(200, 250)]


def test_parallel_reads_split_by_partition_and_read_every_entity_once(two, tmp_path):
    srv, target = two
    table = unique_table_name("par")
    # Partitions dense in ASCII, and keys whose order differs between UTF-16 (Azure) and
    # code points (the client's strings): the split strings must sit between both.
    pks = [f"p{i:03d}" for i in range(300)] + ["it's", "\u00ff", "\u65e5\u672c", "\U0001f600-astral", "\uff5e-wide"]
    rows = [{"PartitionKey": pk, "RowKey": f"{j:02d}", "N": j} for pk in pks for j in range(60)]
    path = tmp_path / "par.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = tafel("import", "--to", srv.conn_str, "--table", table, "--in", str(path), "--create-table")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "par-out.jsonl"
    r = tafel("export", "--from", srv.conn_str, "--table", table, "--parallel", "4", "--out", str(out))
    assert r.returncode == 0, r.stderr
    ranges = int(re.search(r"read as (\d+) key ranges", r.stderr).group(1))
    assert ranges > 1, r.stderr
    keys = [(l["PartitionKey"], l["RowKey"]) for l in map(json.loads, out.read_text().splitlines())]
    assert len(keys) == len(set(keys)), "an entity read twice"
    assert set(keys) == {(r["PartitionKey"], r["RowKey"]) for r in rows}
    # A filter and a select still hold in every range.
    r = tafel("export", "--from", srv.conn_str, "--table", table, "--parallel", "3", "--filter", "N lt 10",
              "--select", "N", "--out", str(out))
    assert r.returncode == 0, r.stderr
    got = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(got) == len(pks) * 10 and all(g["N"] < 10 and set(g) >= {"PartitionKey", "RowKey"} for g in got)
    r = tafel("copy", "--from", srv.conn_str, "--table", table, "--to", target.conn_str, "--to-table", table,
              "--create-table", "--parallel", "4", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    with TableServiceClient.from_connection_string(target.conn_str) as svc:
        assert table_of(svc, table) == table_of(TableServiceClient.from_connection_string(srv.conn_str), table)
    # Only one reader repeats its order, so only a sequential copy resumes.
    r = tafel("copy", "--from", srv.conn_str, "--table", table, "--to", target.conn_str, "--parallel", "2", "--resume")
    assert r.returncode != 0 and "--resume needs --parallel 1" in r.stderr


def batches_served(srv) -> int:
    """$batch requests the server answered, whatever their status."""
    return int(sum(v for (name, labels), v in scrape(srv).items()
                   if name == "tafel_requests_total" and ("operation", "EntityGroupTransaction") in labels))


def test_rows_of_interleaved_partitions_still_go_as_full_changesets(two, tmp_path):
    target = two[1]
    table = unique_table_name("mixed")
    # Five partitions taking turns row by row, one RowKey twice (it must stay in order).
    rows = [{"PartitionKey": f"p{i % 5}", "RowKey": f"{i:04d}", "N": i} for i in range(1000)]
    rows.append({"PartitionKey": "p3", "RowKey": "0003", "N": -3})
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = batches_served(target)
    r = tafel("import", "--to", target.conn_str, "--table", table, "--in", str(path), "--create-table",
              "--mode", "replace", "--in-flight", "1")
    assert r.returncode == 0, r.stderr
    # 200 rows per partition: two changesets each (and one for the repeated key), not 1,001.
    assert 0 < batches_served(target) - before <= 12
    with TableServiceClient.from_connection_string(target.conn_str) as svc:
        got = {(e["PartitionKey"], e["RowKey"]): e["N"] for e in svc.get_table_client(table).list_entities()}
    want = {(r["PartitionKey"], r["RowKey"]): r["N"] for r in rows}
    assert got == want and got[("p3", "0003")] == -3


def test_all_tables_into_a_directory(two, tmp_path):
    srv = two[0]
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        names = [unique_table_name("all") for _ in range(3)]
        for i, n in enumerate(names):
            svc.create_table(n).create_entity({"PartitionKey": "p", "RowKey": str(i)})
    r = tafel("export", "--from", srv.conn_str, "--all-tables", "--out", str(tmp_path / "dump"))
    assert r.returncode == 0, r.stderr
    for i, n in enumerate(names):
        lines = (tmp_path / "dump" / f"{n}.jsonl").read_text().splitlines()
        assert [json.loads(l)["RowKey"] for l in lines] == [str(i)]


def test_rejected_rows_go_to_the_rejects_file_with_azures_error(two, tmp_path):
    target = two[1]
    table = unique_table_name("rej")
    with TableServiceClient.from_connection_string(target.conn_str) as svc:
        svc.create_table(table).create_entity({"PartitionKey": "p", "RowKey": "exists", "V": 0})
    rows = [
        {"PartitionKey": "p", "RowKey": "a", "V": 1},
        {"PartitionKey": "p", "RowKey": "exists", "V": 2},
        {"PartitionKey": "p", "RowKey": "bad/key", "V": 3},
        {"PartitionKey": "p", "RowKey": "b", "V": 4},
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    r = tafel("import", "--to", target.conn_str, "--table", table, "--in", str(path))
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "3 rows were refused" in r.stderr
    rejects = [json.loads(l) for l in (tmp_path / "in.jsonl.rejects.jsonl").read_text().splitlines()]
    by_line = {x["line"]: x for x in rejects}
    assert by_line[2]["code"] == "EntityAlreadyExists" and by_line[2]["status"] == 409
    assert by_line[3]["code"] in ("InvalidInput", "OutOfRangeInput") and by_line[3]["RowKey"] == "bad/key"
    assert by_line[5]["code"] == "InvalidInput" and "not JSON" in by_line[5]["message"]
    with TableServiceClient.from_connection_string(target.conn_str) as svc:
        got = {e["RowKey"]: e["V"] for e in svc.get_table_client(table).list_entities()}
    assert got == {"a": 1, "exists": 0, "b": 4}


def test_an_interrupted_import_resumed_gives_exactly_the_source(two, tmp_path):
    target = two[1]
    table = unique_table_name("resume")
    path = tmp_path / "big.jsonl"
    # Small partitions, one changeset at a time: long enough to stop in the middle.
    n = 60_000
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"PartitionKey": f"p{i // 4:06d}", "RowKey": f"{i:06d}", "N": i}) + "\n")
    args = [str(tafel_binary()), "import", "--to", target.conn_str, "--table", table, "--in", str(path),
            "--create-table", "--in-flight", "1"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    checkpoint_file = tmp_path / "big.jsonl.checkpoint"

    def checkpoint_line() -> int:
        try:
            return json.loads(checkpoint_file.read_text())["line"]
        except (OSError, ValueError):
            return 0

    deadline = time.monotonic() + 30
    # Checkpoints are saved every second and pass a window of rows once all of it is in.
    while checkpoint_line() == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert "--resume" in err
    checkpoint = json.loads(checkpoint_file.read_text())
    assert 0 < checkpoint["line"] < n, checkpoint
    r = tafel("import", "--to", target.conn_str, "--table", table, "--in", str(path), "--resume")
    assert r.returncode == 0, r.stderr
    # Rows the stopped run wrote past its checkpoint are met as its own, counted once.
    assert f"{n} written, 0 rejected" in r.stderr, r.stderr
    with TableServiceClient.from_connection_string(target.conn_str) as svc:
        got = sorted(e["N"] for e in svc.get_table_client(table).list_entities(select=["N"]))
    assert got == list(range(n))


class LosingProxy:
    """Forwards to a server, but swallows the answer to the first $batch request after
    forwarding it: the changeset is applied, and the client never hears so."""

    def __init__(self, port: int):
        self.target = port
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.lost = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            client, _ = self.sock.accept()
            threading.Thread(target=self.one, args=(client,), daemon=True).start()

    def one(self, client):
        upstream = socket.create_connection(("127.0.0.1", self.target))
        try:
            while True:
                request = self.read_request(client)
                if not request:
                    return
                upstream.sendall(request)
                answer = self.read_answer(upstream)
                if b"$batch" in request.split(b"\r\n", 1)[0] and self.lost == 0:
                    self.lost += 1
                    return  # the changeset was applied; its answer is dropped with the connection
                client.sendall(answer)
        except OSError:
            return
        finally:
            client.close()
            upstream.close()

    @staticmethod
    def read_message(sock, head_only_body=True):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return b""
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(body) < length:
            body += sock.recv(65536)
        return head + b"\r\n\r\n" + body

    read_request = read_message
    read_answer = read_message


def test_a_changeset_whose_answer_was_lost_is_retried_without_failing_on_its_own_success(two, tmp_path):
    target = two[1]
    proxy = LosingProxy(target.port)
    table = unique_table_name("lost")
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"PartitionKey": "p", "RowKey": f"{i:03d}", "N": i}) + "\n" for i in range(50)))
    via_proxy = target.conn_str.replace(f":{target.port}/", f":{proxy.port}/")
    r = tafel("import", "--to", via_proxy, "--table", table, "--in", str(path), "--create-table")
    assert proxy.lost == 1
    assert r.returncode == 0, r.stderr
    assert "50 written, 0 rejected" in r.stderr
    with TableServiceClient.from_connection_string(target.conn_str) as svc:
        assert len(list(svc.get_table_client(table).list_entities())) == 50


def test_clear_failures(two, tmp_path):
    r = tafel("export", "--from", "AccountName=x", "--table", "t")
    assert r.returncode != 0 and "neither AccountKey nor SharedAccessSignature" in r.stderr
    r = tafel("export", "--from", two[0].conn_str, "--table", "nosuchtable", "--out", str(tmp_path / "x.jsonl"))
    assert r.returncode != 0 and "TableNotFound" in r.stderr
    r = tafel("import", "--to", two[1].conn_str, "--table", "t", "--in", str(tmp_path / "missing.jsonl"))
    assert r.returncode != 0 and "missing.jsonl" in r.stderr
    assert tafel("export", "--help").returncode == 0


def test_copy_or_import_into_a_missing_table_stops_at_once_naming_it_and_the_flag(two, tmp_path):
    # Before: every row was read and came back rejected (1,500 rejects for 1,500 rows, exit 3).
    src, dst = two
    table = unique_table_name("many")
    with TableServiceClient.from_connection_string(src.conn_str) as svc:
        client = svc.create_table(table)
        for start in range(0, 1500, 100):
            client.submit_transaction([("create", {"PartitionKey": "p", "RowKey": f"{i:05d}"}) for i in range(start, start + 100)])
    before = batches_served(dst)
    r = tafel("copy", "--from", src.conn_str, "--to", dst.conn_str, "--table", table, "--to-table", "notthere",
              cwd=str(tmp_path))
    assert r.returncode == 1, r.stderr
    assert "'notthere' does not exist" in r.stderr and "--create-table" in r.stderr, r.stderr
    assert "rejected" not in r.stderr and "refused" not in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())
    assert batches_served(dst) == before
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"PartitionKey": "p", "RowKey": str(i)}) + "\n" for i in range(1500)))
    r = tafel("import", "--to", dst.conn_str, "--table", "notthere", "--in", str(path), cwd=str(tmp_path))
    assert r.returncode == 1 and "'notthere' does not exist" in r.stderr and "--create-table" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]
    # Key and signature stay out of the message.
    assert "AccountKey" not in r.stderr and dst.conn_str.split("AccountKey=")[1].split(";")[0] not in r.stderr
