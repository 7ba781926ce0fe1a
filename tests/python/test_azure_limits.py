"""`--azure-limits`: Azure's scalability targets for Table storage. A partition past
`--partition-limit` entities per second, or an account past `--account-limit`, answers
503 ServerBusy with Azure's code and message; each entity inserted, updated, deleted or
returned counts (a batch of 100 counts 100, a query its entities after it ran). Off by
default: then nothing is ever throttled."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from azure.data.tables import TableClient

from conftest import TafelServer, unique_table_name
from rawhttp import entity_path

PARTITION_MESSAGE = "The server is currently unable to receive requests. Please retry your request."
ACCOUNT_MESSAGE = "Operations per second is over the account limit."


@pytest.fixture
def limited(_workdir):
    """Starts a server with --azure-limits and the given flags."""
    started = []

    def start(*flags: str) -> TafelServer:
        name = uuid.uuid4().hex[:8]
        srv = TafelServer(
            _workdir / f"data-{name}", _workdir / f"tafel-{name}.log", extra_args=["--azure-limits", *flags]
        )
        srv.start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.kill9()


def new_table(srv: TafelServer) -> str:
    name = unique_table_name("lim")
    r = srv.raw.create_table(name)
    assert r.status_code == 201, (r.status_code, r.text)
    return name


def insert(srv: TafelServer, table: str, pk: str):
    return srv.raw.insert(table, {"PartitionKey": pk, "RowKey": uuid.uuid4().hex, "n": 1})


def assert_busy(resp, message: str):
    assert resp.status_code == 503, (resp.status_code, resp.text)
    assert resp.headers["x-ms-error-code"] == "ServerBusy"
    err = resp.json()["odata.error"]
    assert err["code"] == "ServerBusy"
    assert err["message"]["value"].startswith(message), err


def insert_until_busy(srv: TafelServer, table: str, pk_of, most: int):
    """Inserts (pk_of(i) for the i-th) until one is refused; returns (accepted, refusal)."""
    for i in range(most):
        r = insert(srv, table, pk_of(i))
        if r.status_code == 503:
            return i, r
        assert r.status_code in (201, 204), (r.status_code, r.text)
    pytest.fail(f"{most} inserts and none refused")


def sdk_table(srv: TafelServer, table: str, **kw) -> TableClient:
    return TableClient.from_connection_string(srv.conn_str, table_name=table, **kw)


def test_a_partition_past_its_limit_is_busy_while_another_is_served(limited):
    srv = limited("--partition-limit", "20")
    table = new_table(srv)
    accepted, refusal = insert_until_busy(srv, table, lambda i: "hot", 200)
    # One second of the target passes at once (Azure's targets are per second).
    assert 20 <= accepted < 40, accepted
    assert_busy(refusal, PARTITION_MESSAGE)
    # The same table's other partition, and the same key in another table, are served.
    assert insert(srv, table, "cold").status_code in (201, 204)
    other = new_table(srv)
    assert insert(srv, other, "hot").status_code in (201, 204)


def test_an_account_past_its_limit_is_busy_across_partitions(limited):
    srv = limited("--account-limit", "30")
    table = new_table(srv)
    start = time.monotonic()
    accepted, refusal = insert_until_busy(srv, table, lambda i: f"p{i}", 300)
    elapsed = time.monotonic() - start
    # One second's burst (the table's creation counted one), plus what the rate
    # earned while the inserts ran: on a loaded machine they are slow, and a fixed
    # bound (< 60) failed with 63 accepted.
    assert 28 <= accepted <= 30 + 30 * elapsed + 2, (accepted, elapsed)
    assert_busy(refusal, ACCOUNT_MESSAGE)
    # Partitions never used go on being refused while the account's rate is spent,
    # within what the rate earns meanwhile: not always the very next insert, which a
    # loaded machine can make wait past the 1/30 s that earns a token (it did once).
    start = time.monotonic()
    accepted, refusal = insert_until_busy(srv, table, lambda i: f"fresh{i}", 300)
    assert accepted <= 30 * (time.monotonic() - start) + 2, accepted
    assert_busy(refusal, ACCOUNT_MESSAGE)


def test_a_batch_of_100_counts_100_entities(limited):
    srv = limited("--partition-limit", "50")
    table = new_table(srv)
    with sdk_table(srv, table, retry_total=0) as client:
        # Larger than a whole second of the partition's target: it passes the full
        # bucket and leaves the partition 50 entities in debt.
        client.submit_transaction([("create", {"PartitionKey": "b", "RowKey": str(i)}) for i in range(100)])
    assert_busy(insert(srv, table, "b"), PARTITION_MESSAGE)
    # Reads count as writes do: a point read of the partition is refused as well.
    assert_busy(srv.raw.get_entity(table, "b", "0"), PARTITION_MESSAGE)
    # Had the batch counted as one, the partition would still hold 49 of its 50.
    assert insert(srv, table, "other").status_code in (201, 204)
    time.sleep(2.2)  # the debt paid: 50 + 60 earned
    assert insert(srv, table, "b").status_code in (201, 204)


def test_a_query_counts_the_entities_it_returned(limited):
    srv = limited("--account-limit", "50")
    table = new_table(srv)
    with sdk_table(srv, table, retry_total=0) as client:
        time.sleep(1.1)
        client.submit_transaction([("create", {"PartitionKey": "q", "RowKey": f"{i:03}"}) for i in range(100)])
        time.sleep(2.2)  # the batch's debt paid, the account's second full again
        # Admitted with a full account; its 100 entities are taken once it has run,
        # leaving the account a second in debt.
        assert len(list(client.list_entities())) == 100
    r = srv.raw.get_entity(table, "q", "000")
    assert_busy(r, ACCOUNT_MESSAGE)


def test_a_query_of_one_partition_counts_against_that_partition(limited):
    srv = limited("--partition-limit", "50")
    table = new_table(srv)
    with sdk_table(srv, table, retry_total=0) as client:
        client.submit_transaction([("create", {"PartitionKey": "q", "RowKey": f"{i:03}"}) for i in range(100)])
        time.sleep(2.2)  # the batch's debt paid
        assert len(list(client.query_entities("PartitionKey eq 'q' and RowKey ge '000'"))) == 100
    assert_busy(insert(srv, table, "q"), PARTITION_MESSAGE)
    assert insert(srv, table, "other").status_code in (201, 204)


def test_the_sdk_retry_policy_rides_out_server_busy(limited):
    srv = limited("--partition-limit", "2")
    table = new_table(srv)
    insert_until_busy(srv, table, lambda i: "p", 100)
    statuses = []
    with sdk_table(srv, table) as client:  # the SDK's default retry policy
        client.create_entity(
            {"PartitionKey": "p", "RowKey": "retried"},
            raw_response_hook=lambda resp: statuses.append(resp.http_response.status_code),
        )
        assert client.get_entity("p", "retried")["RowKey"] == "retried"
    assert statuses[0] == 503, statuses
    assert statuses[-1] in (201, 204), statuses


def test_the_admitted_rate_holds_the_target_under_four_times_the_load(limited):
    """Eight clients hammer one partition; over a window after the first second's
    burst, the entities admitted per second are the target within 5%. The target is
    low enough that Python's threads offer four times it even on a loaded 2-core CI
    machine (at 100/s they once offered 399/s, and the test measured itself)."""
    target = 50
    srv = limited("--partition-limit", str(target))
    table = new_table(srv)
    warmup, window = 1.5, 5.0
    start = time.monotonic()
    stop = start + warmup + window + 0.5
    admitted: list = []
    offered: list = []
    failures: list = []

    def hammer():
        try:
            while time.monotonic() < stop:
                r = insert(srv, table, "hot")
                now = time.monotonic()
                offered.append(now)
                if r.status_code in (201, 204):
                    admitted.append(now)
                elif r.status_code != 503:
                    failures.append((r.status_code, r.text))
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(repr(e))

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]
    lo, hi = start + warmup, start + warmup + window
    offered_rate = sum(1 for t in offered if lo <= t < hi) / window
    admitted_rate = sum(1 for t in admitted if lo <= t < hi) / window
    print(f"offered {offered_rate:.1f}/s, admitted {admitted_rate:.1f}/s of {target}/s")
    assert offered_rate >= 4 * target, f"the test offered only {offered_rate:.0f}/s"
    assert abs(admitted_rate - target) <= 0.05 * target, (admitted_rate, offered_rate)


def test_without_the_flag_nothing_is_throttled(server):
    table = unique_table_name("nolim")
    assert server.raw.create_table(table).status_code == 201
    # Far past Azure's 2,000 a second for one partition, were the limits on.
    with sdk_table(server, table, retry_total=0) as client:
        for b in range(30):
            client.submit_transaction(
                [("create", {"PartitionKey": "p", "RowKey": f"{b}-{i}"}) for i in range(100)]
            )
    for _ in range(50):
        assert server.raw.get(entity_path(table, "p", "0-0")).status_code == 200
