"""Bearer tokens (``--oauth basic|strict``; SECURITY.md, docs/oauth.md).

Tokens are minted here with PyJWT from test keys (RS256) and sent with plain ``requests``.
Bearer tokens travel over HTTPS only, so most tests start a server with a certificate
made here (a test CA and a leaf for 127.0.0.1); they are skipped when the binary has no
``--cert``. Strict mode gets its keys from a JWKS file or from an OpenID discovery
document served on loopback over plain http.
"""

from __future__ import annotations

import base64
import datetime
import http.server
import json
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Optional

import jwt
import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from conftest import ACCOUNT, DEFAULT_VERSION, JSON_MINIMAL, TafelServer, assert_error, tafel_binary

TENANT = "00000000-0000-0000-0000-0000000000aa"
STS = f"https://sts.windows.net/{TENANT}/"
CHALLENGE = (
    f"Bearer authorization_uri=https://login.microsoftonline.com/{TENANT}/oauth2/authorize "
    "resource_id=https://storage.azure.com"
)
READER, CONTRIBUTOR_APP, OWNER_ROLE = "oid-reader", "app-contributor", "Tables.Owner"
TABLE_WRITER = "oid-orders-writer"


def _binary_has_tls() -> bool:
    try:
        out = subprocess.run(
            [str(tafel_binary()), "serve", "--help"], capture_output=True, text=True, timeout=30
        ).stdout
    except OSError:
        return False
    return "--cert" in out


needs_tls = pytest.mark.skipif(not _binary_has_tls(), reason="needs a tafel with HTTPS (--cert/--key)")


# ---------------------------------------------------------------------------
# Keys, certificates and tokens
# ---------------------------------------------------------------------------


def _b64(n: int) -> str:
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def rsa_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwk_of(key, kid: str) -> dict:
    n = key.public_key().public_numbers()
    return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid, "n": _b64(n.n), "e": _b64(n.e)}


def mint(key, kid: str = "k1", algorithm: str = "RS256", **claims) -> str:
    now = int(time.time())
    body = {
        "aud": "https://storage.azure.com",
        "iss": STS,
        "tid": TENANT,
        "oid": READER,
        "nbf": now - 60,
        "iat": now - 60,
        "exp": now + 3600,
    }
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode(body, key, algorithm=algorithm, headers={"kid": kid})


class Tls:
    """A test CA and a server certificate for 127.0.0.1 and localhost, as PEM files."""

    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Tafel test CA")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                    encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        import ipaddress

        leaf = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        self.ca = directory / "ca.pem"
        self.cert = directory / "cert.pem"
        self.key = directory / "key.pem"
        self.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
        self.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )

    def args(self) -> list:
        return ["--cert", str(self.cert), "--key", str(self.key)]


ROLES = f"""
[[assignment]]
principal = "oid:{READER}"
role = "Storage Table Data Reader"

[[assignment]]
principal = "appid:{CONTRIBUTOR_APP}"
role = "Storage Table Data Contributor"
account = "{ACCOUNT}"

[[assignment]]
principal = "role:{OWNER_ROLE}"
role = "Owner"

[[assignment]]
principal = "oid:{TABLE_WRITER}"
role = "Storage Table Data Contributor"
table = "oauthorders"
"""


# ---------------------------------------------------------------------------
# Servers and requests
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("oauth")


@pytest.fixture(scope="module")
def tls(workdir) -> Tls:
    return Tls(workdir / "tls")


@pytest.fixture(scope="module")
def signing_key():
    return rsa_key()


def start(workdir: Path, args: list) -> TafelServer:
    name = uuid.uuid4().hex[:8]
    srv = TafelServer(workdir / f"data-{name}", workdir / f"tafel-{name}.log", extra_args=args)
    srv.start()
    return srv


@pytest.fixture(scope="module")
def strict(workdir, tls, signing_key):
    """``--oauth strict`` with keys from a JWKS file and the role file above."""
    jwks = workdir / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk_of(signing_key, "k1")]}))
    roles = workdir / "roles.toml"
    roles.write_text(ROLES)
    access_log = workdir / "strict-access.log"
    srv = start(
        workdir,
        [
            *tls.args(),
            "--oauth", "strict",
            "--oauth-jwks", str(jwks),
            "--oauth-roles", str(roles),
            "--oauth-tenant", TENANT,
            "--access-log", str(access_log),
        ],
    )
    srv.access_log = access_log
    yield srv
    srv.stop()


def call(
    srv: TafelServer,
    tls: Optional[Tls],
    method: str,
    path: str,
    token: Optional[str],
    *,
    version: Optional[str] = DEFAULT_VERSION,
    json_body=None,
    scheme: str = "https",
    query: str = "",
    extra: Optional[dict] = None,
) -> requests.Response:
    headers = {"Accept": JSON_MINIMAL, "DataServiceVersion": "3.0", **(extra or {})}
    if version:
        headers["x-ms-version"] = version
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    url = f"{scheme}://127.0.0.1:{srv.port}/{ACCOUNT}{path}" + (f"?{query}" if query else "")
    return requests.request(
        method, url, headers=headers, json=json_body, verify=str(tls.ca) if tls else True, timeout=30
    )


def assert_challenge(resp: requests.Response, status: int, code: str):
    assert_error(resp, status, code)
    assert resp.headers.get("WWW-Authenticate") == CHALLENGE, resp.headers


# ---------------------------------------------------------------------------
# Without TLS
# ---------------------------------------------------------------------------


def test_without_oauth_a_bearer_token_is_an_unknown_scheme(server, signing_key):
    r = call(server, None, "GET", "/Tables", mint(signing_key), scheme="http")
    assert_error(r, 400, "InvalidAuthenticationInfo")
    assert "WWW-Authenticate" not in r.headers


def test_bearer_over_plain_http_is_refused_and_anonymous_requests_get_the_challenge(workdir, signing_key):
    srv = start(workdir, ["--oauth", "basic", "--oauth-tenant", TENANT])
    try:
        r = call(srv, None, "GET", "/Tables", mint(signing_key), scheme="http")
        assert_error(r, 403, "AuthenticationFailed")
        r = call(srv, None, "GET", "/Tables", None, scheme="http")
        assert_challenge(r, 401, "NoAuthenticationInformation")
        # Shared Key is untouched by --oauth.
        assert srv.raw.get("/Tables").status_code == 200
        assert "for local development only" in srv.log_text()
    finally:
        srv.stop()


def test_strict_mode_refuses_to_start_without_roles_or_keys(workdir):
    srv = TafelServer(workdir / "bad", workdir / "bad.log", extra_args=["--oauth", "strict"])
    with pytest.raises(RuntimeError, match="exited"):
        srv.start(timeout=20)
    assert "--oauth strict needs --oauth-roles" in srv.log_text()


# ---------------------------------------------------------------------------
# Strict mode over HTTPS
# ---------------------------------------------------------------------------


@needs_tls
def test_every_rejection_is_401_with_the_challenge(strict, tls, signing_key):
    now = int(time.time())
    other_key = rsa_key()
    cases = {
        "expired": mint(signing_key, exp=now - 3600, nbf=now - 7200),
        "not yet valid": mint(signing_key, nbf=now + 3600, exp=now + 7200),
        "no expiry": mint(signing_key, exp=None),
        "wrong audience": mint(signing_key, aud="https://management.azure.com"),
        "another account's audience": mint(signing_key, aud="https://other.table.core.windows.net"),
        "wrong issuer": mint(signing_key, iss="https://sts.windows.net/another-tenant/"),
        "foreign issuer": mint(signing_key, iss="https://evil.example/"),
        "bad signature": mint(other_key),
        "unknown kid": mint(other_key, kid="k-unknown"),
        "malformed": "not.a.jwt",
        "garbage": "x",
        "HS256": jwt.encode({"aud": "https://storage.azure.com", "iss": STS, "exp": now + 60}, "secret-key-of-32-bytes-or-more!!", algorithm="HS256"),
    }
    for why, token in cases.items():
        r = call(strict, tls, "GET", "/Tables", token)
        assert r.status_code == 401, (why, r.status_code, r.text)
        assert_challenge(r, 401, "InvalidAuthenticationInfo")
        assert "www-authenticate header" in r.json()["odata.error"]["message"]["value"], why
    # The XML form names the reason.
    r = call(strict, tls, "GET", "", cases["wrong audience"], query="restype=service&comp=properties")
    assert r.status_code == 401
    assert "<AuthenticationErrorDetail>Audience validation failed" in r.text
    # Within five minutes of skew a token still counts.
    r = call(strict, tls, "GET", "/Tables", mint(signing_key, exp=now - 200))
    assert r.status_code == 200, r.text
    # No credential: 401 and the challenge; too old a version: Azure's 403.
    assert_challenge(call(strict, tls, "GET", "/Tables", None), 401, "NoAuthenticationInformation")
    r = call(strict, tls, "GET", "/Tables", mint(signing_key), version="2018-03-28")
    assert_error(r, 403, "AuthenticationFailed")
    # The access log names the scheme and never a token.
    time.sleep(1.5)
    log = strict.access_log.read_text()
    assert "Bearer" in log
    for token in cases.values():
        if len(token) > 10:
            assert token not in log and token.split(".")[2] not in log
    assert cases["bad signature"] not in strict.log_text()


@needs_tls
def test_audiences_azure_accepts_and_tafels_own_endpoint(strict, tls, signing_key):
    for aud in [
        "https://storage.azure.com",
        "https://storage.azure.com/",
        f"https://{ACCOUNT}.table.core.windows.net",
        f"https://{ACCOUNT}.table.core.windows.net/",
        f"https://127.0.0.1:{strict.port}",
        f"https://127.0.0.1:{strict.port}/{ACCOUNT}/",
    ]:
        r = call(strict, tls, "GET", "/Tables", mint(signing_key, aud=aud))
        assert r.status_code == 200, (aud, r.text)
    r = call(strict, tls, "GET", "/Tables", mint(signing_key, iss=f"https://login.microsoftonline.com/{TENANT}/v2.0"))
    assert r.status_code == 200, r.text


@needs_tls
def test_roles_reader_contributor_owner(strict, tls, signing_key):
    reader = mint(signing_key, oid=READER)
    contributor = mint(signing_key, oid="someone", appid=CONTRIBUTOR_APP)
    contributor_v2 = mint(signing_key, oid="someone", azp=CONTRIBUTOR_APP)
    owner = mint(signing_key, oid="someone-else", roles=[OWNER_ROLE])
    nobody = mint(signing_key, oid="nobody")
    table = "oauth" + uuid.uuid4().hex[:12]
    entity = {"PartitionKey": "p", "RowKey": "r", "Value": 1}

    def denied(r):
        # JSON or, for comp= requests, XML: the header carries the code either way.
        detail = (r.request.method, r.request.url, r.status_code, r.text[:300])
        assert r.status_code == 403, detail
        assert r.headers.get("x-ms-error-code") == "AuthorizationPermissionMismatch", detail

    # Nobody: authenticated, no role.
    denied(call(strict, tls, "GET", "/Tables", nobody))
    # Reader: lists tables, cannot create one.
    assert call(strict, tls, "GET", "/Tables", reader).status_code == 200
    denied(call(strict, tls, "POST", "/Tables", reader, json_body={"TableName": table}))
    # Contributor (appid and azp alike): creates, writes.
    r = call(strict, tls, "POST", "/Tables", contributor, json_body={"TableName": table})
    assert r.status_code == 201, r.text
    assert call(strict, tls, "POST", f"/{table}", contributor_v2, json_body=entity).status_code == 201
    # Reader reads entities, cannot write or delete them.
    r = call(strict, tls, "GET", f"/{table}()", reader)
    assert r.status_code == 200 and len(r.json()["value"]) == 1, r.text
    denied(call(strict, tls, "POST", f"/{table}", reader, json_body={**entity, "RowKey": "r2"}))
    denied(call(strict, tls, "DELETE", f"/{table}(PartitionKey='p',RowKey='r')", reader, extra={"If-Match": "*"}))
    # ACLs and service properties are the owner's.
    acl = "comp=acl"
    denied(call(strict, tls, "GET", f"/{table}", contributor, query=acl))
    denied(call(strict, tls, "GET", "/", contributor, query="restype=service&comp=properties"))
    assert call(strict, tls, "GET", f"/{table}", owner, query=acl).status_code == 200
    assert call(strict, tls, "GET", "/", owner, query="restype=service&comp=properties").status_code == 200
    # Contributor deletes the table.
    assert call(strict, tls, "DELETE", f"/Tables('{table}')", contributor).status_code == 204


@needs_tls
def test_a_table_scoped_role_reaches_only_its_table(strict, tls, signing_key):
    owner = mint(signing_key, oid="o", roles=[OWNER_ROLE])
    writer = mint(signing_key, oid=TABLE_WRITER)
    for t in ("oauthorders", "oauthother"):
        r = call(strict, tls, "POST", "/Tables", owner, json_body={"TableName": t})
        assert r.status_code in (201, 409), r.text
    entity = {"PartitionKey": "p", "RowKey": uuid.uuid4().hex}
    assert call(strict, tls, "POST", "/oauthorders", writer, json_body=entity).status_code == 201
    assert call(strict, tls, "GET", "/oauthorders()", writer).status_code == 200
    assert_error(
        call(strict, tls, "POST", "/oauthother", writer, json_body=entity), 403, "AuthorizationPermissionMismatch"
    )
    # Listing tables needs an account-wide role.
    assert_error(call(strict, tls, "GET", "/Tables", writer), 403, "AuthorizationPermissionMismatch")


# ---------------------------------------------------------------------------
# Strict mode with an OpenID discovery document; basic mode
# ---------------------------------------------------------------------------


class Issuer:
    """An OpenID issuer on loopback (plain http): discovery document and JWKS."""

    def __init__(self):
        self.keys: list = []
        self.jwks_fetches = 0
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                if self.path == "/issuer/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": f"{issuer.base}/issuer/keys"}
                elif self.path == "/issuer/keys":
                    issuer.jwks_fetches += 1
                    body = {"keys": issuer.keys}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.url = f"{self.base}/issuer"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@needs_tls
def test_strict_with_a_discovery_document_and_key_rotation(workdir, tls):
    issuer = Issuer()
    first, second = rsa_key(), rsa_key()
    issuer.keys = [jwk_of(first, "first")]
    roles = workdir / "discovery-roles.json"
    roles.write_text(json.dumps({"assignment": [{"principal": "oid:app-user", "role": "Storage Table Data Contributor"}]}))
    srv = start(
        workdir,
        [*tls.args(), "--oauth", "strict", "--oauth-issuer", issuer.url, "--oauth-roles", str(roles)],
    )
    try:
        token = mint(first, kid="first", iss=issuer.url, oid="app-user")
        assert call(srv, tls, "GET", "/Tables", token).status_code == 200
        # The issuer's key does not sign for Entra's issuers.
        assert_error(call(srv, tls, "GET", "/Tables", mint(first, kid="first", oid="app-user")), 401, "InvalidAuthenticationInfo")
        # A new key: the unknown kid makes Tafel fetch the JWKS again (at most every 2 s).
        issuer.keys = [jwk_of(first, "first"), jwk_of(second, "second")]
        time.sleep(2.2)
        fetched = issuer.jwks_fetches
        rotated = mint(second, kid="second", iss=issuer.url, oid="app-user")
        r = call(srv, tls, "GET", "/Tables", rotated)
        assert r.status_code == 200, r.text
        assert issuer.jwks_fetches == fetched + 1
    finally:
        srv.stop()
        issuer.close()


@needs_tls
def test_basic_mode_checks_claims_but_not_signatures(workdir, tls):
    srv = start(workdir, [*tls.args(), "--oauth", "basic"])
    try:
        anyone = rsa_key()  # no key is configured: basic mode does not verify
        token = mint(anyone, kid="whatever", oid="dev")
        table = "basic" + uuid.uuid4().hex[:10]
        r = call(srv, tls, "POST", "/Tables", token, json_body={"TableName": table})
        assert r.status_code == 201, r.text
        r = call(srv, tls, "GET", f"/{table}", token, query="comp=acl")
        assert r.status_code == 200, r.text
        # Claims are still checked; the challenge names the `common` tenant.
        r = call(srv, tls, "GET", "/Tables", mint(anyone, aud="https://vault.azure.net"))
        assert_error(r, 401, "InvalidAuthenticationInfo")
        assert r.headers["WWW-Authenticate"].startswith(
            "Bearer authorization_uri=https://login.microsoftonline.com/common/oauth2/authorize"
        )
    finally:
        srv.stop()


# ---------------------------------------------------------------------------
# The SDK: azure-data-tables with a TokenCredential over HTTPS
# ---------------------------------------------------------------------------


class MintedCredential:
    """A ``TokenCredential`` handing out a token minted here; records the scopes asked for."""

    def __init__(self, token: str):
        self.token = token
        self.scopes: list = []

    def get_token(self, *scopes, **kwargs):
        from azure.core.credentials import AccessToken

        self.scopes.extend(scopes)
        return AccessToken(self.token, int(time.time()) + 3600)


@needs_tls
def test_sdk_quickstart_with_a_token_credential(strict, tls, signing_key):
    from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
    from azure.data.tables import TableServiceClient, UpdateMode

    endpoint = f"https://127.0.0.1:{strict.port}/{ACCOUNT}"
    owner = MintedCredential(mint(signing_key, oid="sdk-owner", roles=[OWNER_ROLE]))
    name = "sdk" + uuid.uuid4().hex[:10]
    with TableServiceClient(endpoint, credential=owner, connection_verify=str(tls.ca)) as svc:
        table = svc.create_table(name)
        table.create_entity({"PartitionKey": "p", "RowKey": "1", "Name": "one", "N": 1})
        table.upsert_entity({"PartitionKey": "p", "RowKey": "1", "N": 2}, mode=UpdateMode.MERGE)
        got = table.get_entity("p", "1")
        assert (got["Name"], got["N"]) == ("one", 2)
        assert [e["RowKey"] for e in table.query_entities("N eq 2")] == ["1"]
        assert name in [t.name for t in svc.list_tables()]
        svc.get_service_properties()
        table.delete_entity("p", "1")
    assert any(s.startswith("https://storage.azure.com") for s in owner.scopes), owner.scopes

    reader = MintedCredential(mint(signing_key, oid=READER))
    with TableServiceClient(endpoint, credential=reader, connection_verify=str(tls.ca)) as svc:
        table = svc.get_table_client(name)
        assert list(table.list_entities()) == []
        with pytest.raises(HttpResponseError) as e:
            table.create_entity({"PartitionKey": "p", "RowKey": "2"})
        assert e.value.status_code == 403
        assert "AuthorizationPermissionMismatch" in str(e.value)

    expired = MintedCredential(mint(signing_key, exp=int(time.time()) - 3600, nbf=int(time.time()) - 7200))
    with TableServiceClient(endpoint, credential=expired, connection_verify=str(tls.ca)) as svc:
        with pytest.raises((ClientAuthenticationError, HttpResponseError)) as e:
            list(svc.list_tables())
        assert e.value.status_code == 401

    with TableServiceClient(endpoint, credential=owner, connection_verify=str(tls.ca)) as svc:
        svc.delete_table(name)
