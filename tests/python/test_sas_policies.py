"""Shared access signatures, continued (test_sas.py has the permission grid, key ranges,
time windows and signatures): stored access policies bound to tokens, accounts with two keys,
and no key or signature in the log."""

from __future__ import annotations

import base64
import uuid
from urllib.parse import parse_qsl, quote

import pytest
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.data.tables import (
    ResourceTypes,
    TableAccessPolicy,
    TableClient,
    TableServiceClient,
    generate_account_sas,
    generate_table_sas,
)

from conftest import ACCOUNT, KEY, TafelServer, unique_table_name
from test_sas import CRED, OTHER_KEY, _tamper, admin, grid_table, hours, keys_of, outcome, sas_table, table_sas  # noqa: F401 - fixtures


# ---------------------------------------------------------------------------
# Stored access policies
# ---------------------------------------------------------------------------


@pytest.fixture
def policy_table(admin):
    name = unique_table_name("saspol")
    tc = admin.create_table(name)
    tc.create_entity({"PartitionKey": "p", "RowKey": "1"})
    yield tc
    admin.delete_table(name)


def test_policy_bound_sas_works_and_stops_when_the_policy_is_removed(server, policy_table):
    name = policy_table.table_name
    policy_table.set_table_access_policy({"readers": TableAccessPolicy(permission="r", expiry=hours(1))})
    sas = generate_table_sas(CRED, name, policy_id="readers")
    tc = sas_table(server, name, sas)
    assert keys_of(tc.query_entities("")) == [("p", "1")]
    assert outcome(lambda: tc.create_entity({"PartitionKey": "p", "RowKey": "2"})) == "AuthorizationPermissionMismatch"
    # Changing the policy changes what the existing token may do.
    policy_table.set_table_access_policy({"readers": TableAccessPolicy(permission="a", expiry=hours(1))})
    assert outcome(lambda: tc.create_entity({"PartitionKey": "p", "RowKey": "2"})) == "ok"
    assert outcome(lambda: list(tc.query_entities(""))) == "AuthorizationPermissionMismatch"
    # Removing the policy revokes the token.
    policy_table.set_table_access_policy({})
    assert outcome(lambda: list(tc.query_entities(""))) == "AuthenticationFailed"
    assert outcome(lambda: tc.create_entity({"PartitionKey": "p", "RowKey": "3"})) == "AuthenticationFailed"
    # Recreating a policy of that name brings the token back.
    policy_table.set_table_access_policy({"readers": TableAccessPolicy(permission="r", expiry=hours(1))})
    assert outcome(lambda: list(tc.query_entities(""))) == "ok"


def test_policy_fields_combine_with_the_token(server, policy_table):
    name = policy_table.table_name
    policy_table.set_table_access_policy(
        {
            "no-perm": TableAccessPolicy(expiry=hours(1)),
            "no-expiry": TableAccessPolicy(permission="r"),
            "expired": TableAccessPolicy(permission="r", expiry=hours(-1)),
            "future": TableAccessPolicy(permission="r", start=hours(1), expiry=hours(2)),
            "full": TableAccessPolicy(permission="raud", start=hours(-1), expiry=hours(1)),
        }
    )

    def query(**kw):
        sas = generate_table_sas(CRED, name, **kw)
        return outcome(lambda: list(sas_table(server, name, sas).query_entities("")))

    # Missing fields come from the policy; the token supplies the others.
    assert query(policy_id="no-perm", permission="r") == "ok"
    assert query(policy_id="no-expiry", expiry=hours(1)) == "ok"
    assert query(policy_id="full") == "ok"
    # A field in both the token and the policy is refused.
    assert query(policy_id="full", permission="r") == "AuthenticationFailed"
    assert query(policy_id="no-perm", permission="r", expiry=hours(1)) == "AuthenticationFailed"
    # Nothing gives an expiry / a permission.
    assert query(policy_id="no-expiry") == "AuthenticationFailed"
    assert query(policy_id="no-perm") == "AuthenticationFailed"
    # The policy's time window applies.
    assert query(policy_id="expired") == "AuthenticationFailed"
    assert query(policy_id="future") == "AuthenticationFailed"
    # Unknown policy, or the policy of another table.
    assert query(policy_id="nope", permission="r", expiry=hours(1)) == "AuthenticationFailed"
    other = generate_table_sas(CRED, "someothertable", policy_id="full")
    assert outcome(lambda: list(sas_table(server, "someothertable", other).query_entities(""))) == (
        "AuthenticationFailed"
    )
    # A SAS without a policy must carry permission and expiry itself.
    no_expiry = generate_table_sas(CRED, name, permission="r")
    assert outcome(lambda: list(sas_table(server, name, no_expiry).query_entities(""))) == "AuthenticationFailed"


def test_deleting_the_table_revokes_policy_bound_tokens(server, admin):
    name = unique_table_name("sasdrop")
    tc = admin.create_table(name)
    tc.set_table_access_policy({"all": TableAccessPolicy(permission="raud", expiry=hours(1))})
    sas = generate_table_sas(CRED, name, policy_id="all")
    assert outcome(lambda: list(sas_table(server, name, sas).query_entities(""))) == "ok"
    admin.delete_table(name)
    admin.create_table(name)
    try:
        assert outcome(lambda: list(sas_table(server, name, sas).query_entities(""))) == "AuthenticationFailed"
    finally:
        admin.delete_table(name)


# ---------------------------------------------------------------------------
# Accounts with two keys, and nothing secret in the log
# ---------------------------------------------------------------------------

KEY1 = base64.b64encode(b"primary key of acct two, 32 byte").decode()
KEY2 = base64.b64encode(b"secondary key of acct two, 32 by").decode()


@pytest.fixture
def two_key_server(_workdir):
    accounts = _workdir / f"accounts-{uuid.uuid4().hex[:6]}.txt"
    accounts.write_text(f"# test accounts\n\n{ACCOUNT}:{KEY}\nsecond:{KEY1}:{KEY2}\n")
    srv = TafelServer(
        _workdir / f"data-{uuid.uuid4().hex[:8]}",
        _workdir / f"tafel-{uuid.uuid4().hex[:8]}.log",
        extra_args=["--accounts-file", str(accounts)],
    )
    srv.start()
    yield srv
    srv.kill9()


def test_either_key_signs(two_key_server):
    srv = two_key_server
    url = f"http://127.0.0.1:{srv.port}/second"

    def conn(key):
        return f"DefaultEndpointsProtocol=http;AccountName=second;AccountKey={key};TableEndpoint={url};"

    with TableServiceClient.from_connection_string(conn(KEY1)) as svc:
        svc.create_table("keyed").create_entity({"PartitionKey": "p", "RowKey": "1"})
    with TableServiceClient.from_connection_string(conn(KEY2)) as svc:
        assert [t.name for t in svc.list_tables()] == ["keyed"]
    with TableServiceClient.from_connection_string(conn(OTHER_KEY)) as svc:
        assert outcome(lambda: list(svc.list_tables())) == "AuthenticationFailed"
    for key in (KEY1, KEY2):
        sas = generate_table_sas(AzureNamedKeyCredential("second", key), "keyed", permission="r", expiry=hours(1))
        tc = TableClient(endpoint=url, table_name="keyed", credential=AzureSasCredential(sas))
        assert keys_of(tc.query_entities("")) == [("p", "1")]
        acct = generate_account_sas(
            AzureNamedKeyCredential("second", key), ResourceTypes(container=True), "l", hours(1)
        )
        svc = TableServiceClient(endpoint=url, credential=AzureSasCredential(acct))
        assert [t.name for t in svc.list_tables()] == ["keyed"]
    # A token of one account is no good on another.
    sas = generate_table_sas(CRED, "keyed", permission="r", expiry=hours(1))
    tc = TableClient(endpoint=url, table_name="keyed", credential=AzureSasCredential(sas))
    assert outcome(lambda: list(tc.query_entities(""))) == "AuthenticationFailed"
    # The default account is there too (the file listed it).
    with TableServiceClient.from_connection_string(srv.conn_str) as svc:
        assert list(svc.list_tables()) == []


def test_no_keys_or_signatures_in_the_log(server, grid_table):
    mark = server.log_size()
    sas = table_sas(grid_table, permission="r")
    sig = dict(parse_qsl(sas))["sig"]
    list(sas_table(server, grid_table, sas).query_entities(""))
    outcome(lambda: list(sas_table(server, grid_table, _tamper(sas, sp="raud")).query_entities("")))
    text = server.log_text(mark) + server.log_text(0)
    assert sig not in text and quote(sig, safe="") not in text
    assert KEY not in text
