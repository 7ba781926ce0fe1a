"""Raw HTTP for the integration tests: the development account, a Shared Key signer
(auth.md §2/§3, Table flavour) and ``RawClient``, a ``requests``-based client that signs its
own requests so tests can check wire details the SDKs hide; and Azure error bodies."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json as jsonlib
import threading
from email.utils import formatdate
from typing import TYPE_CHECKING, Iterable, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlsplit

import requests

if TYPE_CHECKING:
    from conftest import TafelServer

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
DEFAULT_VERSION = "2019-02-02"
JSON_MINIMAL = "application/json;odata=minimalmetadata"
JSON_NONE = "application/json;odata=nometadata"
JSON_FULL = "application/json;odata=fullmetadata"


# ---------------------------------------------------------------------------
# Shared Key signing (auth.md §2/§3, Table flavour)
# ---------------------------------------------------------------------------


def sign(key_b64: str, string_to_sign: str) -> str:
    digest = hmac.new(base64.b64decode(key_b64), string_to_sign.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def canonicalized_resource(account: str, raw_path: str, query: str) -> str:
    res = "/" + account + raw_path
    for part in query.split("&") if query else []:
        name, _, value = part.partition("=")
        if name == "comp":
            res += "?comp=" + value
            break
    return res


def shared_key_string_to_sign(method: str, content_md5: str, content_type: str, date: str, resource: str) -> str:
    return f"{method}\n{content_md5}\n{content_type}\n{date}\n{resource}"


def shared_key_lite_string_to_sign(date: str, resource: str) -> str:
    return f"{date}\n{resource}"


def odata_key(value: str) -> str:
    """An OData string literal for a key predicate, percent-encoded for the URL path."""
    return quote(value.replace("'", "''"), safe="")


def entity_path(table: str, pk: str, rk: str) -> str:
    return f"/{table}(PartitionKey='{odata_key(pk)}',RowKey='{odata_key(rk)}')"


def etag_for_timestamp(ts: str) -> str:
    """The ETag Azure derives from an entity's Timestamp (README §5)."""
    return "W/\"datetime'" + quote(ts) + "'\""


QueryType = Union[None, str, Sequence[Tuple[str, str]], dict]


def build_query(query: QueryType) -> str:
    """Query string with option names kept as given (so ``$top`` and ``%24top`` can both be
    sent) and values percent-encoded (space -> %20, quotes kept raw)."""
    if query is None:
        return ""
    if isinstance(query, str):
        return query
    items = query.items() if isinstance(query, dict) else query
    return "&".join(f"{k}={quote(str(v), safe=chr(39) + '(),$:')}" for k, v in items)


class RawClient:
    """Signs and sends requests to one server with ``requests``."""

    def __init__(self, server: "TafelServer", account: str = ACCOUNT, key: str = KEY):
        self.server = server
        self.account = account
        self.key = key
        self._local = threading.local()

    @property
    def session(self) -> requests.Session:
        # A new session after each server (re)start: no stale keep-alive connections.
        s = getattr(self._local, "session", None)
        if s is None or getattr(self._local, "generation", None) != self.server.starts:
            if s is not None:
                s.close()
            s = requests.Session()
            if self.server.ca_file:
                s.verify = str(self.server.ca_file)
            self._local.session = s
            self._local.generation = self.server.starts
        return s

    def request(
        self,
        method: str,
        path: str,
        *,
        query: QueryType = None,
        headers: Optional[dict] = None,
        body: Union[None, str, bytes] = None,
        json=None,
        accept: Optional[str] = JSON_MINIMAL,
        content_type: Optional[str] = None,
        auth: Optional[str] = "SharedKey",
        version: Optional[str] = DEFAULT_VERSION,
        account: Optional[str] = None,
        key: Optional[str] = None,
        host_style: bool = False,
        date: Optional[str] = None,
        timeout: float = 60,
    ) -> requests.Response:
        """``path`` is relative to the account root (``/Tables``, ``/mytable(...)``), already
        percent-encoded.  ``auth`` is ``SharedKey``, ``SharedKeyLite`` or None (unsigned)."""
        account = account or self.account
        key = key or self.key
        qs = build_query(query)
        if host_style:
            url_path = path
        else:
            url_path = "/" + account + path
        url = f"{self.server.scheme}://127.0.0.1:{self.server.port}{url_path}"
        if qs:
            url += "?" + qs
        if json is not None:
            body = jsonlib.dumps(json)
            if content_type is None:
                content_type = "application/json"
        if isinstance(body, str):
            body = body.encode("utf-8")
        if body is not None and content_type is None:
            content_type = "application/json"

        hdrs = {
            "x-ms-date": date or formatdate(usegmt=True),
            "DataServiceVersion": "3.0;NetFx",
            "MaxDataServiceVersion": "3.0;NetFx",
        }
        if version is not None:
            hdrs["x-ms-version"] = version
        if accept is not None:
            hdrs["Accept"] = accept
        if content_type is not None:
            hdrs["Content-Type"] = content_type
        if host_style:
            hdrs["Host"] = f"{account}.table.localhost:{self.server.port}"
        for k, v in (headers or {}).items():
            hdrs[k] = v

        req = requests.Request(method, url, headers=hdrs, data=body)
        prep = self.session.prepare_request(req)
        if accept is None:
            prep.headers.pop("Accept", None)
        if body is None and method in ("GET", "DELETE", "HEAD"):
            prep.headers.pop("Content-Length", None)
        # Sign exactly what goes on the wire.
        parts = urlsplit(prep.url)
        if auth is not None:
            lower = {k.lower(): v for k, v in prep.headers.items()}
            signed_date = lower.get("x-ms-date", lower.get("date", ""))
            resource = canonicalized_resource(account, parts.path, parts.query)
            if auth == "SharedKey":
                sts = shared_key_string_to_sign(
                    method, lower.get("content-md5", ""), lower.get("content-type", ""), signed_date, resource
                )
            elif auth == "SharedKeyLite":
                sts = shared_key_lite_string_to_sign(signed_date, resource)
            else:
                raise ValueError(auth)
            prep.headers["Authorization"] = f"{auth} {account}:{sign(key, sts)}"
        return self.session.send(prep, timeout=timeout)

    # Convenience wrappers -------------------------------------------------

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def create_table(self, name: str, **kw) -> requests.Response:
        return self.request("POST", "/Tables", json={"TableName": name}, **kw)

    def delete_table(self, name: str, **kw) -> requests.Response:
        return self.request("DELETE", f"/Tables('{odata_key(name)}')", **kw)

    def insert(self, table: str, entity: Union[dict, str], **kw) -> requests.Response:
        if isinstance(entity, dict):
            return self.request("POST", f"/{table}", json=entity, **kw)
        return self.request("POST", f"/{table}", body=entity, **kw)

    def get_entity(self, table: str, pk: str, rk: str, **kw) -> requests.Response:
        return self.request("GET", entity_path(table, pk, rk), **kw)

    def query_all(self, table: str, query: Optional[dict] = None, **kw) -> list:
        """All entities of a table, following continuation tokens."""
        out = []
        base = dict(query or {})
        token: dict = {}
        for _ in range(100000):
            q = dict(base)
            q.update(token)
            r = self.request("GET", f"/{table}()", query=q, **kw)
            assert r.status_code == 200, (r.status_code, r.text)
            out.extend(r.json()["value"])
            npk = r.headers.get("x-ms-continuation-NextPartitionKey")
            nrk = r.headers.get("x-ms-continuation-NextRowKey")
            if npk is None:
                return out
            token = {"NextPartitionKey": npk}
            if nrk is not None:
                token["NextRowKey"] = nrk
        raise AssertionError("continuation never ended")


def error_code_of(resp: requests.Response) -> Tuple[Optional[str], Optional[str]]:
    """(x-ms-error-code header, odata.error.code from the JSON body)."""
    body_code = None
    try:
        body_code = resp.json()["odata.error"]["code"]
    except Exception:  # noqa: BLE001 - body may be XML or empty
        pass
    return resp.headers.get("x-ms-error-code"), body_code


def assert_error(resp: requests.Response, status: Union[int, Iterable[int]], codes: Union[str, Iterable[str]]):
    """Asserts an Azure error response: status, x-ms-error-code and the JSON body code."""
    statuses = {status} if isinstance(status, int) else set(status)
    code_set = {codes} if isinstance(codes, str) else set(codes)
    detail = f"{resp.request.method} {resp.request.url} -> {resp.status_code} {resp.headers.get('x-ms-error-code')!r} {resp.text[:500]!r}"
    assert resp.status_code in statuses, f"expected status {sorted(statuses)}: {detail}"
    header_code, body_code = error_code_of(resp)
    assert header_code in code_set, f"expected x-ms-error-code in {sorted(code_set)}: {detail}"
    assert body_code in code_set, f"expected odata.error.code in {sorted(code_set)}: {detail}"
    body = resp.json()["odata.error"]
    assert body["message"]["lang"] == "en-US", detail
    assert isinstance(body["message"]["value"], str) and body["message"]["value"], detail
