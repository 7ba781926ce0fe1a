"""Fault injection (docs/testing.md "Fault injection"): rules set through the admin
listener's /faults (and --faults FILE) make chosen requests fail, lose their answer, wait
or end a query page early. Each test shows what a client meets, through the official
Python SDK and raw HTTP, and counts the attempts from the access log."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import requests

from conftest import TafelServer, scrape, unique_table_name, value


@pytest.fixture(scope="module")
def srv(_workdir):
    name = unique_table_name("f")
    log = _workdir / f"access-{name}.log"
    s = TafelServer(
        _workdir / f"data-{name}",
        _workdir / f"tafel-{name}.log",
        extra_args=["--access-log", str(log), "--log-format", "json"],
    )
    s.access_log = log
    s.start()
    yield s
    s.stop()


def put_rules(srv, rules, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.put(srv.admin_url + "/faults", json={"rules": rules}, headers=headers, timeout=10)


def set_rules(srv, rules):
    r = put_rules(srv, rules)
    assert r.status_code == 200, r.text
    return r.json()


def listed(srv):
    r = requests.get(srv.admin_url + "/faults", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["rules"]


@pytest.fixture
def faults(srv):
    yield lambda rules: set_rules(srv, rules)
    assert requests.delete(srv.admin_url + "/faults", timeout=10).status_code == 200


@pytest.fixture
def tbl(srv):
    """A fresh table on the module's server, through the SDK."""
    from azure.data.tables import TableServiceClient

    name = unique_table_name("flt")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        client = svc.create_table(name)
        yield client
        client.close()


def access(srv, table, operation, n, timeout=10.0):
    """The access log's lines for `operation` on `table`, once there are at least `n`
    (the log is written by a thread of its own, a few milliseconds behind)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [json.loads(l) for l in Path(srv.access_log).read_text().splitlines() if l.strip()]
        got = [e for e in lines if e["table"] == table and e["operation"] == operation]
        if len(got) >= n or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def stored(tbl):
    return list(tbl.list_entities())


# ---------------------------------------------------------------------------
# What clients meet
# ---------------------------------------------------------------------------


def test_the_sdk_default_retry_policy_rides_out_three_server_busy(srv, faults, tbl):
    faults([{"table": tbl.table_name, "operation": "InsertEntity", "error": "ServerBusy", "times": 3}])
    tbl.create_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})  # succeeds: retried
    lines = access(srv, tbl.table_name, "InsertEntity", 4)
    assert [(e["status"], e["error_code"], e.get("fault", "")) for e in lines] == [
        (503, "ServerBusy", "error"),
        (503, "ServerBusy", "error"),
        (503, "ServerBusy", "error"),
        (201, "", ""),
    ]
    assert [e["RowKey"] for e in stored(tbl)] == ["r"]
    [rule] = listed(srv)
    assert (rule["fired"], rule["matched"], rule["times"]) == (3, 4, 3)


def test_an_injected_error_is_azures_error_in_the_requests_format(srv, faults, tbl):
    faults([{"table": tbl.table_name, "error": "ServerBusy", "message": "Operations per second is over the account limit."}])
    r = srv.raw.get_entity(tbl.table_name, "p", "r")
    assert r.status_code == 503
    assert r.headers["x-ms-error-code"] == "ServerBusy"
    assert len(r.headers["x-ms-request-id"]) == 36
    err = r.json()["odata.error"]
    assert err["code"] == "ServerBusy"
    assert err["message"]["value"].startswith("Operations per second is over the account limit.\nRequestId:")
    # An ACL request's errors are XML, and so is the injected one.
    r = srv.raw.get(f"/{tbl.table_name}", query={"comp": "acl"})
    assert r.status_code == 503 and r.headers["content-type"].startswith("application/xml")
    assert "<Code>ServerBusy</Code>" in r.text
    # A status of its own with an Azure code: the status as asked.
    faults([{"table": tbl.table_name, "status": 500, "code": "ServerBusy"}])
    r = srv.raw.get_entity(tbl.table_name, "p", "r")
    assert (r.status_code, r.headers["x-ms-error-code"]) == (500, "ServerBusy")
    # A status alone takes its usual code.
    faults([{"table": tbl.table_name, "status": 412}])
    r = srv.raw.get_entity(tbl.table_name, "p", "r")
    assert (r.status_code, r.headers["x-ms-error-code"]) == (412, "UpdateConditionNotSatisfied")


def test_a_fault_never_hides_an_authentication_failure(srv, faults, tbl):
    faults([{"error": "ServerBusy"}])
    r = srv.raw.get_entity(tbl.table_name, "p", "r", key="AAAA" + srv.raw.key[4:])
    assert (r.status_code, r.headers["x-ms-error-code"]) == (403, "AuthenticationFailed")


def test_an_insert_whose_answer_is_lost_as_a_timeout_meets_entity_already_exists(srv, faults, tbl):
    from azure.core.exceptions import ResourceExistsError

    faults([{"table": tbl.table_name, "operation": "InsertEntity", "lose-answer": True,
             "error": "OperationTimedOut", "times": 1}])
    # The insert happened; its answer was a 500 the SDK retries even for a POST, and
    # the retry finds the entity there: the user's code meets 409.
    with pytest.raises(ResourceExistsError) as e:
        tbl.create_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})
    assert e.value.response.headers["x-ms-error-code"] == "EntityAlreadyExists"
    lines = access(srv, tbl.table_name, "InsertEntity", 2)
    assert [(e["status"], e["error_code"], e.get("fault", "")) for e in lines] == [
        (500, "OperationTimedOut", "lose-answer"),
        (409, "EntityAlreadyExists", ""),
    ]
    assert [(x["RowKey"], x["V"]) for x in stored(tbl)] == [("r", 1)]


def test_an_insert_whose_connection_is_closed_was_applied(srv, faults, tbl):
    from azure.core.exceptions import ResourceExistsError, ServiceResponseError

    faults([{"table": tbl.table_name, "operation": "InsertEntity", "lose-answer": True, "times": 1}])
    # No answer at all: azure-core does not resend a POST without one (it may not be
    # safe to), so the user's code meets the dropped connection...
    with pytest.raises(ServiceResponseError):
        tbl.create_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})
    # ...though the write happened, and its own retry meets 409.
    with pytest.raises(ResourceExistsError) as e:
        tbl.create_entity({"PartitionKey": "p", "RowKey": "r", "V": 1})
    assert e.value.response.headers["x-ms-error-code"] == "EntityAlreadyExists"
    lines = access(srv, tbl.table_name, "InsertEntity", 2)
    assert [(e["status"], e.get("fault", "")) for e in lines] == [(201, "lose-answer-close"), (409, "")]
    assert [(x["RowKey"], x["V"]) for x in stored(tbl)] == [("r", 1)]
    # Raw HTTP sees the connection closed with no response.
    faults([{"table": tbl.table_name, "operation": "InsertEntity", "lose-answer": True}])
    with pytest.raises(requests.ConnectionError):
        srv.raw.insert(tbl.table_name, {"PartitionKey": "p", "RowKey": "raw"})
    assert sorted(x["RowKey"] for x in stored(tbl)) == ["r", "raw"]


def test_an_upsert_whose_connection_is_closed_is_retried_by_the_sdk(srv, faults, tbl):
    faults([{"table": tbl.table_name, "method": "PUT", "lose-answer": True, "times": 1}])
    # A PUT is safe to resend: azure-core retries it, and the upsert is idempotent.
    tbl.upsert_entity({"PartitionKey": "p", "RowKey": "r", "V": 2}, mode="replace")
    lines = access(srv, tbl.table_name, "InsertOrReplaceEntity", 2)
    assert [(e["status"], e.get("fault", "")) for e in lines] == [(204, "lose-answer-close"), (204, "")]
    assert [(x["RowKey"], x["V"]) for x in stored(tbl)] == [("r", 2)]


def test_a_page_ended_early_is_followed_to_the_full_result(srv, faults, tbl):
    tbl.submit_transaction([("create", {"PartitionKey": "p", "RowKey": f"{i:03}", "V": i}) for i in range(25)])
    faults([{"table": tbl.table_name, "end-page-early": True, "end-page-after": 3}])
    assert [e["V"] for e in tbl.list_entities()] == list(range(25))
    assert [e["V"] for e in tbl.query_entities("V ge 10")] == list(range(10, 25))
    # Every page ended after 3: 9 pages for the 25, the last without a token.
    assert len(access(srv, tbl.table_name, "QueryEntities", 9)) >= 9
    # A smaller page asked for stays smaller.
    pages = list(tbl.list_entities(results_per_page=2).by_page())
    assert [len(list(p)) for p in pages] == [2] * 12 + [1]
    # On the wire: a valid continuation token after 3 entities.
    r = srv.raw.get(f"/{tbl.table_name}()")
    assert r.status_code == 200 and len(r.json()["value"]) == 3
    assert r.headers["x-ms-continuation-NextPartitionKey"] and r.headers["x-ms-continuation-NextRowKey"]
    # Without end-page-after, a page ends after one entity.
    faults([{"table": tbl.table_name, "end-page-early": True}])
    r = srv.raw.get(f"/{tbl.table_name}()")
    assert len(r.json()["value"]) == 1 and "x-ms-continuation-NextPartitionKey" in r.headers


def test_a_delay_holds_the_request(srv, faults, tbl):
    faults([{"table": tbl.table_name, "operation": "QueryEntity", "delay-ms": 400}])
    t0 = time.monotonic()
    r = srv.raw.get_entity(tbl.table_name, "p", "r")
    assert r.status_code == 404 and time.monotonic() - t0 >= 0.4
    # A timeout shorter than the delay: the client gives up.
    with pytest.raises(requests.Timeout):
        srv.raw.get_entity(tbl.table_name, "p", "r", timeout=0.1)


def test_a_delay_after_the_operation_outlasts_the_clients_timeout_though_it_was_applied(srv, faults, tbl):
    faults([{"table": tbl.table_name, "operation": "InsertEntity", "delay-after-ms": 1000}])
    with pytest.raises(requests.Timeout):
        srv.raw.insert(tbl.table_name, {"PartitionKey": "p", "RowKey": "slow"}, timeout=0.3)
    # The insert was applied before the answer waited.
    assert srv.raw.get_entity(tbl.table_name, "p", "slow").status_code == 200
    [rule] = listed(srv)
    assert (rule["delay-after-ms"], rule["fired"]) == (1000, 1)


# ---------------------------------------------------------------------------
# When a rule fires, and what it matches
# ---------------------------------------------------------------------------


def statuses(srv, table, n):
    return [srv.raw.get_entity(table, "p", "r").status_code for _ in range(n)]


def test_every_nth(srv, faults, tbl):
    faults([{"table": tbl.table_name, "error": "ServerBusy", "every": 3}])
    assert statuses(srv, tbl.table_name, 6) == [404, 404, 503, 404, 404, 503]


def test_a_seeded_probability_repeats_its_pattern(srv, faults, tbl):
    rule = {"table": tbl.table_name, "error": "InternalError", "probability": 0.5, "seed": 42}
    faults([rule])
    first = statuses(srv, tbl.table_name, 30)
    faults([rule])  # set again: counters and generator start over
    assert statuses(srv, tbl.table_name, 30) == first
    assert set(first) == {404, 500}
    faults([dict(rule, seed=43)])
    assert statuses(srv, tbl.table_name, 30) != first


def test_a_time_window(srv, faults, tbl):
    faults([{"table": tbl.table_name, "error": "ServerBusy", "for-seconds": 1}])
    assert statuses(srv, tbl.table_name, 2) == [503, 503]
    time.sleep(1.2)
    assert statuses(srv, tbl.table_name, 2) == [404, 404]


def test_globs_on_table_and_partition(srv, faults, tbl):
    other = unique_table_name("oth")
    assert srv.raw.create_table(other).status_code == 201
    # A table glob is case-insensitive, as table names are.
    faults([{"table": tbl.table_name[:6].upper() + "*", "partition": "hot-*", "error": "ServerBusy"}])
    assert srv.raw.get_entity(tbl.table_name, "hot-1", "r").status_code == 503
    assert srv.raw.get_entity(tbl.table_name, "cold-1", "r").status_code == 404
    assert srv.raw.get_entity(other, "hot-1", "r").status_code == 404
    # An insert's partition is in its body.
    assert srv.raw.insert(tbl.table_name, {"PartitionKey": "hot-2", "RowKey": "r"}).status_code == 503
    assert srv.raw.insert(tbl.table_name, {"PartitionKey": "cold-2", "RowKey": "r"}).status_code == 201


def test_a_batch_is_matched_by_its_table_and_partition(srv, faults, tbl):
    faults([{"table": tbl.table_name, "partition": "hot", "operation": "EntityGroupTransaction",
             "error": "ServerBusy", "times": 1}])
    tbl.submit_transaction([("create", {"PartitionKey": "cold", "RowKey": "1"})])
    assert [(r["matched"], r["fired"]) for r in listed(srv)] == [(0, 0)]
    # A 503 to a batch: azure-core resends the POST, and the batch is applied once.
    tbl.submit_transaction([("create", {"PartitionKey": "hot", "RowKey": "1"}),
                            ("upsert", {"PartitionKey": "hot", "RowKey": "2"})])
    assert [(r["matched"], r["fired"]) for r in listed(srv)] == [(2, 1)]
    assert sorted((e["PartitionKey"], e["RowKey"]) for e in stored(tbl)) == [("cold", "1"), ("hot", "1"), ("hot", "2")]


def test_method_and_operation(srv, faults, tbl):
    tbl.create_entity({"PartitionKey": "p", "RowKey": "r"})
    faults([{"table": tbl.table_name, "method": "DELETE", "error": "ServerBusy"},
            {"table": tbl.table_name, "operation": "QueryEntities", "error": "OperationTimedOut"}])
    assert srv.raw.get_entity(tbl.table_name, "p", "r").status_code == 200  # QueryEntity: neither
    r = srv.raw.get(f"/{tbl.table_name}()")
    assert (r.status_code, r.headers["x-ms-error-code"]) == (500, "OperationTimedOut")
    r = srv.raw.delete(f"/{tbl.table_name}(PartitionKey='p',RowKey='r')", headers={"If-Match": "*"})
    assert (r.status_code, r.headers["x-ms-error-code"]) == (503, "ServerBusy")
    assert [(x["matched"], x["fired"]) for x in listed(srv)] == [(1, 1), (1, 1)]


# ---------------------------------------------------------------------------
# Setting rules: checked whole, listed with counts, from a file, counted in metrics
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rule, named",
    [
        ({"operation": "InsertEntities", "error": "ServerBusy"}, "operation"),
        ({"table": "ord[ers", "error": "ServerBusy"}, "table"),
        ({"status": 418}, "status"),
        ({"error": "Busy"}, "error"),
        ({"error": "ServerBusy", "retries": 3}, "retries"),
        ({"table": "t"}, "does nothing"),
        ({"probability": 1.5, "error": "ServerBusy"}, "probability"),
    ],
)
def test_a_bad_rule_set_is_refused_whole(srv, faults, rule, named):
    before = faults([{"table": "kept", "error": "ServerBusy"}])
    r = put_rules(srv, [{"table": "first-ok", "delay-ms": 1}, rule])
    assert r.status_code == 400, r.text
    assert named in r.json()["error"], r.json()
    assert listed(srv) == before["rules"]


def test_the_admin_token_guards_faults(_workdir):
    name = unique_table_name("f")
    s = TafelServer(_workdir / f"data-{name}", _workdir / f"tafel-{name}.log", extra_args=["--admin-token", "s3cret-t0ken"])
    s.start()
    try:
        assert put_rules(s, [{"error": "ServerBusy"}]).status_code == 401
        assert requests.get(s.admin_url + "/faults", timeout=10).status_code == 401
        assert requests.delete(s.admin_url + "/faults", timeout=10).status_code == 401
        assert s.raw.get("/Tables").status_code == 200
        assert put_rules(s, [{"operation": "QueryTables", "error": "ServerBusy"}], token="s3cret-t0ken").status_code == 200
        assert s.raw.get("/Tables").status_code == 503
    finally:
        s.stop()


def test_rules_from_a_file_at_start_are_listed_and_counted(_workdir):
    name = unique_table_name("f")
    rules = _workdir / f"faults-{name}.toml"
    rules.write_text(
        '[[rule]]\noperation = "CreateTable"\nerror = "ServerBusy"\ntimes = 2\n\n'
        '[[rule]]\noperation = "QueryTables"\nlose-answer = true\nerror = "OperationTimedOut"\n'
    )
    s = TafelServer(_workdir / f"data-{name}", _workdir / f"tafel-{name}.log", extra_args=["--faults", str(rules)])
    s.start()
    try:
        assert [s.raw.create_table(name).status_code for _ in range(3)] == [503, 503, 201]
        assert s.raw.get("/Tables").status_code == 500
        got = requests.get(s.admin_url + "/faults", timeout=10).json()["rules"]
        assert [(r["operation"], r["matched"], r["fired"]) for r in got] == [("CreateTable", 3, 2), ("QueryTables", 1, 1)]
        m = scrape(s)
        assert value(m, "tafel_faults_injected_total", kind="error") == 2
        assert value(m, "tafel_faults_injected_total", kind="lose-answer") == 1
        assert value(m, "tafel_requests_total", operation="CreateTable", status_class="5xx", error_code="ServerBusy") == 2
        # Cleared: everything passes again.
        assert requests.delete(s.admin_url + "/faults", timeout=10).json() == {"rules": []}
        assert s.raw.get("/Tables").status_code == 200
    finally:
        s.stop()


def test_a_bad_rules_file_stops_the_start(_workdir):
    import subprocess

    from conftest import tafel_binary

    bad = _workdir / "bad-faults.toml"
    bad.write_text('[[rule]]\noperation = "Nope"\nerror = "ServerBusy"\n')
    # Not the suite's TAFEL_* settings (a postgres run's backend would be refused first).
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAFEL_")}
    p = subprocess.run(
        [str(tafel_binary()), "serve", "--in-memory", "--port", "0", "--no-admin", "--faults", str(bad)],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert p.returncode != 0
    assert "rule 1: operation: unknown operation" in p.stderr, p.stderr
