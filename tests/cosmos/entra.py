"""A stand-in for Microsoft Entra ID that the tests' own `DefaultAzureCredential` reaches:
an App Service managed-identity endpoint (`IDENTITY_ENDPOINT` + `IDENTITY_HEADER`, which
azure-identity's ManagedIdentityCredential reads) on 127.0.0.1. It issues RS256 tokens for
the resource asked (`https://cosmos.azure.com` on a Cosmos endpoint), from an Entra issuer of
TENANT, for the principal OID; Tafel (`--oauth strict`) verifies them with the JWK set this
module writes and grants OID what ROLES says."""

import http.server
import json
import secrets
import threading
import time
import urllib.parse
from pathlib import Path

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
ISSUER = f"https://sts.windows.net/{TENANT}/"
OID = "6f1c0e3a-0000-0000-0000-00000000c05e"
KID = "tafel-cosmos"
ROLES = f"""
[[grant]]
principal = "oid:{OID}"
role = "Cosmos DB Built-in Data Contributor"
"""


class Issuer:
    def __init__(self, work: Path):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.secret = secrets.token_hex(16)
        self.resources: list[str] = []
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        public.update({"kid": KID, "use": "sig", "alg": "RS256"})
        self.jwks = work / "jwks.json"
        self.jwks.write_text(json.dumps({"keys": [public]}))
        self.roles = work / "roles.toml"
        self.roles.write_text(ROLES)
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/msi/token"

    def tafel_args(self) -> list[str]:
        return ["--oauth", "strict", "--oauth-tenant", TENANT, "--oauth-jwks", str(self.jwks),
                "--oauth-roles", str(self.roles)]

    def environment(self) -> dict:
        """What makes DefaultAzureCredential (sync and async) ask this issuer and no other."""
        return {"IDENTITY_ENDPOINT": self.endpoint, "IDENTITY_HEADER": self.secret,
                "AZURE_TOKEN_CREDENTIALS": "ManagedIdentityCredential"}

    def mint(self, resource: str) -> tuple[str, int]:
        now = int(time.time())
        exp = now + 3600
        claims = {"aud": resource, "iss": ISSUER, "iat": now, "nbf": now - 60, "exp": exp, "oid": OID, "tid": TENANT}
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": KID}), exp

    def close(self):
        self._server.shutdown()

    def _handler(self):
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                resource = (query.get("resource") or [""])[0]
                if self.headers.get("X-IDENTITY-HEADER") != issuer.secret or not resource:
                    self.send_error(400)
                    return
                issuer.resources.append(resource)
                token, exp = issuer.mint(resource)
                body = json.dumps({"access_token": token, "expires_on": str(exp), "resource": resource,
                                   "token_type": "Bearer"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args):
                pass

        return Handler
