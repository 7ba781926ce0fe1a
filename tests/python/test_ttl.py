"""Expiry (TTL), docs/lifecycle.md: tables' policies on the admin listener and in `tafel ttl`;
an expired entity invisible at once to point reads, queries (scans, index scans, continuation),
`$count`, `$batch` and single writes; its removal in the background, recorded in the change feed
with "reason":"expired", counters exact, counted in /metrics; kill -9 then restart. The test
clock (`PUT /clock`) moves time, so a day passes in a request."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest
import requests
from azure.core import MatchConditions
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableServiceClient, TableTransactionError, UpdateMode

from conftest import ACCOUNT, BACKEND, TafelServer, declare_index, scrape, sdk_error_code, unique_table_name, value
from launch import run_tafel

DAY = 86_400


@pytest.fixture
def srv(_workdir):
    """A server of its own (the clock's offset moves every later Timestamp), with a change feed."""
    name = uuid.uuid4().hex[:8]
    s = TafelServer(_workdir / f"ttl-{name}", _workdir / f"ttl-{name}.log", extra_args=["--change-retention", "1h"])
    s.start()
    yield s
    s.stop()


def ttl_url(srv, table: str, account: str = ACCOUNT) -> str:
    return f"{srv.admin_url}/accounts/{account}/tables/{table}/ttl"


def set_ttl(srv, table: str, body) -> requests.Response:
    return requests.put(ttl_url(srv, table), data=json.dumps(body), timeout=10,
                        headers={"Content-Type": "application/json"})


def get_ttl(srv, table: str) -> dict:
    r = requests.get(ttl_url(srv, table), timeout=10)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def move_clock(srv, seconds: int) -> None:
    r = requests.put(f"{srv.admin_url}/clock", data=json.dumps({"offset-seconds": seconds}), timeout=10,
                     headers={"Content-Type": "application/json"})
    assert r.status_code == 200, (r.status_code, r.text)
    assert r.json() == {"offset-seconds": seconds}


def count_of(srv, table: str, flt: str | None = None) -> int:
    r = srv.raw.get(f"/{table}/$count", query={"$filter": flt} if flt else None, accept=None)
    assert r.status_code == 200, (r.status_code, r.text)
    return int(r.text)


def stats(srv, table: str) -> dict:
    r = requests.get(f"{srv.admin_url}/accounts/{ACCOUNT}/tables/{table}/stats", timeout=10)
    assert r.status_code == 200, (r.status_code, r.text)
    return r.json()


def keys(entities) -> list:
    return sorted((e["PartitionKey"], e["RowKey"]) for e in entities)


def wait_for(what, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def feed(srv, table: str) -> list:
    out, after = [], "0"
    while True:
        r = srv.raw.get("/$changes", query={"after": after, "table": table}, accept=None)
        assert r.status_code == 200, (r.status_code, r.text)
        lines = [json.loads(line) for line in r.text.splitlines() if line]
        if not lines:
            return out
        out += lines
        after = r.headers["x-tafel-next-after"]


def test_policy_api_cli_and_bad_input(srv):
    name = unique_table_name("ttlapi")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        svc.create_table(name)
        assert get_ttl(srv, name) == {"table": name, "seconds": None, "property": None}
        r = set_ttl(srv, name, {"seconds": 3600})
        assert r.status_code == 200, r.text
        assert get_ttl(srv, name)["seconds"] == 3600
        # Bad input: 400 naming what is wrong, and the policy in force stays.
        for body, says in [
            ({}, "seconds"),
            ({"seconds": 0}, "seconds"),
            ({"seconds": -5}, "seconds"),
            ({"seconds": 10**12}, "seconds"),
            ({"seconds": "60"}, "seconds"),
            ({"property": "Timestamp"}, "system property"),
            ({"property": "PartitionKey"}, "system property"),
            ({"property": "9lives"}, "valid property name"),
            ({"property": "a b"}, "valid property name"),
            ({"property": 5}, "property"),
            ({"ttl": 60}, "unknown member"),
            ([60], "JSON object"),
        ]:
            r = set_ttl(srv, name, body)
            assert r.status_code == 400, (body, r.status_code, r.text)
            assert says in r.json()["message"], (body, r.text)
        r = requests.put(ttl_url(srv, name), data=b"{not json", timeout=10)
        assert r.status_code == 400
        assert get_ttl(srv, name) == {"table": name, "seconds": 3600, "property": None}
        # A missing table and an unknown account are 404s, as for /indexes and /stats.
        r = set_ttl(srv, "nosuchtable", {"seconds": 60})
        assert (r.status_code, r.json()["error"]) == (404, "TableNotFound")
        r = requests.get(ttl_url(srv, name, account="nosuchaccount"), timeout=10)
        assert (r.status_code, r.json()["error"]) == (404, "AccountNotFound")
        # Both fields together.
        assert set_ttl(srv, name, {"seconds": 60, "property": "ExpiresAt"}).status_code == 200
        assert get_ttl(srv, name) == {"table": name, "seconds": 60, "property": "ExpiresAt"}
        # A table ACL set afterwards keeps the policy (they share the table's record).
        tc = svc.get_table_client(name)
        tc.set_table_access_policy(signed_identifiers={})
        assert get_ttl(srv, name)["property"] == "ExpiresAt"
        # `tafel ttl`, through the same listener.
        cli = ["--admin-url", srv.admin_url, "--account", ACCOUNT, "--table", name]
        out = run_tafel("ttl", "set", "--seconds", "120", *cli)
        assert out.returncode == 0, out.stderr
        assert get_ttl(srv, name) == {"table": name, "seconds": 120, "property": None}
        out = run_tafel("ttl", "get", *cli)
        assert out.returncode == 0 and "seconds   120" in out.stdout, out.stdout + out.stderr
        out = run_tafel("ttl", "set", "--property", "Timestamp", *cli)
        assert out.returncode == 1 and "400" in out.stderr, out.stderr
        out = run_tafel("ttl", "clear", *cli)
        assert out.returncode == 0, out.stderr
        assert get_ttl(srv, name)["seconds"] is None
        # DELETE clears; the policy goes with its table.
        assert set_ttl(srv, name, {"seconds": 60}).status_code == 200
        assert requests.delete(ttl_url(srv, name), timeout=10).status_code == 204
        assert get_ttl(srv, name)["seconds"] is None
        assert set_ttl(srv, name, {"seconds": 60}).status_code == 200
        svc.delete_table(name)
        r = requests.get(ttl_url(srv, name), timeout=10)
        assert (r.status_code, r.json()["error"]) == (404, "TableNotFound")
        svc.create_table(name)
        assert get_ttl(srv, name)["seconds"] is None


def test_clock_offset_moves_new_timestamps(srv):
    r = requests.get(f"{srv.admin_url}/clock", timeout=10)
    assert r.json() == {"offset-seconds": 0}
    for bad in [{"offset-seconds": "x"}, {}, {"offset-seconds": 10**12}]:
        r = requests.put(f"{srv.admin_url}/clock", data=json.dumps(bad), timeout=10)
        assert r.status_code == 400, (bad, r.text)
    move_clock(srv, DAY)
    name = unique_table_name("clock")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        tc = svc.create_table(name)
        tc.create_entity({"PartitionKey": "p", "RowKey": "1"})
        ts = tc.get_entity("p", "1").metadata["timestamp"]
        tomorrow = datetime.now(timezone.utc) + timedelta(days=1)
        assert abs((ts - tomorrow).total_seconds()) < 60, ts
    r = requests.delete(f"{srv.admin_url}/clock", timeout=10)
    assert r.json() == {"offset-seconds": 0}


def test_expired_entities_are_invisible_to_every_read_and_write(srv):
    name = unique_table_name("ttlvis")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        tc = svc.create_table(name)
        old = [{"PartitionKey": pk, "RowKey": f"{i}", "Email": f"{pk}{i}@x", "n": i} for pk in "ab" for i in range(5)]
        tc.submit_transaction([("create", e) for e in old if e["PartitionKey"] == "a"])
        tc.submit_transaction([("create", e) for e in old if e["PartitionKey"] == "b"])
        declare_index(srv, name, "Email")
        assert set_ttl(srv, name, {"seconds": 2 * 3600}).status_code == 200
        # Not expired yet: everything is there, the whole-table count too.
        assert count_of(srv, name) == 10
        assert len(list(tc.list_entities())) == 10
        # Two hours and a minute on, the old entities expire; new ones written then do not.
        move_clock(srv, 2 * 3600 + 60)
        fresh = [{"PartitionKey": "a", "RowKey": f"new{i}", "Email": f"new{i}@x", "n": 100 + i} for i in range(3)]
        tc.submit_transaction([("create", e) for e in fresh])
        live = keys(fresh)
        with pytest.raises(ResourceNotFoundError):
            tc.get_entity("a", "1")
        r = srv.raw.get_entity(name, "b", "2")
        assert (r.status_code, r.headers.get("x-ms-error-code")) == (404, "ResourceNotFound")
        assert keys(tc.list_entities()) == live
        assert keys(tc.query_entities("n ge 0")) == live
        assert keys(tc.query_entities("PartitionKey eq 'b'")) == []
        assert keys(tc.query_entities("PartitionKey eq 'a' and RowKey eq '3'")) == []
        assert keys(tc.query_entities("Email eq 'a1@x' or Email eq 'new1@x'")) == [("a", "new1")]
        # Pages of two: continuation tokens step over expired rows.
        pages = tc.list_entities(results_per_page=2).by_page()
        assert sorted(k for page in pages for k in keys(page)) == live
        assert count_of(srv, name) == 3
        assert count_of(srv, name, "PartitionKey eq 'b'") == 0
        assert count_of(srv, name, "n ge 1") == 3
        # Writes see an expired entity as gone.
        for call in [
            lambda: tc.update_entity({"PartitionKey": "a", "RowKey": "0", "x": 1}, mode=UpdateMode.MERGE),
            lambda: tc.update_entity({"PartitionKey": "a", "RowKey": "0", "x": 1}, mode=UpdateMode.REPLACE,
                                     etag="*", match_condition=MatchConditions.IfNotModified),
        ]:
            with pytest.raises(ResourceNotFoundError):
                call()
        r = srv.raw.delete(f"/{name}(PartitionKey='a',RowKey='0')", headers={"If-Match": "*"})
        assert (r.status_code, r.headers.get("x-ms-error-code")) == (404, "ResourceNotFound")
        with pytest.raises(TableTransactionError) as err:
            tc.submit_transaction([("update", {"PartitionKey": "b", "RowKey": "0", "x": 1}, {"mode": UpdateMode.MERGE})])
        assert sdk_error_code(err.value) == "ResourceNotFound"
        # An insert over an expired entity succeeds as if it were gone; an upsert writes afresh.
        tc.create_entity({"PartitionKey": "a", "RowKey": "1", "back": True})
        tc.upsert_entity({"PartitionKey": "a", "RowKey": "2", "up": 1}, mode=UpdateMode.MERGE)
        tc.submit_transaction([("create", {"PartitionKey": "b", "RowKey": "3"})])
        assert dict(tc.get_entity("a", "2")) == {"PartitionKey": "a", "RowKey": "2", "up": 1}
        assert "Email" not in tc.get_entity("a", "1")
        with pytest.raises(ResourceExistsError):
            tc.create_entity({"PartitionKey": "a", "RowKey": "1"})
        assert count_of(srv, name) == 6
        # Clearing the policy brings back what was not removed yet: expiry is the policy's.
        # (The sweep may have removed some; every one left is visible again.)
        requests.delete(ttl_url(srv, name), timeout=10)
        time.sleep(1.2)  # a sweep that started before the DELETE has ended
        assert count_of(srv, name) == len(list(tc.list_entities()))


def test_property_policy_expires_at_the_value(srv):
    name = unique_table_name("ttlprop")
    now = datetime.now(timezone.utc)
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        tc = svc.create_table(name)
        tc.create_entity({"PartitionKey": "p", "RowKey": "past", "ExpiresAt": now - timedelta(minutes=1)})
        tc.create_entity({"PartitionKey": "p", "RowKey": "future", "ExpiresAt": now + timedelta(hours=1)})
        tc.create_entity({"PartitionKey": "p", "RowKey": "none"})
        tc.create_entity({"PartitionKey": "p", "RowKey": "string", "ExpiresAt": "2000-01-01T00:00:00Z"})
        assert set_ttl(srv, name, {"property": "ExpiresAt"}).status_code == 200
        with pytest.raises(ResourceNotFoundError):
            tc.get_entity("p", "past")
        assert keys(tc.list_entities()) == [("p", "future"), ("p", "none"), ("p", "string")]
        assert count_of(srv, name) == 3
        move_clock(srv, 2 * 3600)
        assert keys(tc.list_entities()) == [("p", "none"), ("p", "string")]
        # Renewing the expiry keeps an entity.
        tc.upsert_entity({"PartitionKey": "p", "RowKey": "none", "ExpiresAt": now + timedelta(days=2)})
        assert keys(tc.list_entities()) == [("p", "none"), ("p", "string")]


def test_background_removal_feed_counts_and_metric(srv):
    name = unique_table_name("ttlbg")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        tc = svc.create_table(name)
        for pk in "abc":
            tc.submit_transaction([("create", {"PartitionKey": pk, "RowKey": f"{i:03}", "s": "x" * 50})
                                   for i in range(40)])
        tc.delete_entity("a", "000")  # a user's delete keeps its form in the feed
        assert set_ttl(srv, name, {"seconds": DAY}).status_code == 200
        move_clock(srv, DAY + 60)
        keep = [{"PartitionKey": "k", "RowKey": f"{i}"} for i in range(5)]
        tc.submit_transaction([("create", e) for e in keep])
        assert wait_for(lambda: stats(srv, name)["entities"] == 5), stats(srv, name)
        st = stats(srv, name)
        assert count_of(srv, name) == 5 == len(list(tc.list_entities()))
        move_clock(srv, 0)
        requests.delete(ttl_url(srv, name), timeout=10)
        # With no policy the count is the counter again: still exact.
        assert count_of(srv, name) == 5
        assert st["bytes"] > 0
    changes = feed(srv, name)
    expired = [c for c in changes if c.get("reason") == "expired"]
    assert len(expired) == 119
    assert all(c["op"] == "delete" and "entity" not in c for c in expired)
    user = [c for c in changes if c["op"] == "delete" and "reason" not in c]
    assert [(c["PartitionKey"], c["RowKey"]) for c in user] == [("a", "000")]
    assert value(scrape(srv), "tafel_expired_entities_total") >= 119


def test_entities_written_after_a_pass_found_none_are_removed_when_they_expire(srv):
    """The sweep paces itself (a table is swept again when its first entity expires, not every
    second), and an entity written after a pass that found nothing must not wait past its
    expiry for the next: with seconds = 3, the next pass is due 3 s after the last at the latest."""
    name = unique_table_name("ttlpace")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        tc = svc.create_table(name)
        assert set_ttl(srv, name, {"seconds": 3}).status_code == 200
        time.sleep(2.5)  # a pass or two over the empty table
        tc.submit_transaction([("create", {"PartitionKey": "p", "RowKey": f"{i}"}) for i in range(5)])
        assert stats(srv, name)["entities"] == 5
        assert wait_for(lambda: stats(srv, name)["entities"] == 0, timeout=9), stats(srv, name)


def test_expiry_survives_kill_9_and_check_passes(srv):
    name = unique_table_name("ttlkill")
    now = datetime.now(timezone.utc)
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        tc = svc.create_table(name)
        tc.submit_transaction([("create", {"PartitionKey": "p", "RowKey": f"{i:02}",
                                           "ExpiresAt": now + timedelta(hours=1 if i % 2 else -1)})
                               for i in range(20)])
        assert set_ttl(srv, name, {"property": "ExpiresAt"}).status_code == 200
    srv.kill9()
    srv.start()
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        tc = svc.get_table_client(name)
        assert get_ttl(srv, name)["property"] == "ExpiresAt"
        assert len(list(tc.list_entities())) == 10
        assert count_of(srv, name) == 10
        with pytest.raises(ResourceNotFoundError):
            tc.get_entity("p", "00")
        # The sweep finds the policy after the restart and removes the rest.
        assert wait_for(lambda: stats(srv, name)["entities"] == 10), stats(srv, name)
    srv.kill9()
    srv.start()
    assert stats(srv, name)["entities"] == count_of(srv, name) == 10
    if BACKEND != "postgres":
        srv.stop()
        out = subprocess.run([str(srv.binary), "check", "--quiet", "--data-dir", str(srv.data_dir)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        srv.start()


def test_a_non_ttl_table_is_untouched(srv):
    name = unique_table_name("nottl")
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        tc = svc.create_table(name)
        tc.create_entity({"PartitionKey": "p", "RowKey": "1", "ExpiresAt": datetime(2000, 1, 1, tzinfo=timezone.utc)})
        move_clock(srv, 10 * 365 * DAY)
        time.sleep(1.5)
        assert keys(tc.list_entities()) == [("p", "1")]
        assert count_of(srv, name) == 1
