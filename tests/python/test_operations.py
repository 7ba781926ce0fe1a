"""Operations: the admin listener (/health, /ready, /metrics), the access log, drain on
SIGTERM. Metrics are read with Prometheus's own text parser after driving operations
through the SDK, and must have moved by exactly what was done."""

from __future__ import annotations

import base64
import json
import os
import signal
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import parse_qs, unquote

import pytest
import requests

from conftest import ACCOUNT, BACKEND, KEY, TafelServer, pg_ctl, postgres_only, scrape, unique_table_name, value

TOKEN = "admin-" + base64.b16encode(os.urandom(12)).decode()


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def requests_total(samples: dict) -> dict:
    """tafel_requests_total as {(operation, status_class, error_code): count}, zeros left out."""
    out = {}
    for (name, labels), v in samples.items():
        if name == "tafel_requests_total" and v:
            d = dict(labels)
            out[(d["operation"], d["status_class"], d["error_code"])] = v
    return out


def delta(after: dict, before: dict) -> dict:
    keys = set(after) | set(before)
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys if after.get(k, 0) != before.get(k, 0)}


def extra_server(workdir: Path, *args: str) -> TafelServer:
    name = unique_table_name("s")
    return TafelServer(workdir / f"data-{name}", workdir / f"tafel-{name}.log", extra_args=list(args))


@pytest.fixture
def workdir(_workdir) -> Path:
    return _workdir


# ---------------------------------------------------------------------------
# Health, readiness, separation from the Table API
# ---------------------------------------------------------------------------


def test_health_and_ready_answer_on_the_admin_port_only(server):
    r = requests.get(server.admin_url + "/health", timeout=5)
    assert (r.status_code, r.text) == (200, "ok\n")
    r = requests.get(server.admin_url + "/ready", timeout=5)
    assert (r.status_code, r.text) == (200, "ready\n")
    assert requests.get(server.admin_url + "/nothing", timeout=5).status_code == 404
    assert requests.post(server.admin_url + "/health", timeout=5).status_code == 405
    # The Table API port has no operator endpoints: these are account names to it.
    for path in ("/metrics", "/health", "/ready"):
        r = requests.get(f"http://127.0.0.1:{server.port}{path}", timeout=5)
        assert r.status_code in (400, 403, 404), (path, r.status_code)
        assert "tafel_requests" not in r.text


def test_no_admin_runs_no_admin_listener(workdir):
    srv = extra_server(workdir, "--no-admin")
    srv.start()
    try:
        with pytest.raises(requests.ConnectionError):
            requests.get(srv.admin_url + "/health", timeout=2)
    finally:
        srv.kill9()


# ---------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------


def test_each_operation_moves_its_counters_by_exactly_what_was_done(fresh_server):
    from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
    from azure.data.tables import TableAccessPolicy, TableServiceClient, UpdateMode
    from azure.data.tables import TableMetrics

    srv = fresh_server
    before = scrape(srv)
    assert requests_total(before) == {}
    name = unique_table_name()
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        t = svc.create_table(name)
        assert value(scrape(srv), "tafel_account_tables", account=ACCOUNT) == 1
        for i in range(3):
            t.create_entity({"PartitionKey": "p", "RowKey": f"r{i}", "Value": i})
        with pytest.raises(ResourceExistsError):
            t.create_entity({"PartitionKey": "p", "RowKey": "r0", "Value": 0})
        t.get_entity("p", "r1")
        t.get_entity("p", "r2")
        with pytest.raises(ResourceNotFoundError):
            t.get_entity("p", "absent")
        t.update_entity({"PartitionKey": "p", "RowKey": "r1", "Value": 10}, mode=UpdateMode.REPLACE)
        t.update_entity({"PartitionKey": "p", "RowKey": "r1", "Extra": "x"}, mode=UpdateMode.MERGE)
        t.upsert_entity({"PartitionKey": "p", "RowKey": "r3", "Value": 3}, mode=UpdateMode.REPLACE)
        t.upsert_entity({"PartitionKey": "p", "RowKey": "r4", "Value": 4}, mode=UpdateMode.MERGE)
        t.delete_entity("p", "r4")
        mid = scrape(srv)
        # Values 0, 10, 2, 3: all four rows are examined (no key range), three match.
        found = list(t.query_entities("Value ge 2"))
        assert len(found) == 3
        after_query = scrape(srv)
        t.submit_transaction(
            [
                ("create", {"PartitionKey": "p", "RowKey": "r5"}),
                ("upsert", {"PartitionKey": "p", "RowKey": "r6"}),
            ]
        )
        now = datetime.now(timezone.utc)
        t.set_table_access_policy({"read": TableAccessPolicy(permission="r", start=now, expiry=now + timedelta(hours=1))})
        t.get_table_access_policy()
        svc.get_service_properties()
        svc.set_service_properties(minute_metrics=TableMetrics(enabled=False))
        assert name in [x.name for x in svc.list_tables()]
        svc.delete_table(name)
    after = scrape(srv)

    assert requests_total(after) == {
        ("CreateTable", "2xx", ""): 1,
        ("InsertEntity", "2xx", ""): 3,
        ("InsertEntity", "4xx", "EntityAlreadyExists"): 1,
        ("QueryEntity", "2xx", ""): 2,
        ("QueryEntity", "4xx", "ResourceNotFound"): 1,
        ("UpdateEntity", "2xx", ""): 1,
        ("MergeEntity", "2xx", ""): 1,
        ("InsertOrReplaceEntity", "2xx", ""): 1,
        ("InsertOrMergeEntity", "2xx", ""): 1,
        ("DeleteEntity", "2xx", ""): 1,
        ("QueryEntities", "2xx", ""): 1,
        ("EntityGroupTransaction", "2xx", ""): 1,
        ("SetTableAcl", "2xx", ""): 1,
        ("GetTableAcl", "2xx", ""): 1,
        ("GetTableServiceProperties", "2xx", ""): 1,
        ("SetTableServiceProperties", "2xx", ""): 1,
        ("QueryTables", "2xx", ""): 1,
        ("DeleteTable", "2xx", ""): 1,
    }
    # One latency observation per request, under its operation.
    for op, n in [("InsertEntity", 4), ("QueryEntity", 3), ("DeleteTable", 1)]:
        assert value(after, "tafel_request_duration_seconds_count", operation=op) == n
    assert value(after, "tafel_request_duration_seconds_sum", operation="InsertEntity") > 0
    assert value(after, "tafel_requests_in_flight") == 0
    assert value(after, "tafel_account_tables", account=ACCOUNT) == 0
    scan = delta(after_query, mid)
    assert scan.get(("tafel_store_query_rows_scanned_total", ())) == 4, scan
    assert scan.get(("tafel_store_query_rows_returned_total", ())) == 3, scan
    if BACKEND == "embedded":
        # Each write that changed something was committed in exactly one group
        # (one at a time here): table create and delete, 3 inserts, update,
        # merge, 2 upserts, delete, the batch, the ACL and the service
        # properties. The refused insert changed nothing: no commit.
        assert value(after, "tafel_store_commit_group_size_sum") == 13
        assert value(after, "tafel_store_log_sync_seconds_count") >= 1
        assert value(after, "tafel_store_log_written_bytes_total") > 0
        assert value(after, "tafel_store_log_capacity_bytes") > 0
    else:
        assert value(after, "tafel_store_postgres_pool_connections") >= 1
        assert value(after, "tafel_store_postgres_pool_max_connections") == 16
        assert value(after, "tafel_store_postgres_busy_total") == 0


def test_body_bytes_and_connections_count_what_went_over_the_wire(fresh_server):
    srv = fresh_server
    raw = srv.raw
    name = unique_table_name()
    assert raw.create_table(name).status_code == 201
    before = scrape(srv)
    body = json.dumps({"PartitionKey": "p", "RowKey": "r", "Text": "x" * 1000})
    r = raw.insert(name, body)
    assert r.status_code == 201
    g = raw.get_entity(name, "p", "r")
    assert g.status_code == 200
    after = scrape(srv)
    d = delta(after, before)
    assert d[("tafel_request_body_bytes_total", (("operation", "InsertEntity"),))] == len(body)
    assert d[("tafel_response_body_bytes_total", (("operation", "InsertEntity"),))] == len(r.content)
    assert d[("tafel_response_body_bytes_total", (("operation", "QueryEntity"),))] == len(g.content)


def test_open_connections_follow_the_clients(fresh_server):
    import http.client

    srv = fresh_server
    # The harness's own startup probe (connect, close) may still be counted: wait
    # until the gauge holds still.
    seen = []
    deadline = time.monotonic() + 5
    while len(seen) < 3 or len(set(seen[-3:])) > 1:
        assert time.monotonic() < deadline, f"open connections never settled: {seen}"
        seen.append(value(scrape(srv), "tafel_open_connections"))
        time.sleep(0.05)
    base = seen[-1]
    conns = [http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10) for _ in range(3)]
    for c in conns:
        c.request("GET", f"/{ACCOUNT}/Tables")
        resp = c.getresponse()
        resp.read()
        assert resp.status == 403  # unsigned; the connection stays open (keep-alive)
    assert value(scrape(srv), "tafel_open_connections") == base + 3
    for c in conns:
        c.close()
    deadline = time.monotonic() + 5
    while value(scrape(srv), "tafel_open_connections") != base:
        assert time.monotonic() < deadline, "closed connections still counted"
        time.sleep(0.05)


def test_labels_stay_bounded_table_names_only_in_the_largest_tables_gauges_no_keys(fresh_server):
    srv = fresh_server
    raw = srv.raw
    name = unique_table_name("secretlookingname")
    assert raw.create_table(name).status_code == 201
    assert raw.insert(name, {"PartitionKey": "pk-marker", "RowKey": "rk-marker", "Pad": "x" * 4000}).status_code == 201
    assert raw.get_entity(name, "pk-marker", "rk-marker").status_code == 200
    assert raw.get("/nosuchtable()").status_code == 404
    # More tables than the gauges name (TOP_TABLES, 20), each smaller than the first.
    for i in range(22):
        small = unique_table_name(f"small{i}")
        assert raw.create_table(small).status_code == 201
        assert raw.insert(small, {"PartitionKey": "p", "RowKey": "r"}).status_code == 201
    text = requests.get(srv.admin_url + "/metrics", timeout=5).text
    for marker in ("pk-marker", "rk-marker", "nosuchtable"):
        assert marker not in text
    naming = [line for line in text.splitlines() if 'table="' in line]
    assert naming and all(line.startswith(("tafel_table_entities{", "tafel_table_bytes{")) for line in naming), naming
    assert sum(line.startswith("tafel_table_entities{") for line in naming) == 20
    # The largest table is named, with its one entity.
    assert f'tafel_table_entities{{account="devstoreaccount1",table="{name}"}} 1' in text


def test_admin_token_guards_metrics_and_the_reason_of_readiness(workdir):
    srv = extra_server(workdir, "--admin-token", TOKEN)
    srv.start()
    try:
        r = requests.get(srv.admin_url + "/metrics", timeout=5)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        r = requests.get(srv.admin_url + "/metrics", headers={"Authorization": "Bearer wrong"}, timeout=5)
        assert r.status_code == 401
        scrape(srv, TOKEN)
        # Load balancers check health and readiness without credentials.
        assert requests.get(srv.admin_url + "/health", timeout=5).status_code == 200
        assert requests.get(srv.admin_url + "/ready", timeout=5).status_code == 200
    finally:
        srv.kill9()


def test_a_non_loopback_admin_listener_without_a_token_is_refused(workdir):
    srv = extra_server(workdir, "--admin-host", "0.0.0.0")
    with pytest.raises(RuntimeError, match="exited with code 1"):
        srv.start(timeout=20)
    assert "not on a loopback address: set --admin-token" in srv.log_text()


# ---------------------------------------------------------------------------
# Readiness follows the database
# ---------------------------------------------------------------------------


def wait_ready(server: TafelServer, status: int, timeout: float = 30) -> requests.Response:
    deadline = time.monotonic() + timeout
    while True:
        r = requests.get(server.admin_url + "/ready", timeout=10)
        if r.status_code == status:
            return r
        assert time.monotonic() < deadline, f"/ready stayed {r.status_code} {r.text!r}, wanted {status}"
        time.sleep(min(0.2, timeout / 20))


@postgres_only
@pytest.mark.skipif(not os.environ.get("TAFEL_TEST_PG_CTL"), reason="needs scripts/with-postgres's cluster")
def test_readiness_turns_503_while_the_database_is_down_and_back_by_itself(server):
    wait_ready(server, 200)
    pg_ctl("stop", mode="fast")
    try:
        r = wait_ready(server, 503)
        assert r.text.startswith("not ready: "), r.text
        assert value(scrape(server), "tafel_ready") == 0
    finally:
        pg_ctl("start")
    wait_ready(server, 200)
    assert value(scrape(server), "tafel_ready") == 1
    # And it serves again, without a restart.
    name = unique_table_name()
    assert server.raw.create_table(name).status_code == 201
    assert server.raw.delete_table(name).status_code == 204


# ---------------------------------------------------------------------------
# Drain on SIGTERM
# ---------------------------------------------------------------------------


def refused(exc: BaseException) -> bool:
    """Whether a requests error is a refused connection (nothing sent), not a cut one."""
    seen = set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, ConnectionRefusedError) or "NewConnectionError" in type(e).__name__:
            return True
        if "Connection refused" in str(e) and "Connection aborted" not in str(e):
            return True
        e = e.__cause__ or e.__context__ or (e.args[0] if e.args and isinstance(e.args[0], BaseException) else None)
    return False


def test_sigterm_drains_not_ready_first_and_loses_no_request(workdir):
    srv = extra_server(workdir, "--drain-seconds", "3")
    srv.start()
    raw = srv.raw
    name = unique_table_name()
    assert raw.create_table(name).status_code == 201
    assert raw.insert(name, {"PartitionKey": "p", "RowKey": "r"}).status_code == 201
    proc = srv.proc
    stop = threading.Event()
    outcomes = []  # (time, "ok" | "refused" | "error: ...")
    signalled = []  # when SIGTERM was sent, once it was
    lock = threading.Lock()

    def client(n: int):
        from conftest import RawClient

        mine = RawClient(srv)
        i = 0
        # The last answer: when (after SIGTERM) and its Connection header, which a
        # failure reports (a cut keep-alive connection, or a new one).
        last = None
        while not stop.is_set():
            i += 1
            try:
                if i % 2:
                    r = mine.get_entity(name, "p", "r", timeout=10)
                    what = "ok" if r.status_code == 200 else f"error: status {r.status_code}"
                else:
                    r = mine.insert(name, {"PartitionKey": f"c{n}", "RowKey": str(i)}, timeout=10)
                    what = "ok" if r.status_code == 201 else f"error: status {r.status_code}"
                since = round(time.monotonic() - signalled[0], 3) if signalled else None
                last = (since, r.headers.get("Connection"))
            except requests.RequestException as e:
                kind = "get" if i % 2 else "insert"
                what = "refused" if refused(e) else f"error: {kind} {e!r}, last answer {last}"
                if what == "refused":
                    time.sleep(0.01)
            with lock:
                outcomes.append((time.monotonic(), what))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    sent_at = time.monotonic()
    signalled.append(sent_at)
    proc.send_signal(signal.SIGTERM)
    # Not ready at once, while requests still succeed.
    r = wait_ready(srv, 503, timeout=1.5)
    assert r.text.startswith("not ready: draining"), r.text
    proc.wait(timeout=20)
    exited_at = time.monotonic()
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(timeout=20)
    srv.proc = None
    srv._close_log()

    errors = [f"{w} at +{t - sent_at:.3f}s" for t, w in outcomes if w.startswith("error")]
    assert not errors, f"{len(errors)} requests failed mid-stop (exit at +{exited_at - sent_at:.3f}s), first: {errors[:3]}"
    # Served while draining, until no request was in flight for a moment (a client's pause
    # under load ends it early) or --drain-seconds passed: never longer.
    # (Connections are refused from when the listener closes, a little before the exit.)
    first_refused = min((t for t, w in outcomes if w == "refused" and t > sent_at), default=exited_at)
    during = [w for t, w in outcomes if sent_at < t < first_refused]
    assert during and all(w == "ok" for w in during), "requests must keep succeeding while draining"
    assert exited_at - sent_at < 3 + 1.5, "drained past --drain-seconds"
    assert any(w == "refused" for t, w in outcomes if t > exited_at), "after the stop, connections are refused"
    assert proc.returncode == 0


def test_sigterm_on_an_idle_server_exits_at_once(workdir):
    # #57: SIGTERM waited the whole --drain-seconds (5 s) with nothing in flight.
    srv = extra_server(workdir, "--drain-seconds", "5")
    srv.start()
    assert srv.raw.get("/Tables").status_code == 200
    proc, srv.proc = srv.proc, None
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
    took = time.monotonic() - began
    srv._close_log()
    assert proc.returncode == 0 and took < 0.5, took


def test_sigterm_finishes_the_request_in_flight_then_exits(workdir):
    faults = workdir / f"faults-{unique_table_name()}.toml"
    name = unique_table_name()
    faults.write_text(f'[[rule]]\ntable = "{name}"\noperation = "InsertEntity"\ndelay-ms = 1500\n')
    srv = extra_server(workdir, "--drain-seconds", "5", "--faults", str(faults))
    srv.start()
    assert srv.raw.create_table(name).status_code == 201
    answered = []
    slow = threading.Thread(target=lambda: answered.append(
        srv.raw.insert(name, {"PartitionKey": "p", "RowKey": "r"}, timeout=10).status_code))
    slow.start()
    time.sleep(0.3)
    proc, srv.proc = srv.proc, None
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
    took = time.monotonic() - began
    slow.join()
    srv._close_log()
    # Answered (the delay's end, ~1.2 s after the signal), then out at once: not at 5 s.
    assert answered == [201] and proc.returncode == 0
    assert 0.8 < took < 2.5, took


# ---------------------------------------------------------------------------
# Access log
# ---------------------------------------------------------------------------


def test_access_log_tells_who_did_what_and_holds_no_secret(workdir):
    from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
    from azure.data.tables import (
        AccountSasPermissions,
        ResourceTypes,
        TableClient,
        TableSasPermissions,
        TableServiceClient,
        generate_account_sas,
        generate_table_sas,
    )

    log_path = workdir / f"access-{unique_table_name()}.log"
    srv = extra_server(workdir, "--access-log", str(log_path), "--log-format", "json", "--admin-token", TOKEN)
    srv.start()
    secrets = {KEY, TOKEN}
    name = unique_table_name()
    try:
        with TableServiceClient.from_connection_string(srv.conn_str) as svc:
            t = svc.create_table(name)
            t.create_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})
        r = srv.raw.get_entity(name, "p", "r", auth="SharedKeyLite")
        assert r.status_code == 200
        secrets.add(r.request.headers["Authorization"].split(":", 1)[1])
        cred = AzureNamedKeyCredential(ACCOUNT, KEY)
        expiry = datetime.now(timezone.utc) + timedelta(hours=1)
        table_sas = generate_table_sas(cred, name, permission=TableSasPermissions(read=True, add=True), expiry=expiry)
        account_sas = generate_account_sas(
            cred,
            resource_types=ResourceTypes(service=True, object=True),
            permission=AccountSasPermissions(read=True, list=True),
            expiry=expiry,
        )
        for sas in (table_sas, account_sas):
            secrets.add(parse_qs(sas)["sig"][0])
            secrets.add(unquote(parse_qs(sas)["sig"][0]))
            with TableClient(srv.url, name, credential=AzureSasCredential(sas)) as sas_client:
                sas_client.get_entity("p", "r")
        # A raw SAS request carries its signature in the URL's query.
        r = requests.get(f"{srv.url}/{name}(PartitionKey='p',RowKey='r')?{table_sas}", headers={"Accept": "application/json"}, timeout=10)
        assert r.status_code == 200, r.text
        # A bad signature is refused and logged as such.
        bad = table_sas.replace("sig=", "sig=AAAA")
        assert requests.get(f"{srv.url}/{name}()?{bad}", timeout=10).status_code == 403
        scrape(srv, TOKEN)
    finally:
        srv.stop()

    lines = log_path.read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    fields = {"time", "request_id", "account", "operation", "table", "status", "error_code", "latency_ms",
              "bytes_in", "bytes_out", "client", "user_agent", "credential"}
    assert all(set(e) == fields for e in entries), entries[0]
    by = [(e["operation"], e["status"], e["credential"], e["table"]) for e in entries]
    assert ("CreateTable", 201, "SharedKey", "") in by
    assert ("InsertEntity", 201, "SharedKey", name) in by
    assert ("QueryEntity", 200, "SharedKeyLite", name) in by
    assert sum(1 for b in by if b == ("QueryEntity", 200, "SAS", name)) == 3
    denied = [e for e in entries if e["status"] == 403]
    assert len(denied) == 1 and denied[0]["error_code"] == "AuthenticationFailed" and denied[0]["credential"] == "SAS"
    assert all(e["account"] == ACCOUNT and e["client"].startswith("127.0.0.1:") for e in entries)
    assert any(e["user_agent"].startswith("azsdk-python") for e in entries)
    assert all(e["latency_ms"] >= 0 and len(e["request_id"]) == 36 for e in entries)
    # The response's x-ms-request-id is the logged one.
    assert r.headers["x-ms-request-id"] in {e["request_id"] for e in entries}

    everything = log_path.read_text() + srv.log_text()
    for secret in secrets:
        assert secret and secret not in everything, "a secret reached a log"
    assert "sig=" not in everything and "Bearer" not in everything


def test_access_log_as_text_lines_on_stdout(workdir):
    srv = extra_server(workdir, "--access-log", "stdout", "--log-format", "text")
    srv.start()
    try:
        mark = srv.log_size()
        assert srv.raw.get("/Tables").status_code == 200
        srv.wait_for_log("operation=QueryTables", timeout=5, since=mark)
        line = next(l for l in srv.log_text(mark).splitlines() if "operation=QueryTables" in l)
        for part in (f"account={ACCOUNT}", "status=200", 'error_code=""', "credential=SharedKey", 'table=""'):
            assert part in line.split(" ") or part in line, line
    finally:
        srv.stop()


# ---------------------------------------------------------------------------
# Docs: every metric documented, the dashboard uses only real ones
# ---------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs"
EMBEDDED_ONLY = ("tafel_store_commit_", "tafel_store_log_", "tafel_store_checkpoint_", "tafel_store_page_")


def family_names(server: TafelServer) -> set:
    text = requests.get(server.admin_url + "/metrics", timeout=10).text
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def test_every_metric_is_documented_and_the_dashboard_uses_only_real_ones(fresh_server):
    import re

    srv = fresh_server
    assert srv.raw.get("/Tables").status_code == 200  # so the request families have a series
    exposed = family_names(srv)
    doc = (DOCS / "operations.md").read_text()
    undocumented = sorted(n for n in exposed if f"`{n}`" not in doc)
    assert not undocumented, f"metrics missing from docs/operations.md: {undocumented}"

    dashboard = (DOCS / "grafana-dashboard.json").read_text()
    json.loads(dashboard)
    used = {re.sub(r"_(bucket|sum|count)$", "", n) for n in re.findall(r"\btafel_[a-z_]+", dashboard)}
    other_backend = "tafel_store_postgres_" if BACKEND == "embedded" else EMBEDDED_ONLY
    unknown = sorted(n for n in used if n not in exposed and not n.startswith(other_backend))
    assert not unknown, f"the dashboard uses metrics the server does not expose: {unknown}"
    assert all(f"`{n}`" in doc for n in used)
