"""Microsoft Entra ID bearer tokens (--oauth basic|strict) over HTTPS: the SDK with a
TokenCredential, every refusal with Azure's status, code and challenge, signature checks
against a JWKS file and an OpenID discovery document, the role file, and Cosmos DB for Table's
audiences on a Cosmos endpoint."""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time
import uuid
from pathlib import Path

import jwt
import pytest
import requests
from azure.core.credentials import AccessToken
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient
from cryptography.hazmat.primitives.asymmetric import rsa

from conftest import ACCOUNT, TafelServer, sdk_error_code, unique_table_name
from test_tls import tls_dir  # noqa: F401 - a fixture: the same development certificate

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
ISSUER = f"https://sts.windows.net/{TENANT}/"
CHALLENGE = f"Bearer authorization_uri=https://login.microsoftonline.com/{TENANT}/oauth2/authorize resource_id=https://storage.azure.com"


def rsa_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


SIGNING_KEY = rsa_key()
OTHER_KEY = rsa_key()


def jwks(key, kid: str = "k1") -> dict:
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    public.update({"kid": kid, "use": "sig", "alg": "RS256"})
    return {"keys": [public]}


# A claim sent as JSON null (None leaves the claim out).
NULL = object()


def mint(key=SIGNING_KEY, kid: str = "k1", **claims) -> str:
    now = int(time.time())
    body = {"aud": "https://storage.azure.com", "iss": ISSUER, "iat": now, "nbf": now - 60, "exp": now + 3600, "oid": "alice"}
    body.update(claims)
    body = {k: (None if v is NULL else v) for k, v in body.items() if v is not None}
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})


class StaticToken:
    """A TokenCredential that hands out one token, as DefaultAzureCredential would a real one."""

    def __init__(self, token: str):
        self.token = token
        self.scopes = []

    def get_token(self, *scopes, **kwargs):
        self.scopes.extend(scopes)
        return AccessToken(self.token, int(time.time()) + 3600)


def start(workdir: Path, tls: Path, *args: str) -> TafelServer:
    name = uuid.uuid4().hex[:6]
    extra = ["--oauth-tenant", TENANT, *args]
    if tls is not None:
        extra = ["--cert", str(tls / "cert.pem"), "--key", str(tls / "key.pem"), *extra]
    srv = TafelServer(workdir / f"data-oauth-{name}", workdir / f"tafel-oauth-{name}.log", extra_args=extra)
    if tls is not None:
        srv.ca_file = tls / "ca.pem"
    srv.start()
    return srv


@pytest.fixture(scope="module")
def basic(_workdir, tls_dir):
    log = _workdir / f"access-{uuid.uuid4().hex[:6]}.log"
    srv = start(_workdir, tls_dir, "--oauth", "basic", "--access-log", str(log))
    srv.access_log = log
    yield srv
    srv.stop()


ROLES = """
[[grant]]
principal = "oid:reader"
role = "Storage Table Data Reader"

[[grant]]
principal = "role:Tables.Write"
role = "Storage Table Data Contributor"

[[grant]]
principal = "appid:admin-app"
role = "owner"

[[grant]]
principal = "group:orders-team"
role = "contributor"
table = "ordersonly"
"""


@pytest.fixture(scope="module")
def strict(_workdir, tls_dir):
    keys = _workdir / "jwks.json"
    keys.write_text(json.dumps(jwks(SIGNING_KEY)))
    roles = _workdir / "roles.toml"
    roles.write_text(ROLES)
    srv = start(_workdir, tls_dir, "--oauth", "strict", "--oauth-jwks", str(keys), "--oauth-roles", str(roles))
    yield srv
    srv.stop()


def call(srv: TafelServer, path: str = "/Tables", token: str | None = None, method: str = "GET", version: str = "2019-02-02", **kw):
    headers = {"x-ms-version": version, "Accept": "application/json;odata=nometadata", "x-ms-date": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    headers.update(kw.pop("headers", {}))
    verify = str(srv.ca_file) if srv.ca_file else True
    return requests.request(method, f"{srv.url}{path}", headers=headers, verify=verify, timeout=30, **kw)


def test_the_sdk_quickstart_with_a_token_credential_over_https(basic):
    cred = StaticToken(mint())
    name = unique_table_name("oauth")
    with TableServiceClient(endpoint=basic.url, credential=cred, connection_verify=str(basic.ca_file)) as svc:
        table = svc.create_table(name)
        table.create_entity({"PartitionKey": "p", "RowKey": "1", "V": "token"})
        table.submit_transaction([("create", {"PartitionKey": "p", "RowKey": "2"}), ("upsert", {"PartitionKey": "p", "RowKey": "1", "W": 2})])
        assert [(e["RowKey"], e.get("W")) for e in table.query_entities("PartitionKey eq 'p'")] == [("1", 2), ("2", None)]
        assert name in [t.name for t in svc.list_tables()]
        svc.delete_table(name)
    assert cred.scopes and all(s.startswith("https://storage.azure.com") for s in cred.scopes)


def test_each_bad_token_is_401_invalid_authentication_info_with_the_challenge(basic):
    cases = {
        "Audience validation failed": mint(aud="https://vault.azure.net"),
        "Issuer validation failed": mint(iss="https://evil.example/"),
        "The token is expired": mint(exp=int(time.time()) - 3600),
        "not yet valid": mint(nbf=int(time.time()) + 3600),
        # A string nbf is refused as a string exp is, not ignored.
        "nbf is not a number": mint(nbf=str(int(time.time()) + 3600)),
        "not a valid JWT": "not-a-token",
    }
    for detail, token in cases.items():
        r = call(basic, token=token)
        assert r.status_code == 401, (detail, r.text)
        assert r.headers["x-ms-error-code"] == "InvalidAuthenticationInfo"
        assert r.headers["WWW-Authenticate"] == CHALLENGE
        assert "www-authenticate header" in r.json()["odata.error"]["message"]["value"]
        xml = call(basic, "/?restype=service&comp=properties", token=token)
        assert xml.status_code == 401 and f"{detail}" in xml.text, (detail, xml.text)
    # Audiences Azure accepts besides storage's: the account's endpoint, and this endpoint.
    for aud in (f"https://{ACCOUNT}.table.core.windows.net", f"https://127.0.0.1:{basic.port}", "https://storage.azure.com/"):
        assert call(basic, token=mint(aud=aud)).status_code == 200, aud
    v2 = mint(iss=f"https://login.microsoftonline.com/{TENANT}/v2.0")
    assert call(basic, token=v2).status_code == 200


def test_a_null_nbf_is_refused_not_taken_for_an_absent_one(basic):
    """`"nbf": null` is no NumericDate (RFC 7519): refused as a string nbf is, while a
    token with no nbf at all is accepted (docs/oauth.md)."""
    token = mint(nbf=NULL)
    r = call(basic, token=token)
    assert r.status_code == 401 and r.headers["x-ms-error-code"] == "InvalidAuthenticationInfo", r.text
    xml = call(basic, "/?restype=service&comp=properties", token=token)
    assert xml.status_code == 401 and "nbf is not a number" in xml.text, xml.text
    assert call(basic, token=mint(nbf=None)).status_code == 200


def test_azure_storages_application_id_is_an_accepted_audience(basic):
    assert call(basic, token=mint(aud="e406a681-f3d4-42a8-90b6-c2b029497af1")).status_code == 200


def test_a_token_for_another_service_is_not_accepted_because_the_host_header_names_it(basic):
    """The accepted audiences come from configuration: a request whose Host says `other-api`
    must not make a token for https://other-api valid here."""
    for host in ("other-api", f"other-api:{basic.port}"):
        token = mint(aud=f"https://{host}")
        r = call(basic, token=token, headers={"Host": host})
        assert r.status_code == 401, (host, r.status_code, r.text)
        assert r.headers["x-ms-error-code"] == "InvalidAuthenticationInfo"
        r = call(basic, token=mint(aud=f"https://{host}/{ACCOUNT}"), headers={"Host": host})
        assert r.status_code == 401, (host, r.status_code)


def test_no_credential_is_401_with_the_challenge_and_keys_and_sas_still_work(basic):
    r = call(basic)
    assert r.status_code == 401 and r.headers["x-ms-error-code"] == "NoAuthenticationInformation"
    assert r.headers["WWW-Authenticate"] == CHALLENGE
    assert basic.raw.get("/Tables").status_code == 200  # Shared Key
    # Too old a version: Azure's 403 AuthenticationFailed, no challenge.
    r = call(basic, token=mint(), version="2018-03-28")
    assert r.status_code == 403 and r.headers["x-ms-error-code"] == "AuthenticationFailed", r.text
    assert "WWW-Authenticate" not in r.headers
    xml = call(basic, "/?restype=service&comp=properties", token=mint(), version="2018-03-28")
    assert "Authentication scheme Bearer is not supported in this version." in xml.text


def test_tokens_never_reach_the_access_log(basic):
    token = mint(oid="log-check")
    assert call(basic, token=token).status_code == 200
    # The log's own thread writes the line: wait for it.
    deadline = time.monotonic() + 10
    text = ""
    while "Bearer" not in text and time.monotonic() < deadline:
        time.sleep(0.05)
        text = basic.access_log.read_text()
    assert "Bearer" in text
    assert token not in text and token.split(".")[2] not in text


def test_a_bearer_token_over_plain_http_is_refused(_workdir):
    srv = start(_workdir, None, "--oauth", "basic")
    try:
        # Azure's (and Azurite's) answer: 403 AuthenticationFailed; no challenge, as
        # no token would do over http.
        r = call(srv, token=mint())
        assert r.status_code == 403 and r.headers["x-ms-error-code"] == "AuthenticationFailed", r.text
        assert "WWW-Authenticate" not in r.headers
        xml = call(srv, "/?restype=service&comp=properties", token=mint())
        assert "Authentication scheme Bearer is not allowed with HTTP." in xml.text
    finally:
        srv.stop()


def _unsigned(alg: str, claims: dict) -> str:
    enc = lambda v: base64.urlsafe_b64encode(json.dumps(v).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{enc({'alg': alg, 'kid': 'k1'})}.{enc(claims)}."


def test_strict_mode_verifies_signatures_with_the_jwks_file(strict):
    assert call(strict, token=mint(appid="admin-app")).status_code == 200
    now = int(time.time())
    claims = {"aud": "https://storage.azure.com", "iss": ISSUER, "exp": now + 600, "appid": "admin-app"}
    hs256 = jwt.encode(claims, "a-shared-secret-of-at-least-32-bytes!", algorithm="HS256", headers={"kid": "k1"})
    # A valid token with its claims swapped for an owner's: the signature no longer matches.
    header, _, signature = mint(oid="reader").split(".")
    swapped = f"{header}.{mint(appid='admin-app').split('.')[1]}.{signature}"
    for token, detail in (
        (mint(key=OTHER_KEY, appid="admin-app"), "Signature validation failed"),
        (mint(kid="unknown", appid="admin-app"), "Signature validation failed"),
        (swapped, "Signature validation failed"),
        (hs256, "algorithm is not accepted"),
        (_unsigned("none", claims), "not a valid JWT"),
    ):
        r = call(strict, token=token)
        assert r.status_code == 401 and r.headers["WWW-Authenticate"] == CHALLENGE, detail
        assert detail in call(strict, "/?restype=service&comp=properties", token=token).text.replace("&apos;", "'")


def test_roles_decide_what_a_principal_may_do(strict):
    owner = StaticToken(mint(appid="admin-app"))
    reader = StaticToken(mint(oid="reader"))
    writer = StaticToken(mint(oid="someone", roles=["Tables.Write"]))
    orders = StaticToken(mint(oid="member", groups=["orders-team"]))
    nobody = StaticToken(mint(oid="stranger"))
    verify = str(strict.ca_file)

    def svc(cred):
        return TableServiceClient(endpoint=strict.url, credential=cred, connection_verify=verify)

    name = unique_table_name("roles")
    svc(writer).create_table(name).create_entity({"PartitionKey": "p", "RowKey": "1"})
    svc(owner).create_table("ordersonly")
    try:
        as_reader = svc(reader).get_table_client(name)
        assert [e["RowKey"] for e in as_reader.list_entities()] == ["1"]
        for denied in (
            lambda: as_reader.create_entity({"PartitionKey": "p", "RowKey": "2"}),
            lambda: svc(reader).create_table(unique_table_name("no")),
            lambda: svc(writer).get_table_client(name).set_table_access_policy({}),
            lambda: svc(writer).get_service_properties(),
            lambda: list(svc(nobody).get_table_client(name).list_entities()),
            lambda: svc(orders).get_table_client(name).create_entity({"PartitionKey": "p", "RowKey": "3"}),
        ):
            with pytest.raises(HttpResponseError) as err:
                denied()
            assert err.value.status_code == 403
            assert sdk_error_code(err.value) == "AuthorizationPermissionMismatch"
        svc(orders).get_table_client("ordersonly").create_entity({"PartitionKey": "o", "RowKey": "1"})
        svc(owner).get_table_client(name).set_table_access_policy({})
        assert "cors" in svc(owner).get_service_properties()
    finally:
        svc(owner).delete_table(name)
        svc(owner).delete_table("ordersonly")


class Discovery(http.server.BaseHTTPRequestHandler):
    """An OpenID issuer on loopback: its discovery document and key set."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        base = f"http://127.0.0.1:{self.server.server_port}"
        if self.path == "/.well-known/openid-configuration":
            body = {"issuer": base, "jwks_uri": f"{base}/keys"}
        elif self.path == "/keys":
            body = jwks(SIGNING_KEY, kid="d1")
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


def test_strict_mode_with_an_openid_issuers_discovery_document(_workdir, tls_dir):
    issuer = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Discovery)
    threading.Thread(target=issuer.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{issuer.server_port}"
    roles = _workdir / "discovery-roles.json"
    # alice is the loopback issuer's; admin is Entra's (no issuer named).
    roles.write_text(
        json.dumps(
            {
                "grant": [
                    {"principal": "oid:alice", "role": "contributor", "issuer": url},
                    {"principal": "oid:admin", "role": "owner"},
                ]
            }
        )
    )
    srv = start(_workdir, tls_dir, "--oauth", "strict", "--oauth-issuer", url, "--oauth-roles", str(roles))
    try:
        assert call(srv, token=mint(kid="d1", iss=url)).status_code == 200
        # The second issuer cannot mint a token with an Entra principal's oid and get its
        # roles: principals are keyed by (issuer, subject).
        r = call(srv, token=mint(kid="d1", iss=url, oid="admin"))
        assert r.status_code == 403 and r.headers["x-ms-error-code"] == "AuthorizationPermissionMismatch", r.text
        # An issuer's keys sign only its own tokens: not ones claiming Entra's issuer.
        r = call(srv, token=mint(kid="d1"))
        assert r.status_code == 401 and r.headers["WWW-Authenticate"] == CHALLENGE
        assert call(srv, token=mint(kid="d1", key=OTHER_KEY, iss=url)).status_code == 401
        assert call(srv, token=mint(kid="d1", iss="http://127.0.0.1:1/")).status_code == 401
    finally:
        srv.stop()
        issuer.shutdown()


def test_strict_mode_without_roles_or_keys_or_with_an_unreachable_issuer_stops_the_start(_workdir):
    roles = _workdir / "no-roles.toml"
    roles.write_text("")
    for args, says in (
        (["--oauth", "strict", "--oauth-jwks", str(roles)], "--oauth strict needs --oauth-roles"),
        (["--oauth", "strict", "--oauth-roles", str(roles)], "--oauth-jwks or --oauth-issuer"),
        (["--oauth", "strict", "--oauth-roles", str(roles), "--oauth-issuer", "http://127.0.0.1:1"], "127.0.0.1:1"),
    ):
        srv = TafelServer(_workdir / f"d-{uuid.uuid4().hex[:6]}", _workdir / "tafel-oauth-bad.log", extra_args=args)
        with pytest.raises(RuntimeError):
            srv.start(timeout=30)
        assert says in srv.log_path.read_text()


def test_the_tenant_is_pinned_unless_common(basic, strict):
    """--oauth-tenant (the fixtures' TENANT) is the only Entra tenant accepted."""
    other = "00000000-0000-0000-0000-000000000001"
    for iss in (f"https://sts.windows.net/{other}/", f"https://login.microsoftonline.com/{other}/v2.0"):
        r = call(basic, token=mint(iss=iss))
        assert r.status_code == 401 and r.headers["WWW-Authenticate"] == CHALLENGE, iss
        assert "Issuer validation failed" in call(basic, "/?restype=service&comp=properties", token=mint(iss=iss)).text
        # Signed with the right key and named in the role file: still another tenant's token.
        assert call(strict, token=mint(iss=iss, appid="admin-app")).status_code == 401, iss
    assert call(strict, token=mint(appid="admin-app")).status_code == 200


# Cosmos DB for Table (docs/cosmos.md): the SDKs ask for https://cosmos.azure.com/.default on a
# Cosmos endpoint, and Tafel takes Cosmos's audiences there and Storage's elsewhere.
COSMOS_AUD = "https://cosmos.azure.com"
COSMOS_CHALLENGE = CHALLENGE.replace("https://storage.azure.com", COSMOS_AUD)


class ScopedToken:
    """A TokenCredential minting a token for whatever scope the SDK asks, as Entra does."""

    def __init__(self):
        self.scopes = []

    def get_token(self, *scopes, **kwargs):
        self.scopes.extend(scopes)
        return AccessToken(mint(aud=scopes[0].removesuffix("/.default")), int(time.time()) + 3600)


@pytest.fixture(scope="module")
def cosmos_basic(_workdir, tls_dir):
    srv = start(_workdir, tls_dir, "--oauth", "basic", "--cosmos")
    yield srv
    srv.stop()


def cosmos_call(srv: TafelServer, token: str, path: str = "/Tables") -> requests.Response:
    """A request answered as Cosmos by its host name (`<account>.table.cosmos.azure.com`)."""
    return call_host(srv, f"{ACCOUNT}.table.cosmos.azure.com:{srv.port}", token, path)


def call_host(srv: TafelServer, host: str, token: str, path: str = "/Tables") -> requests.Response:
    headers = {"x-ms-version": "2019-02-02", "Accept": "application/json;odata=nometadata",
               "Authorization": f"Bearer {token}", "Host": host}
    return requests.get(f"https://127.0.0.1:{srv.port}{path}", headers=headers, verify=str(srv.ca_file), timeout=30)


def test_the_sdk_on_a_cosmos_endpoint_asks_for_a_cosmos_token_and_tafel_takes_it(cosmos_basic):
    # `localhost` on a port but 10002 is a Cosmos endpoint to the SDK, as the server is with --cosmos.
    cred = ScopedToken()
    url = f"https://localhost:{cosmos_basic.port}/{ACCOUNT}"
    name = "tok_" + uuid.uuid4().hex[:8]  # a Cosmos table name: Table Storage refuses `_`
    with TableServiceClient(endpoint=url, credential=cred, connection_verify=str(cosmos_basic.ca_file)) as svc:
        table = svc.create_table(name)
        table.create_entity({"PartitionKey": "p", "RowKey": "1", "V": 1})
        table.update_entity({"PartitionKey": "p", "RowKey": "1", "W": 2})  # a MERGE, tunnelled as on Cosmos
        assert [(e["V"], e["W"]) for e in table.query_entities("PartitionKey eq 'p'")] == [(1, 2)]
        svc.delete_table(name)
    assert cred.scopes and set(cred.scopes) == {f"{COSMOS_AUD}/.default"}


def test_a_storage_token_is_refused_on_cosmos_with_a_challenge_naming_cosmos(cosmos_basic):
    r = call(cosmos_basic, token=mint())
    assert r.status_code == 401, r.text
    assert r.headers["x-ms-error-code"] == "InvalidAuthenticationInfo"
    assert r.headers["WWW-Authenticate"] == COSMOS_CHALLENGE
    assert r.headers["Content-Type"].startswith("application/json"), "Cosmos's error form"
    # The SDK asks again for the challenge's resource; a credential that only has a storage
    # token cannot answer it.
    cred = StaticToken(mint())
    url = f"https://localhost:{cosmos_basic.port}/{ACCOUNT}"
    with TableServiceClient(endpoint=url, credential=cred, connection_verify=str(cosmos_basic.ca_file)) as svc:
        with pytest.raises(HttpResponseError) as e:
            list(svc.list_tables())
    assert e.value.status_code == 401
    # Cosmos's audiences: its URI and the account's Cosmos endpoints.
    for aud in (COSMOS_AUD, f"{COSMOS_AUD}/", f"https://{ACCOUNT}.table.cosmos.azure.com", f"https://{ACCOUNT}.documents.azure.com"):
        assert call(cosmos_basic, token=mint(aud=aud)).status_code == 200, aud
    for aud in ("e406a681-f3d4-42a8-90b6-c2b029497af1", f"https://{ACCOUNT}.table.core.windows.net"):
        assert call(cosmos_basic, token=mint(aud=aud)).status_code == 401, aud


def test_the_host_name_decides_which_audience_a_request_takes(basic):
    """One server: a request under a Cosmos host name takes a Cosmos token and refuses a
    storage one; the same request under the server's address does the reverse."""
    r = cosmos_call(basic, mint(aud=COSMOS_AUD))
    assert r.status_code == 200, r.text
    r = cosmos_call(basic, mint())
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == COSMOS_CHALLENGE, r.text
    assert r.json()["odata.error"]["code"] == "InvalidAuthenticationInfo"
    storage_host = f"127.0.0.1:{basic.port}"
    assert call_host(basic, storage_host, mint(), f"/{ACCOUNT}/Tables").status_code == 200
    r = call_host(basic, storage_host, mint(aud=COSMOS_AUD), f"/{ACCOUNT}/Tables")
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == CHALLENGE, r.text
    # The SDK, told the audience, asks for a Cosmos token on a Storage endpoint: refused, and
    # the challenge makes it ask again for the resource it names.
    cred = ScopedToken()
    with TableServiceClient(endpoint=basic.url, credential=cred, audience=COSMOS_AUD,
                            connection_verify=str(basic.ca_file)) as svc:
        list(svc.list_tables())
    assert cred.scopes == [f"{COSMOS_AUD}/.default", "https://storage.azure.com/.default"]


def test_cosmos_built_in_data_roles_grant_as_on_cosmos(_workdir, tls_dir):
    keys = _workdir / "jwks-cosmos.json"
    keys.write_text(json.dumps(jwks(SIGNING_KEY)))
    roles = _workdir / "roles-cosmos.toml"
    roles.write_text('[[grant]]\nprincipal = "oid:cr"\nrole = "Cosmos DB Built-in Data Reader"\n'
                     '[[grant]]\nprincipal = "oid:cc"\nrole = "Cosmos DB Built-in Data Contributor"\n')
    srv = start(_workdir, tls_dir, "--oauth", "strict", "--oauth-jwks", str(keys), "--oauth-roles", str(roles), "--cosmos")
    try:
        url = f"https://localhost:{srv.port}/{ACCOUNT}"

        def client(oid):
            token = mint(aud=COSMOS_AUD, oid=oid)
            return TableServiceClient(endpoint=url, credential=StaticToken(token), connection_verify=str(srv.ca_file))

        name = "roles_" + uuid.uuid4().hex[:6]
        with client("cc") as svc:
            svc.create_table(name).create_entity({"PartitionKey": "p", "RowKey": "r"})
        with client("cr") as svc:
            assert [e["RowKey"] for e in svc.get_table_client(name).list_entities()] == ["r"]
            with pytest.raises(HttpResponseError) as e:
                svc.get_table_client(name).create_entity({"PartitionKey": "p", "RowKey": "s"})
            assert e.value.status_code == 403
    finally:
        srv.stop()
