"""Shared access signatures (auth.md §4-§5) through azure-data-tables: tokens made with
``generate_table_sas`` / ``generate_account_sas`` and used with ``AzureSasCredential``.

The core is a table of (credential, operation) -> expected outcome, run in full: every
service-SAS permission set and a spread of account-SAS resource types and permissions
against every operation the Table service has. Then key ranges, time windows, signature
tampering, IP and protocol restrictions. Stored access policies, two keys and keys in logs:
test_sas_policies.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode

import pytest
import requests
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.core.exceptions import HttpResponseError
from azure.data.tables import (
    AccountSasPermissions,
    ResourceTypes,
    TableClient,
    TableServiceClient,
    UpdateMode,
    generate_account_sas,
    generate_table_sas,
)

from conftest import ACCOUNT, KEY, TafelServer, sdk_error_code, unique_table_name

UTC = timezone.utc
CRED = AzureNamedKeyCredential(ACCOUNT, KEY)
OTHER_KEY = base64.b64encode(b"not the account key, 32 bytes!!!").decode()


def hours(n: float) -> datetime:
    return datetime.now(UTC) + timedelta(hours=n)


def new_key() -> str:
    return uuid.uuid4().hex


def outcome(fn) -> str:
    """'ok', or the Azure error code the call failed with."""
    try:
        fn()
    except HttpResponseError as e:
        return sdk_error_code(e) or f"HTTP {e.status_code}"
    return "ok"


def sas_table(server: TafelServer, table: str, sas: str) -> TableClient:
    return TableClient(endpoint=server.url, table_name=table, credential=AzureSasCredential(sas))


def sas_service(server: TafelServer, sas: str) -> TableServiceClient:
    return TableServiceClient(endpoint=server.url, credential=AzureSasCredential(sas))


def table_sas(table: str, **kw) -> str:
    kw.setdefault("expiry", hours(1))
    return generate_table_sas(CRED, table, **kw)


def account_sas(srt: str, sp: str, **kw) -> str:
    types = ResourceTypes(service="s" in srt, container="c" in srt, object="o" in srt)
    return generate_account_sas(CRED, types, AccountSasPermissions.from_string(sp), kw.pop("expiry", hours(1)), **kw)


@pytest.fixture(scope="module")
def admin(server):
    with TableServiceClient.from_connection_string(server.conn_str) as svc:
        yield svc


@pytest.fixture(scope="module")
def grid_table(admin):
    """A table with a seeded read target, shared by the permission grid."""
    name = unique_table_name("sasgrid")
    tc = admin.create_table(name)
    tc.create_entity({"PartitionKey": "seed", "RowKey": "r0", "V": 1})
    yield name
    admin.delete_table(name)


# ---------------------------------------------------------------------------
# The permission grid
# ---------------------------------------------------------------------------


class Env:
    """What one grid cell needs: the SAS clients and an admin (Shared Key) to prepare state."""

    def __init__(self, server, admin, table, sas):
        self.admin = admin
        self.table = table
        self.admin_tc = admin.get_table_client(table)
        self.tc = sas_table(server, table, sas)
        self.svc = sas_service(server, sas)

    def seeded(self) -> dict:
        e = {"PartitionKey": "w", "RowKey": new_key(), "V": 1}
        self.admin_tc.create_entity(e)
        return e

    def scratch_table(self) -> str:
        name = unique_table_name("sasdel")
        self.admin.create_table(name)
        return name


def _batch(env: Env):
    e = env.seeded()
    env.tc.submit_transaction(
        [("create", {"PartitionKey": "w", "RowKey": new_key()}), ("update", {**e, "V": 2}, {"mode": "replace"})]
    )


OPS = {
    "query": lambda env: list(env.tc.query_entities("PartitionKey eq 'seed'")),
    "get": lambda env: env.tc.get_entity("seed", "r0"),
    "insert": lambda env: env.tc.create_entity({"PartitionKey": "w", "RowKey": new_key()}),
    "update": lambda env: env.tc.update_entity({**env.seeded(), "V": 2}, mode=UpdateMode.REPLACE),
    "merge": lambda env: env.tc.update_entity({**env.seeded(), "V": 2}, mode=UpdateMode.MERGE),
    "upsert_replace": lambda env: env.tc.upsert_entity({"PartitionKey": "w", "RowKey": new_key()}, mode=UpdateMode.REPLACE),
    "upsert_merge": lambda env: env.tc.upsert_entity({"PartitionKey": "w", "RowKey": new_key()}, mode=UpdateMode.MERGE),
    "delete": lambda env: env.tc.delete_entity(partition_key="w", row_key=env.seeded()["RowKey"]),
    "batch": _batch,
    "list_tables": lambda env: list(env.svc.list_tables()),
    "create_table": lambda env: env.svc.create_table(unique_table_name("sasnew")),
    "delete_table": lambda env: env.svc.delete_table(env.scratch_table()),
    "get_acl": lambda env: env.tc.get_table_access_policy(),
    "set_acl": lambda env: env.tc.set_table_access_policy({}),
    "get_props": lambda env: env.svc.get_service_properties(),
    "set_props": lambda env: env.svc.set_service_properties(),
    "get_stats": lambda env: env.svc.get_service_stats(),
}

# Service SAS (auth.md §4): entity operations only, each needing these letters.
SERVICE_NEEDS = {
    "query": "r",
    "get": "r",
    "insert": "a",
    "update": "u",
    "merge": "u",
    "upsert_replace": "au",
    "upsert_merge": "au",
    "delete": "d",
    "batch": "au",  # union of its sub-operations (insert + update)
}

# Account SAS (auth.md §5): resource type, and the permission sets any one of which suffices.
ACCOUNT_NEEDS = {
    "query": ("o", ["r"]),
    "get": ("o", ["r"]),
    "insert": ("o", ["a"]),
    "update": ("o", ["u"]),
    "merge": ("o", ["u"]),
    "upsert_replace": ("o", ["au"]),
    "upsert_merge": ("o", ["au"]),
    "delete": ("o", ["d"]),
    "batch": ("o", ["au"]),
    "list_tables": ("c", ["l"]),
    "create_table": ("c", ["c", "a", "w"]),
    "delete_table": ("c", ["d"]),
    "get_acl": ("c", []),  # Shared Key only
    "set_acl": ("c", []),
    "get_props": ("s", ["r"]),
    "set_props": ("s", ["w"]),
    "get_stats": ("s", ["r"]),
}


def expect_service(sp: str, op: str) -> str:
    need = SERVICE_NEEDS.get(op)
    if need is None:
        return "AuthorizationResourceTypeMismatch"
    return "ok" if all(c in sp for c in need) else "AuthorizationPermissionMismatch"


def expect_account(srt: str, sp: str, op: str) -> str:
    rt, options = ACCOUNT_NEEDS[op]
    if rt not in srt:
        return "AuthorizationResourceTypeMismatch"
    return "ok" if any(all(c in sp for c in opt) for opt in options) else "AuthorizationPermissionMismatch"


SERVICE_PERMS = ["r", "a", "u", "d", "au", "raud", "rd"]
ACCOUNT_CREDS = [
    ("o", "r"),
    ("o", "a"),
    ("o", "u"),
    ("o", "d"),
    ("o", "au"),
    ("o", "rwdlacup"),
    ("c", "l"),
    ("c", "c"),
    ("c", "a"),
    ("c", "w"),
    ("c", "d"),
    ("c", "rwdlacup"),
    ("s", "r"),
    ("s", "w"),
    ("s", "rwdlacup"),
    ("sco", "rwdlacu"),
    ("sco", "l"),
]

GRID = [("service", sp, None, op) for sp in SERVICE_PERMS for op in OPS] + [
    ("account", sp, srt, op) for srt, sp in ACCOUNT_CREDS for op in OPS
]


@pytest.mark.parametrize(
    "kind,sp,srt,op",
    GRID,
    ids=[f"{k}-{srt + '-' if srt else ''}{sp}-{op}" for k, sp, srt, op in GRID],
)
def test_permission_grid(server, admin, grid_table, kind, sp, srt, op):
    if kind == "service":
        sas = table_sas(grid_table, permission=sp)
        want = expect_service(sp, op)
    else:
        sas = account_sas(srt, sp)
        want = expect_account(srt, sp, op)
    env = Env(server, admin, grid_table, sas)
    got = outcome(lambda: OPS[op](env))
    assert got == want, f"{kind} SAS sp={sp} srt={srt}: {op} -> {got}, expected {want}"


def test_grid_covers_every_letter_alone():
    # Each service-SAS letter alone allows exactly the operations whose needs are that letter.
    for letter in "raud":
        allowed = {op for op in SERVICE_NEEDS if expect_service(letter, op) == "ok"}
        assert allowed == {op for op, need in SERVICE_NEEDS.items() if need == letter}
    assert set(OPS) == set(ACCOUNT_NEEDS)


def test_writes_are_refused_before_anything_is_written(server, admin, grid_table):
    tc = sas_table(server, grid_table, table_sas(grid_table, permission="r"))
    rk = new_key()
    assert outcome(lambda: tc.create_entity({"PartitionKey": "w", "RowKey": rk})) == "AuthorizationPermissionMismatch"
    assert outcome(lambda: admin.get_table_client(grid_table).get_entity("w", rk)) == "ResourceNotFound"


def test_service_sas_is_bound_to_its_table(server, admin, grid_table):
    other = unique_table_name("sasother")
    admin.create_table(other).create_entity({"PartitionKey": "p", "RowKey": "r"})
    try:
        sas = table_sas(grid_table, permission="raud")
        tc = sas_table(server, other, sas)
        assert outcome(lambda: list(tc.query_entities(""))) == "AuthorizationResourceTypeMismatch"
        assert outcome(lambda: tc.get_entity("p", "r")) == "AuthorizationResourceTypeMismatch"
        assert outcome(lambda: tc.create_entity({"PartitionKey": "p", "RowKey": "x"})) == (
            "AuthorizationResourceTypeMismatch"
        )
        # The table name in `tn` matches case-insensitively.
        upper = sas_table(server, grid_table.upper(), table_sas(grid_table.lower(), permission="r"))
        assert [e["RowKey"] for e in upper.query_entities("PartitionKey eq 'seed'")] == ["r0"]
    finally:
        admin.delete_table(other)


def test_batch_sub_requests_are_checked_per_operation(server, admin, grid_table):
    tc = sas_table(server, grid_table, table_sas(grid_table, permission="a"))
    rk1, rk2 = new_key(), new_key()
    ok = outcome(lambda: tc.submit_transaction([("create", {"PartitionKey": "b", "RowKey": rk1})]))
    assert ok == "ok"
    # The second operation (a delete) is outside "a": the whole batch fails, nothing is written.
    bad = outcome(
        lambda: tc.submit_transaction(
            [("create", {"PartitionKey": "b", "RowKey": rk2}), ("delete", {"PartitionKey": "b", "RowKey": rk1})]
        )
    )
    assert bad == "AuthorizationPermissionMismatch"
    admin_tc = admin.get_table_client(grid_table)
    assert outcome(lambda: admin_tc.get_entity("b", rk2)) == "ResourceNotFound"
    assert outcome(lambda: admin_tc.get_entity("b", rk1)) == "ok"


# ---------------------------------------------------------------------------
# Key ranges
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def range_table(admin):
    name = unique_table_name("sasrange")
    tc = admin.create_table(name)
    for pk in "abcde":
        for rk in "12345":
            tc.create_entity({"PartitionKey": pk, "RowKey": rk, "V": f"{pk}{rk}"})
    yield name
    admin.delete_table(name)


def keys_of(entities) -> list:
    return sorted((e["PartitionKey"], e["RowKey"]) for e in entities)


def all_keys() -> list:
    return [(pk, rk) for pk in "abcde" for rk in "12345"]


@pytest.mark.parametrize(
    "bounds,inside",
    [
        (dict(start_pk="b", end_pk="c"), lambda pk, rk: "b" <= pk <= "c"),
        (dict(start_pk="b", start_rk="3", end_pk="d", end_rk="2"), lambda pk, rk: ("b", "3") <= (pk, rk) <= ("d", "2")),
        (dict(start_pk="c", start_rk="2", end_pk="c", end_rk="4"), lambda pk, rk: pk == "c" and "2" <= rk <= "4"),
        (dict(start_pk="d"), lambda pk, rk: pk >= "d"),
        (dict(end_pk="a", end_rk="3"), lambda pk, rk: (pk, rk) <= ("a", "3")),
    ],
    ids=["partitions", "rows-across-partitions", "rows-in-one-partition", "open-end", "open-start"],
)
def test_key_range_sas_reads_only_its_range(server, range_table, bounds, inside):
    tc = sas_table(server, range_table, table_sas(range_table, permission="r", **bounds))
    want = [k for k in all_keys() if inside(*k)]
    assert keys_of(tc.query_entities("")) == want
    assert keys_of(tc.list_entities()) == want
    # Paging through the range with continuation tokens gives the same rows.
    pages = tc.list_entities(results_per_page=2).by_page()
    assert keys_of(e for page in pages for e in page) == want
    # A filter is intersected with the range, not widened by it.
    assert keys_of(tc.query_entities("RowKey ge '4'")) == [k for k in want if k[1] >= "4"]
    assert keys_of(tc.query_entities("PartitionKey eq 'a' or PartitionKey eq 'e'")) == [
        k for k in want if k[0] in "ae"
    ]
    # Point reads outside the range are refused (test_key_range_sas_point_read_outside_...).
    for pk, rk in all_keys():
        got = outcome(lambda: tc.get_entity(pk, rk))
        assert got == ("ok" if inside(pk, rk) else "AuthorizationPermissionMismatch"), (pk, rk, got)


def test_key_range_sas_point_read_outside_is_refused_before_the_lookup(server, range_table):
    # It answered 404 (the range applied like a query's); Azure checks the scope first, so
    # an existing and a missing entity outside the range get the same 403.
    bounds = dict(start_pk="b", start_rk="2", end_pk="c", end_rk="4")
    tc = sas_table(server, range_table, table_sas(range_table, permission="r", **bounds))
    assert outcome(lambda: tc.get_entity("a", "1")) == "AuthorizationPermissionMismatch"
    assert outcome(lambda: tc.get_entity("zz", "missing")) == "AuthorizationPermissionMismatch"
    assert outcome(lambda: tc.get_entity("b", "9-missing")) == "ResourceNotFound"
    assert outcome(lambda: tc.get_entity("c", "1")) == "ok"


def test_key_range_sas_cannot_write_outside_it(server, admin, range_table):
    bounds = dict(start_pk="b", start_rk="2", end_pk="c", end_rk="4")
    tc = sas_table(server, range_table, table_sas(range_table, permission="raud", **bounds))
    admin_tc = admin.get_table_client(range_table)
    for pk, rk in [("a", "9"), ("b", "1"), ("c", "5"), ("d", "0"), ("c", "40")]:
        e = {"PartitionKey": pk, "RowKey": rk, "New": True}
        assert outcome(lambda: tc.create_entity(e)) == "AuthorizationPermissionMismatch", (pk, rk)
        assert outcome(lambda: tc.upsert_entity(e)) == "AuthorizationPermissionMismatch", (pk, rk)
    for pk, rk in [("a", "1"), ("b", "1"), ("c", "5"), ("e", "3")]:
        e = {"PartitionKey": pk, "RowKey": rk, "V": "changed"}
        assert outcome(lambda: tc.update_entity(e)) == "AuthorizationPermissionMismatch", (pk, rk)
        assert outcome(lambda: tc.delete_entity(pk, rk)) == "AuthorizationPermissionMismatch", (pk, rk)
        assert admin_tc.get_entity(pk, rk)["V"] == f"{pk}{rk}"
    # Inside the range everything works.
    assert outcome(lambda: tc.create_entity({"PartitionKey": "b", "RowKey": "2x"})) == "ok"
    assert outcome(lambda: tc.upsert_entity({"PartitionKey": "c", "RowKey": "4", "V": "c4"})) == "ok"
    assert outcome(lambda: tc.delete_entity("b", "2x")) == "ok"
    # A batch with one entity outside the range fails as a whole.
    bad = outcome(
        lambda: tc.submit_transaction(
            [("upsert", {"PartitionKey": "c", "RowKey": "3", "V": "c3"}), ("upsert", {"PartitionKey": "c", "RowKey": "5"})]
        )
    )
    assert bad == "AuthorizationPermissionMismatch"
    assert admin_tc.get_entity("c", "5")["V"] == "c5"


def read_reply(s: socket.socket) -> str:
    """One HTTP/1.1 answer's status line, read whole (head and Content-Length body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, f"connection closed before an answer: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
    )
    while len(rest) < length:
        chunk = s.recv(65536)
        assert chunk, "connection closed mid-answer"
        rest += chunk
    return head.split(b"\r\n", 1)[0].decode()


@pytest.mark.parametrize(
    "permission,method,keys,status",
    [("raud", "PUT", ("a", "9"), 403), ("r", "MERGE", ("b", "2"), 403), ("raud", "DELETE", ("b", "3"), 400)],
    ids=["outside-the-key-range", "no-write-permission", "body-on-a-delete"],
)
def test_a_write_refused_from_its_head_keeps_the_connection_for_the_next_request(
    server, range_table, permission, method, keys, status
):
    """A write refused from its head alone (a key range or a permission read from the URL, a
    body where none belongs) was answered before its body was read, and hyper closed the
    connection behind an answer that did not say so: a client that pooled it sent its next
    request into a closed socket (an SDK insert failed with RemoteDisconnected in CI). The
    body comes 0.3 s after the head here, so it cannot be in the server's buffer already."""
    sas = table_sas(range_table, permission=permission, start_pk="b", start_rk="2", end_pk="c", end_rk="4")
    pk, rk = keys
    body = json.dumps({"PartitionKey": pk, "RowKey": rk, "V": "x"}).encode()
    path = f"/{ACCOUNT}/{range_table}(PartitionKey='{pk}',RowKey='{rk}')?{sas}"
    common = f"Host: 127.0.0.1\r\nx-ms-version: 2019-02-02\r\nAccept: application/json;odata=nometadata\r\n"
    head = f"{method} {path} HTTP/1.1\r\n{common}Content-Type: application/json\r\nIf-Match: *\r\nContent-Length: {len(body)}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(head.encode())
        time.sleep(0.3)
        s.sendall(body)
        assert read_reply(s).startswith(f"HTTP/1.1 {status}")
        s.sendall(f"GET /{ACCOUNT}/{range_table}(PartitionKey='b',RowKey='2')?{sas} HTTP/1.1\r\n{common}\r\n".encode())
        assert read_reply(s).startswith("HTTP/1.1 200")


# ---------------------------------------------------------------------------
# Time window, signature, IP and protocol
# ---------------------------------------------------------------------------


def test_expired_and_future_sas_are_refused(server, grid_table):
    def query(sas):
        return outcome(lambda: list(sas_table(server, grid_table, sas).query_entities("PartitionKey eq 'seed'")))

    assert query(table_sas(grid_table, permission="r", expiry=hours(-1))) == "AuthenticationFailed"
    assert query(table_sas(grid_table, permission="r", start=hours(1), expiry=hours(2))) == "AuthenticationFailed"
    assert query(table_sas(grid_table, permission="r", start=hours(-1), expiry=hours(1))) == "ok"
    assert query(account_sas("o", "r", expiry=hours(-1))) == "AuthenticationFailed"
    assert query(account_sas("o", "r", start=hours(1), expiry=hours(2))) == "AuthenticationFailed"
    assert query(account_sas("o", "r", start=hours(-1))) == "ok"


def _tamper(sas: str, **changes) -> str:
    q = dict(parse_qsl(sas))
    q.update(changes)
    return urlencode(q, quote_via=quote)


def test_signature_must_match(server, grid_table):
    def query(sas):
        return outcome(lambda: list(sas_table(server, grid_table, sas).query_entities("PartitionKey eq 'seed'")))

    good = table_sas(grid_table, permission="r")
    assert query(good) == "ok"
    assert query(_tamper(good, sp="raud")) == "AuthenticationFailed"
    assert query(_tamper(good, se=hours(1000).strftime("%Y-%m-%dT%H:%M:%SZ"))) == "AuthenticationFailed"
    assert query(_tamper(good, sig=base64.b64encode(b"x" * 32).decode())) == "AuthenticationFailed"
    assert query(_tamper(good, sig="%%%not-base64")) == "AuthenticationFailed"
    wrong_key = generate_table_sas(AzureNamedKeyCredential(ACCOUNT, OTHER_KEY), grid_table, permission="r", expiry=hours(1))
    assert query(wrong_key) == "AuthenticationFailed"
    acct = account_sas("o", "r")
    assert query(acct) == "ok"
    assert query(_tamper(acct, srt="sco")) == "AuthenticationFailed"
    assert query(_tamper(acct, sp="rwdlacu")) == "AuthenticationFailed"
    # Neither tn nor ss: not a SAS Tafel can read.
    assert query(f"sv=2019-02-02&sp=r&se=2099-01-01&sig={quote(base64.b64encode(b'y' * 32).decode())}") == (
        "AuthenticationFailed"
    )


def _sign(string_to_sign: str, key: str = KEY) -> str:
    return base64.b64encode(hmac.new(base64.b64decode(key), string_to_sign.encode(), hashlib.sha256).digest()).decode()


def _raw_account_sas(ss: str, srt: str, sp: str, sv: str = "2019-02-02", ses: str = "") -> str:
    se = hours(1).strftime("%Y-%m-%dT%H:%M:%SZ")
    sts = f"{ACCOUNT}\n{sp}\n{ss}\n{srt}\n\n{se}\n\n\n{sv}\n"
    if sv >= "2020-12-06":
        sts += f"{ses}\n"
    q = {"sv": sv, "ss": ss, "srt": srt, "sp": sp, "se": se, "sig": _sign(sts)}
    return urlencode(q, quote_via=quote)


def test_account_sas_services_and_versions(server, grid_table):
    def query(sas):
        return outcome(lambda: list(sas_table(server, grid_table, sas).query_entities("PartitionKey eq 'seed'")))

    assert query(_raw_account_sas("t", "o", "r")) == "ok"
    assert query(_raw_account_sas("bqtf", "o", "r")) == "ok"
    assert query(_raw_account_sas("bqf", "o", "r")) == "AuthorizationServiceMismatch"
    assert query(_raw_account_sas("t", "c", "r")) == "AuthorizationResourceTypeMismatch"
    # Signed versions from 2020-12-06 sign `ses` (encryption scope) too.
    assert query(_raw_account_sas("t", "o", "r", sv="2021-12-02")) == "ok"


def _raw_service_sas(table: str, sp: str, sv: str) -> str:
    se = hours(1).strftime("%Y-%m-%dT%H:%M:%SZ")
    if sv >= "2015-04-05":
        fields = [sp, "", se, f"/table/{ACCOUNT}/{table.lower()}", "", "", "", sv, "", "", "", ""]
    elif sv >= "2015-02-21":
        fields = [sp, "", se, f"/table/{ACCOUNT}/{table.lower()}", "", sv, "", "", "", ""]
    else:
        fields = [sp, "", se, f"/{ACCOUNT}/{table.lower()}", "", sv, "", "", "", ""]
    q = {"sv": sv, "tn": table, "sp": sp, "se": se, "sig": _sign("\n".join(fields))}
    return urlencode(q, quote_via=quote)


@pytest.mark.parametrize("sv", ["2013-08-15", "2015-02-21", "2015-04-05", "2017-07-29", "2019-02-02", "2021-12-02"])
def test_service_sas_string_to_sign_per_version(server, grid_table, sv):
    tc = sas_table(server, grid_table, _raw_service_sas(grid_table, "r", sv))
    assert keys_of(tc.query_entities("PartitionKey eq 'seed'")) == [("seed", "r0")]


def test_source_ip_and_protocol(server, grid_table):
    def query(**kw):
        sas = table_sas(grid_table, permission="r", **kw)
        return outcome(lambda: list(sas_table(server, grid_table, sas).query_entities("PartitionKey eq 'seed'")))

    assert query(ip_address_or_range="127.0.0.1") == "ok"
    assert query(ip_address_or_range="127.0.0.0-127.0.0.255") == "ok"
    assert query(ip_address_or_range="10.1.2.3") == "AuthorizationSourceIPMismatch"
    assert query(ip_address_or_range="10.0.0.0-10.255.255.255") == "AuthorizationSourceIPMismatch"
    assert query(protocol="https,http") == "ok"
    assert query(protocol="https") == "AuthorizationProtocolMismatch"
    acct = account_sas("o", "r", ip_address_or_range="192.168.0.1", protocol="https,http")
    assert outcome(lambda: list(sas_table(server, grid_table, acct).query_entities(""))) == (
        "AuthorizationSourceIPMismatch"
    )
    acct = account_sas("o", "r", protocol="https")
    assert outcome(lambda: list(sas_table(server, grid_table, acct).query_entities(""))) == (
        "AuthorizationProtocolMismatch"
    )


def test_sas_errors_on_the_wire(server, grid_table):
    """Raw HTTP: a refused SAS gets Azure's JSON error with x-ms-error-code; no credentials at all
    is AuthenticationFailed."""
    base = f"{server.url}/{grid_table}()"
    headers = {"Accept": "application/json;odata=nometadata", "x-ms-version": "2019-02-02"}
    r = requests.get(f"{base}?{table_sas(grid_table, permission='a')}", headers=headers)
    assert r.status_code == 403
    assert r.headers["x-ms-error-code"] == "AuthorizationPermissionMismatch"
    assert r.json()["odata.error"]["code"] == "AuthorizationPermissionMismatch"
    r = requests.get(f"{base}?{table_sas(grid_table, permission='r', expiry=hours(-1))}", headers=headers)
    assert r.status_code == 403 and r.headers["x-ms-error-code"] == "AuthenticationFailed"
    r = requests.get(base, headers=headers)
    assert r.status_code == 403 and r.headers["x-ms-error-code"] == "AuthenticationFailed"
    r = requests.get(f"{base}?$filter=PartitionKey%20eq%20'seed'&{table_sas(grid_table, permission='r')}", headers=headers)
    assert r.status_code == 200 and [e["RowKey"] for e in r.json()["value"]] == ["r0"]
