"""Wire-level details of authentication, versions and addressing with raw HTTP (requests +
our own Shared Key signer): what is signed, which headers are needed, which versions and
content types are accepted, path- and host-style addressing."""

import base64
import hashlib
import json
from email.utils import formatdate

import pytest

from conftest import (
    ACCOUNT,
    JSON_FULL,
    JSON_MINIMAL,
    KEY,
    assert_error,
    entity_path,
    unique_table_name,
)


# ---------------------------------------------------------------------------
# Authentication
# ---------------------------------------------------------------------------


def test_missing_authorization(raw):
    r = raw.get("/Tables", auth=None)
    assert r.status_code == 403, (r.status_code, r.text)
    assert_error(r, 403, {"AuthenticationFailed", "AuthorizationFailure"})


def test_bad_signature(raw, raw_table):
    wrong = base64.b64encode(b"not the key" * 4).decode()
    r = raw.get("/Tables", key=wrong)
    assert_error(r, 403, "AuthenticationFailed")
    r = raw.insert(raw_table, {"PartitionKey": "p", "RowKey": "r"}, key=wrong)
    assert_error(r, 403, "AuthenticationFailed")
    assert_error(raw.get_entity(raw_table, "p", "r"), 404, "ResourceNotFound")


def test_signature_covers_content_type(server):
    """Content-Type is signed exactly as sent (auth.md §2)."""
    import requests

    from conftest import shared_key_string_to_sign, sign

    name = unique_table_name("ctsig")
    date = formatdate(usegmt=True)
    sts = shared_key_string_to_sign("POST", "", "application/json", date, f"/{ACCOUNT}/{ACCOUNT}/Tables")
    headers = {
        "x-ms-date": date,
        "x-ms-version": "2019-02-02",
        "Accept": JSON_MINIMAL,
        "Content-Type": "application/json;odata=nometadata",
        "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}",
    }
    r = requests.post(f"{server.url}/Tables", data=json.dumps({"TableName": name}), headers=headers)
    assert_error(r, 403, "AuthenticationFailed")
    # Signed with the Content-Type actually sent: accepted.
    sts = shared_key_string_to_sign("POST", "", headers["Content-Type"], date, f"/{ACCOUNT}/{ACCOUNT}/Tables")
    headers["Authorization"] = f"SharedKey {ACCOUNT}:{sign(KEY, sts)}"
    r = requests.post(f"{server.url}/Tables", data=json.dumps({"TableName": name}), headers=headers)
    assert r.status_code == 201, (r.status_code, r.text)
    server.raw.delete_table(name)


def test_signature_covers_path_and_verb(raw, server):
    """A signature computed for another resource / verb must be refused."""
    import requests

    from conftest import shared_key_string_to_sign, sign

    date = formatdate(usegmt=True)

    def get_tables(verb: str, resource: str):
        """GET /Tables signed as if for `verb` on `resource`."""
        sts = shared_key_string_to_sign(verb, "", "", date, resource)
        return requests.get(
            f"{server.url}/Tables",
            headers={
                "x-ms-date": date,
                "x-ms-version": "2019-02-02",
                "Accept": JSON_MINIMAL,
                "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}",
            },
        )

    # Signed for /devstoreaccount1/Tables (account once) instead of twice: wrong for path-style.
    assert_error(get_tables("GET", f"/{ACCOUNT}/Tables"), 403, "AuthenticationFailed")
    # Correct resource, but the signature was made for a different verb.
    assert_error(get_tables("POST", f"/{ACCOUNT}/{ACCOUNT}/Tables"), 403, "AuthenticationFailed")
    # The right string: accepted (proves the two refusals above are about the signature).
    r = get_tables("GET", f"/{ACCOUNT}/{ACCOUNT}/Tables")
    assert r.status_code == 200, r.text


def test_shared_key_lite_accepted(raw, raw_table):
    r = raw.get("/Tables", auth="SharedKeyLite", query={"$filter": f"TableName eq '{raw_table}'"})
    assert r.status_code == 200, r.text
    assert r.json()["value"] == [{"TableName": raw_table}]
    r = raw.insert(raw_table, {"PartitionKey": "lite", "RowKey": "1"}, auth="SharedKeyLite")
    assert r.status_code == 201, r.text
    bad = raw.get("/Tables", auth="SharedKeyLite", key=base64.b64encode(b"x" * 64).decode())
    assert_error(bad, 403, "AuthenticationFailed")


def test_date_header_instead_of_x_ms_date(server, raw):
    import requests

    from conftest import shared_key_string_to_sign, sign

    date = formatdate(usegmt=True)
    sts = shared_key_string_to_sign("GET", "", "", date, f"/{ACCOUNT}/{ACCOUNT}/Tables")
    r = requests.get(
        f"{server.url}/Tables",
        headers={
            "Date": date,
            "x-ms-version": "2019-02-02",
            "Accept": JSON_MINIMAL,
            "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}",
        },
    )
    assert r.status_code == 200, r.text


def test_missing_date_header(server):
    import requests

    from conftest import shared_key_string_to_sign, sign

    sts = shared_key_string_to_sign("GET", "", "", "", f"/{ACCOUNT}/{ACCOUNT}/Tables")
    r = requests.get(
        f"{server.url}/Tables",
        headers={
            "x-ms-version": "2019-02-02",
            "Accept": JSON_MINIMAL,
            "Authorization": f"SharedKey {ACCOUNT}:{sign(KEY, sts)}",
        },
    )
    assert_error(r, 403, "AuthenticationFailed")


def test_malformed_authorization_header(server):
    import requests

    r = requests.get(
        f"{server.url}/Tables",
        headers={
            "x-ms-date": formatdate(usegmt=True),
            "x-ms-version": "2019-02-02",
            "Accept": JSON_MINIMAL,
            "Authorization": "SharedKey no-colon-here",
        },
    )
    assert_error(r, (400, 403), {"InvalidAuthenticationInfo", "AuthenticationFailed"})


def test_content_md5(raw, raw_table):
    body = json.dumps({"PartitionKey": "md5", "RowKey": "1"}).encode()
    good = base64.b64encode(hashlib.md5(body).digest()).decode()
    r = raw.post(f"/{raw_table}", body=body, headers={"Content-MD5": good})
    assert r.status_code == 201, r.text
    body2 = json.dumps({"PartitionKey": "md5", "RowKey": "2"}).encode()
    r = raw.post(f"/{raw_table}", body=body2, headers={"Content-MD5": good})
    assert_error(r, 400, "Md5Mismatch")
    assert_error(raw.get_entity(raw_table, "md5", "2"), 404, "ResourceNotFound")


def test_unknown_account(raw):
    other_key = base64.b64encode(b"some other key bytes 1234567890!").decode()
    r = raw.get("/Tables", account="nosuchacct", key=other_key)
    assert_error(r, (403, 404), {"AuthenticationFailed", "ResourceNotFound"})
    # Even signed with the real key, an unknown account name is refused.
    r = raw.get("/Tables", account="nosuchacct", key=KEY)
    assert_error(r, (403, 404), {"AuthenticationFailed", "ResourceNotFound"})


# ---------------------------------------------------------------------------
# Versions and addressing
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "version", ["2015-12-11", "2017-04-17", "2017-07-29", "2018-03-28", "2019-02-02", "2020-12-06", "2021-12-02", "2022-11-02"]
)
def test_versions_accepted(raw, raw_table, version):
    r = raw.get("/Tables", version=version, query={"$filter": f"TableName eq '{raw_table}'"})
    assert r.status_code == 200, (version, r.status_code, r.text)
    assert r.json()["value"] == [{"TableName": raw_table}]
    assert r.headers.get("x-ms-version")
    rk = version.replace("-", "")
    r = raw.insert(raw_table, {"PartitionKey": "v", "RowKey": rk}, version=version)
    assert r.status_code == 201, (version, r.status_code, r.text)
    r = raw.request("MERGE", entity_path(raw_table, "v", rk), json={"X": 1}, version=version, headers={"If-Match": "*"})
    assert r.status_code == 204, (version, r.status_code, r.text)


def test_host_style_addressing(server, raw):
    name = unique_table_name("host")
    r = raw.create_table(name, host_style=True)
    assert r.status_code == 201, (r.status_code, r.text)
    try:
        base = f"http://{ACCOUNT}.table.localhost:{server.port}"
        assert r.json()["odata.metadata"] == f"{base}/$metadata#Tables/@Element"
        r = raw.insert(name, {"PartitionKey": "h", "RowKey": "1", "V": 1}, host_style=True, accept=JSON_FULL)
        assert r.status_code == 201, r.text
        assert r.json()["odata.id"] == f"{base}/{name}(PartitionKey='h',RowKey='1')"
        r = raw.get_entity(name, "h", "1", host_style=True)
        assert r.status_code == 200, r.text
        assert r.json()["V"] == 1
        # The same table is visible path-style.
        assert raw.get_entity(name, "h", "1").json()["V"] == 1
        # Host-style with a bad signature is refused too.
        bad = raw.get("/Tables", host_style=True, key=base64.b64encode(b"k" * 64).decode())
        assert_error(bad, 403, "AuthenticationFailed")
    finally:
        assert raw.delete_table(name, host_style=True).status_code == 204


@pytest.mark.parametrize(
    "ctype",
    [
        "application/json",
        "application/json;odata=nometadata",
        "application/json;odata=minimalmetadata;charset=utf-8",
        "application/json; charset=utf-8",
        "application/json;odata=fullmetadata",
    ],
)
def test_insert_content_types(raw, raw_table, ctype):
    r = raw.insert(raw_table, json.dumps({"PartitionKey": "ct", "RowKey": "1", "V": "é"}), content_type=ctype)
    assert r.status_code == 201, (ctype, r.status_code, r.text)
    assert raw.get_entity(raw_table, "ct", "1").json()["V"] == "é"


def test_timeout_param_accepted(raw, raw_table):
    r = raw.get(f"/{raw_table}()", query={"timeout": "30"})
    assert r.status_code == 200, r.text
    r = raw.get("/Tables", query={"timeout": "5", "unknownParam": "x"})
    assert r.status_code == 200, r.text
