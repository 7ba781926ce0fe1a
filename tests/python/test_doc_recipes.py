"""The docs' recipes are run as printed (doc_recipes.py): every fenced block of the user
docs is marked as a recipe a test runs, or as not run with the reason; a new block without
a marker, or a recipe no test runs, fails here. Also the recipes that need no container:
docs/azurite.md's command line, and docs/testing.md's fault rules, curl calls, snapshot
commands and Python test, each against a server on the default ports the docs assume."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from azure.data.tables import TableServiceClient

from conftest import BACKEND, REPO_ROOT, tafel_binary
from doc_recipes import PAGES, blocks, commands, recipe

DEV_CONN = "UseDevelopmentStorage=true"


def test_every_block_of_the_docs_is_a_recipe_a_test_runs_or_says_why_not():
    tests = "\n".join(p.read_text() for p in (REPO_ROOT / "tests" / "python").glob("test_*.py"))
    unmarked, unrun = [], []
    for page in PAGES:
        for b in blocks(page):
            if b.kind is None:
                unmarked.append(f"docs/{page}:{b.line}")
            elif b.kind == "recipe" and f'"{b.name}"' not in tests:
                unrun.append(f"docs/{page}:{b.line} ({b.name})")
            elif b.kind == "not run":
                assert b.name, f"docs/{page}:{b.line}: <!-- not run: --> says no reason"
    assert not unmarked, f"fenced blocks with no <!-- recipe: NAME --> or <!-- not run: WHY --> marker: {unmarked}"
    assert not unrun, f"recipes no test runs: {unrun}"


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@pytest.fixture
def default_ports():
    """The docs address Tafel as an emulator is addressed: 10002, and 10012 for the admin listener."""
    if BACKEND != "embedded":
        pytest.skip("the docs' recipes run once, in the embedded pass")
    taken = [p for p in (10002, 10012) if not port_free(p)]
    if taken:
        pytest.fail(f"the docs' recipes use the default ports, and {taken} are taken on this machine", pytrace=False)


def shell(script: str, cwd: Path, timeout: float = 120, **env) -> subprocess.CompletedProcess:
    path = f"{tafel_binary().parent}:{os.environ['PATH']}"
    full = {k: v for k, v in os.environ.items() if not k.startswith(("TAFEL_", "AZURITE_"))}
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, capture_output=True, text=True,
                       timeout=timeout, env={**full, "PATH": path, **env})
    assert r.returncode == 0, f"{script}\n--- stdout\n{r.stdout[-2000:]}\n--- stderr\n{r.stderr[-3000:]}"
    return r


def test_azurites_command_line_as_the_page_prints_it(default_ports, tmp_path):
    azurite_bin = REPO_ROOT / "tests" / "azurite" / "node_modules" / ".bin"
    if not (azurite_bin / "azurite-table").exists():
        pytest.fail("tests/azurite has no azurite-table: run `npm ci` in tests/azurite (scripts/test does)", pytrace=False)
    for line in commands(recipe("azurite.md", "azurite-command-line")):
        program, *args = line.split()
        exe = str(azurite_bin / program) if program.startswith("azurite") else str(tafel_binary())
        cwd = tmp_path / program
        cwd.mkdir()
        proc = subprocess.Popen([exe, *args], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with TableServiceClient.from_connection_string(DEV_CONN, retry_total=0) as svc:
                        svc.create_table("recipe").create_entity({"PartitionKey": "p", "RowKey": "r"})
                        assert len(list(svc.get_table_client("recipe").list_entities())) == 1
                    break
                except Exception:
                    assert proc.poll() is None, f"{line}: exited {proc.returncode}"
                    assert time.monotonic() < deadline, f"{line}: did not serve"
                    time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        assert (cwd / "azurite-data").is_dir()


@pytest.fixture
def default_server(default_ports, tmp_path):
    """`tafel serve --in-memory` on the default ports, as the pages' readers run it."""
    from launch import Launched

    srv = Launched(["serve", "--in-memory"], 10002, tmp_path)
    srv.wait_listening()
    yield srv
    srv.stop()


def test_testing_fault_rules_file_curl_calls_and_python_test(default_ports, tmp_path):
    from launch import Launched

    (tmp_path / "faults.toml").write_text(recipe("testing.md", "faults-toml"))
    # The file's own first line says how it is used.
    first = recipe("testing.md", "faults-toml").splitlines()[0]
    args = first.split("tafel ", 1)[1].split()
    srv = Launched(args, 10002, tmp_path)
    srv.wait_listening()
    try:
        rules = requests.get("http://127.0.0.1:10012/faults", timeout=5).json()["rules"]
        assert [r["table"] for r in rules] == ["orders", "audit*"]
        r = shell(recipe("testing.md", "faults-curl"), tmp_path)
        assert '"fired":' in r.stdout, r.stdout
        assert requests.get("http://127.0.0.1:10012/faults", timeout=5).json()["rules"] == []
        with TableServiceClient.from_connection_string(DEV_CONN) as svc:
            svc.create_table("orders")
        (tmp_path / "test_recipe.py").write_text(recipe("testing.md", "faults-python"))
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_recipe.py"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout[-3000:]
    finally:
        srv.stop()


def test_testing_azure_limits_command_lines_and_python_snippet(default_ports, tmp_path):
    from launch import Launched

    for line in commands(recipe("testing.md", "azure-limits-commands")):
        args = line.split("#")[0].split()[1:]
        srv = Launched(args, 10002, tmp_path)
        srv.wait_listening()
        try:
            with TableServiceClient.from_connection_string(DEV_CONN) as svc:
                svc.create_table_if_not_exists("orders")
            if "--partition-limit" in args:
                r = subprocess.run([sys.executable, "-c", recipe("testing.md", "azure-limits-python")],
                                   capture_output=True, text=True, timeout=120)
                assert r.returncode == 0 and "201]" in r.stdout, r.stdout + r.stderr
        finally:
            srv.stop()


def test_testing_snapshot_curl_calls_and_commands(default_server, tmp_path):
    with TableServiceClient.from_connection_string(DEV_CONN) as svc:
        svc.create_table("kept")
    r = shell(recipe("testing.md", "snapshots-curl"), tmp_path)
    assert '"tables_deleted":1' in r.stdout, r.stdout
    r = shell(recipe("testing.md", "snapshot-commands"), tmp_path)
    assert "restored snapshot baseline" in r.stdout, r.stdout


def test_testing_javascript_fault_test(default_server, tmp_path):
    import uuid

    js = REPO_ROOT / "tests" / "js"
    if not (js / "node_modules" / "@azure" / "data-tables").exists():
        pytest.fail("tests/js has no node_modules: run `npm ci` in tests/js (scripts/test does, before this suite)",
                    pytrace=False)
    # What the page's test assumes: 25 entities in orders.
    with TableServiceClient.from_connection_string(DEV_CONN) as svc:
        orders = svc.create_table("orders")
        orders.submit_transaction([("create", {"PartitionKey": "p", "RowKey": f"{i:02d}"}) for i in range(25)])
    # Beside tests/js's package.json, where its modules resolve; removed after.
    test = js / f".recipe-{uuid.uuid4().hex[:8]}.test.mjs"
    test.write_text(recipe("testing.md", "faults-javascript"))
    try:
        r = subprocess.run(["node", "--test", test.name], cwd=js, capture_output=True, text=True, timeout=120)
    finally:
        test.unlink()
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert requests.get("http://127.0.0.1:10012/faults", timeout=5).json()["rules"] == []


def read_sas(table: str) -> str:
    """A table SAS that may query `table` for an hour: what the pages call `$SAS`."""
    from datetime import datetime, timedelta, timezone

    from azure.core.credentials import AzureNamedKeyCredential
    from azure.data.tables import TableSasPermissions, generate_table_sas

    from rawhttp import ACCOUNT, KEY

    return generate_table_sas(AzureNamedKeyCredential(ACCOUNT, KEY), table,
                              permission=TableSasPermissions(read=True),
                              expiry=datetime.now(timezone.utc) + timedelta(hours=1))


def test_lifecycle_count_and_stats_calls_and_commands(default_server, tmp_path):
    with TableServiceClient.from_connection_string(DEV_CONN) as svc:
        orders = svc.create_table("orders")
        orders.submit_transaction([("create", {"PartitionKey": "uk", "RowKey": f"{i:02d}"}) for i in range(12)])
    r = shell(recipe("lifecycle.md", "count-curl"), tmp_path, SAS=read_sas("orders"))
    assert r.stdout.strip() == "12", r.stdout
    r = shell(recipe("lifecycle.md", "stats-curl"), tmp_path)
    import json

    one, at = json.JSONDecoder().raw_decode(r.stdout)
    every = json.loads(r.stdout[at:])
    assert (one["table"], one["entities"], one["partitions"]) == ("orders", 12, 1), r.stdout
    assert [(t["table"], t["entities"]) for t in every["tables"]] == [("orders", 12)], r.stdout
    r = shell(recipe("lifecycle.md", "stats-commands"), tmp_path)
    assert "table\torders\nentities\t12\npartitions\t1\n" in r.stdout, r.stdout


def test_lifecycle_ttl_calls_commands_and_clock(default_server, tmp_path):
    import json

    with TableServiceClient.from_connection_string(DEV_CONN) as svc:
        orders = svc.create_table("orders")
        orders.create_entity({"PartitionKey": "uk", "RowKey": "1"})
    # PUT, GET, DELETE: the GET's answer sits between the PUT's and DELETE's empty one.
    r = shell(recipe("lifecycle.md", "ttl-curl"), tmp_path)
    put, at = json.JSONDecoder().raw_decode(r.stdout)
    got = json.loads(r.stdout[at:])
    assert put["seconds"] == got["seconds"] == 86400, r.stdout
    r = shell(recipe("lifecycle.md", "ttl-commands"), tmp_path)
    assert "property  ExpiresAt" in r.stdout and r.stdout.rstrip().endswith("orders: no TTL"), r.stdout
    r = shell(recipe("lifecycle.md", "clock-curl"), tmp_path)
    assert r.stdout == '{"offset-seconds":86400}{"offset-seconds":0}', r.stdout


def test_lifecycle_purge_call_and_commands(default_server, tmp_path):
    import json

    with TableServiceClient.from_connection_string(DEV_CONN) as svc:
        orders = svc.create_table("orders")
        for pk in ("uk", "fr"):
            orders.submit_transaction([("create", {"PartitionKey": pk, "RowKey": f"{i:02d}", "Qty": i}) for i in range(20)])
        r = shell(recipe("lifecycle.md", "purge-curl"), tmp_path)
        job = json.loads(r.stdout)
        assert job["state"] in ("running", "done") and job["partition"] == "uk", r.stdout
        deadline = time.monotonic() + 30
        while job["state"] == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
            job = requests.get(f"http://127.0.0.1:10012/purge-jobs/{job['id']}", timeout=5).json()
        assert (job["state"], job["deleted"]) == ("done", 10), job
        assert len(list(orders.list_entities())) == 30
        r = shell(recipe("lifecycle.md", "purge-commands"), tmp_path)
        assert "purged 0 entities" in r.stderr + r.stdout and "purged 30 entities" in r.stderr + r.stdout, r
        assert list(orders.list_entities()) == []


@pytest.fixture
def soft_delete_server(default_ports, tmp_path):
    """`tafel serve --in-memory --table-soft-delete 1h` on the default ports, as the
    undelete recipes suppose."""
    from launch import Launched

    srv = Launched(["serve", "--in-memory", "--table-soft-delete", "1h"], 10002, tmp_path)
    srv.wait_listening()
    yield srv
    srv.stop()


def deleted_orders(svc, times: int) -> None:
    """Six other tables first (ids 1–6), then `orders` created and deleted `times`
    times: the first deletion is the page's id 7."""
    for i in range(6):
        svc.create_table(f"other{i}")
    for n in range(times):
        orders = svc.create_table("orders")
        orders.create_entity({"PartitionKey": "uk", "RowKey": str(n)})
        svc.delete_table("orders")


def test_lifecycle_undelete_calls(soft_delete_server, tmp_path):
    import json

    with TableServiceClient.from_connection_string(DEV_CONN) as svc:
        deleted_orders(svc, 1)
        r = shell(recipe("lifecycle.md", "undelete-curl"), tmp_path)
        listed, at = json.JSONDecoder().raw_decode(r.stdout)
        restored = json.loads(r.stdout[at:])
        assert [(t["id"], t["name"], t["entities"]) for t in listed["deletedTables"]] == [("7", "orders", 1)], r.stdout
        assert restored["table"] == "orders2", r.stdout
        assert [e["RowKey"] for e in svc.get_table_client("orders2").list_entities()] == ["0"]


def test_lifecycle_undelete_commands(soft_delete_server, tmp_path):
    with TableServiceClient.from_connection_string(DEV_CONN) as svc:
        deleted_orders(svc, 3)
        r = shell(recipe("lifecycle.md", "undelete-commands"), tmp_path)
        # The most recent deletion back as orders, the one before as orders2, the first (id 7) as orders3.
        for table, row in [("orders", "2"), ("orders2", "1"), ("orders3", "0")]:
            assert [e["RowKey"] for e in svc.get_table_client(table).list_entities()] == [row], r.stdout


def test_indexes_commands_and_the_plan_header(default_server, tmp_path):
    with TableServiceClient.from_connection_string(DEV_CONN) as svc:
        customers = svc.create_table("Customers")
        for i, email in enumerate(["ada@example.com", "grace@example.com", "edsger@example.com"]):
            customers.create_entity({"PartitionKey": f"p{i}", "RowKey": "r", "Email": email})
    r = shell(recipe("indexes.md", "index-commands"), tmp_path)
    assert "Email" in r.stdout, r.stdout
    assert requests.get("http://127.0.0.1:10012/accounts/devstoreaccount1/tables/Customers/indexes",
                        timeout=5).json()["indexes"] == []
    create = commands(recipe("indexes.md", "index-commands"))[0]
    shell(create, tmp_path)
    r = shell(recipe("indexes.md", "plan-curl"), tmp_path, URL="http://127.0.0.1:10002/devstoreaccount1",
              SAS=read_sas("Customers"))
    assert "x-tafel-query-plan: index:Email" in r.stdout, r.stdout
    assert "x-tafel-rows-examined: 1" in r.stdout.lower(), r.stdout
    r = shell(recipe("indexes.md", "index-every-property"), tmp_path)
    # Email, the only property, has an index of its own: `*` lists no entries of its own.
    assert "indexed Customers.*: 0 entries" in r.stdout, r.stdout


def test_indexes_scan_warn_recipe_names_the_scanning_query(default_ports, tmp_path):
    serve, grep = commands(recipe("indexes.md", "scan-warn"))
    assert serve.endswith("&"), serve
    # As printed, but run here so the test holds the server (the recipe backgrounds it).
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAFEL_")}
    env["PATH"] = f"{tafel_binary().parent}:{env['PATH']}"
    proc = subprocess.Popen(["bash", "-c", "exec " + serve.removesuffix("&").strip()], cwd=tmp_path, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while port_free(10002):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "tafel.log").read_text()
            time.sleep(0.05)
        with TableServiceClient.from_connection_string(DEV_CONN) as svc:
            customers = svc.create_table("Customers")
            for start in range(0, 1200, 100):
                customers.submit_transaction(
                    [("create", {"PartitionKey": "p", "RowKey": f"{i:05}", "Email": f"u{i}@example.com"})
                     for i in range(start, start + 100)])
            assert len(list(customers.query_entities("Email eq 'u7@example.com'"))) == 1
            # A point read is not a scan.
            customers.get_entity("p", "00007")
        time.sleep(0.3)
        r = shell(grep, tmp_path)
        lines = r.stdout.strip().splitlines()
        assert len(lines) == 1 and '"rows_examined":1200' in lines[0], r.stdout
        assert "\"filter\":\"Email eq 'u7@example.com'\"" in lines[0], r.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=20)
