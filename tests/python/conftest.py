"""Harness for the Tafel integration tests.

Starts the real ``tafel`` binary (``$TAFEL_BIN`` or ``target/release/tafel``; nothing is
built here) on a free loopback port with a fresh data directory, and offers:

* ``server`` (session scope): the shared server most tests use.
* ``fresh_server`` (function scope): a private server for durability tests.
* ``service`` / ``table`` / ``table_name``: SDK clients and unique table names.
* ``raw``: a ``requests``-based client that signs requests itself with Shared Key
  (auth.md §2) so tests can check wire details the SDK hides.

With ``TAFEL_BACKEND=postgres`` every server runs on the PostgreSQL backend instead, in
a database of its own created on ``TAFEL_POSTGRES_URL``'s server (falling back to
``TAFEL_TEST_POSTGRES_URL``, which ``scripts/with-postgres`` sets), so tests stay
independent; restarts of one server keep its database. ``embedded_only`` and
``postgres_only`` mark tests that only make sense on one backend.

On a failing test the server's stderr (what it logged during the test plus a tail) is
attached to the report.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json as jsonlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from email.utils import formatdate
from pathlib import Path
from typing import Iterable, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlsplit

import pytest
import requests

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VERSION = "2019-02-02"
JSON_MINIMAL = "application/json;odata=minimalmetadata"
JSON_NONE = "application/json;odata=nometadata"
JSON_FULL = "application/json;odata=fullmetadata"

_ALL_SERVERS: list["TafelServer"] = []

BACKEND = os.environ.get("TAFEL_BACKEND", "embedded")
POSTGRES_ADMIN_URL = os.environ.get("TAFEL_POSTGRES_URL") or os.environ.get("TAFEL_TEST_POSTGRES_URL", "")
if BACKEND not in ("embedded", "postgres"):
    raise RuntimeError(f"TAFEL_BACKEND={BACKEND!r}: expected embedded or postgres")
if BACKEND == "postgres" and not POSTGRES_ADMIN_URL:
    raise RuntimeError("TAFEL_BACKEND=postgres needs TAFEL_POSTGRES_URL (a postgresql:// URL)")

embedded_only = pytest.mark.skipif(
    BACKEND != "embedded", reason="about the embedded store's data directory (write-ahead log)"
)
postgres_only = pytest.mark.skipif(BACKEND != "postgres", reason="needs TAFEL_BACKEND=postgres")


def postgres_database_url(dbname: str) -> str:
    """``POSTGRES_ADMIN_URL`` pointing at database ``dbname``."""
    parts = urlsplit(POSTGRES_ADMIN_URL)
    if parts.scheme not in ("postgres", "postgresql"):
        raise RuntimeError("the test harness needs TAFEL_POSTGRES_URL as a postgresql:// URL")
    return parts._replace(path="/" + dbname).geturl()


def create_postgres_database() -> str:
    """A new empty database on the test server; returns its URL."""
    name = "tafel_" + uuid.uuid4().hex[:16]
    subprocess.run(
        ["psql", "-v", "ON_ERROR_STOP=1", "-q", POSTGRES_ADMIN_URL, "-c", f"CREATE DATABASE {name}"],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    return postgres_database_url(name)


def backend_args(database_url: Optional[str]) -> list:
    if BACKEND != "postgres":
        return []
    return ["--backend", "postgres", "--postgres-url", database_url or ""]


def tafel_binary() -> Path:
    env = os.environ.get("TAFEL_BIN")
    path = Path(env) if env else REPO_ROOT / "target" / "release" / "tafel"
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unique_table_name(prefix: str = "t") -> str:
    # 3..63 chars, letters and digits, starts with a letter.
    return (prefix + uuid.uuid4().hex[:20])[:63]


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


# ---------------------------------------------------------------------------
# The server process
# ---------------------------------------------------------------------------


class TafelServer:
    def __init__(self, data_dir: Path, log_path: Path, port: Optional[int] = None, extra_args: Sequence[str] = ()):
        self.binary = tafel_binary()
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        self.port = port or free_port()
        # Each server's admin listener on a port of its own (many servers run at once).
        self.admin_port = free_port()
        self.extra_args = list(extra_args)
        self.proc: Optional[subprocess.Popen] = None
        self._log_file = None
        self.raw = RawClient(self)
        self.starts = 0
        # The postgres backend's database: created on first start, kept across restarts.
        self.database_url: Optional[str] = None
        # HTTPS when started with a certificate; clients then trust ca_file.
        self.scheme = "https" if any(a in self.extra_args for a in ("--cert", "--pfx")) else "http"
        self.ca_file: Optional[Path] = None

    # Addresses ---------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/{ACCOUNT}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def conn_str(self) -> str:
        return self.conn_str_for("127.0.0.1")

    @property
    def conn_str_localhost(self) -> str:
        # With host "localhost" on a port other than 10002 the Python SDK sends merges
        # as POST + X-HTTP-Method: MERGE (clients.md).
        return self.conn_str_for("localhost")

    def conn_str_for(self, host: str) -> str:
        return (
            f"DefaultEndpointsProtocol={self.scheme};AccountName={ACCOUNT};AccountKey={KEY};"
            f"TableEndpoint={self.scheme}://{host}:{self.port}/{ACCOUNT};"
        )

    # Lifecycle ---------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> None:
        # A port free_port() found may be taken by the time the server binds it (another
        # server, or a client's ephemeral port): the admin port, ours to choose, is then
        # chosen again. The Table API port stays, as restarts must keep it.
        for attempt in range(3):
            try:
                return self._start_once(timeout)
            except RuntimeError as e:
                admin_ours = not any(a in self.extra_args for a in ("--admin-port", "--no-admin"))
                if attempt == 2 or not admin_ours or "binding the admin listener" not in str(e):
                    raise
                self.admin_port = free_port()

    def _start_once(self, timeout: float) -> None:
        if not self.binary.exists():
            pytest.fail(
                f"tafel binary not found at {self.binary}; build it with "
                f"`cargo build --release -p tafel` or set TAFEL_BIN",
                pytrace=False,
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if BACKEND == "postgres" and self.database_url is None:
            self.database_url = create_postgres_database()
        self._log_file = open(self.log_path, "ab")
        self._log_file.write(f"\n===== tafel start #{self.starts + 1} on port {self.port} =====\n".encode())
        self._log_file.flush()
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        env.setdefault("RUST_BACKTRACE", "1")
        env.setdefault("NO_COLOR", "1")
        cmd = [
            str(self.binary),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            *backend_args(self.database_url),
            *self.default_ops_args(),
            *self.extra_args,
        ]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=self._log_file, env=env
        )
        self.starts += 1
        if self not in _ALL_SERVERS:
            _ALL_SERVERS.append(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise RuntimeError(
                    f"tafel exited with code {code} during startup:\n{self.log_tail(80)}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.kill9()
        raise RuntimeError(f"tafel did not accept connections within {timeout}s:\n{self.log_tail(80)}")

    def default_ops_args(self) -> list:
        """The admin listener on this server's own port, and no drain wait on SIGTERM (tests
        stop servers often), unless ``extra_args`` say otherwise."""
        out = []
        if not any(a in self.extra_args for a in ("--admin-port", "--no-admin")):
            out += ["--admin-port", str(self.admin_port)]
        if "--drain-seconds" not in self.extra_args:
            out += ["--drain-seconds", "0"]
        return out

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> Optional[int]:
        """Graceful shutdown (SIGTERM). Returns the exit code; SIGKILLs after ``timeout``."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                self._close_log()
                raise AssertionError(f"tafel did not exit within {timeout}s of SIGTERM")
        self._close_log()
        return proc.returncode

    def kill9(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        self._close_log()

    def restart(self, graceful: bool = True) -> None:
        if graceful:
            self.stop()
        else:
            self.kill9()
        self.start()

    def _close_log(self):
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    # Logs -------------------------------------------------------------------
    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_text(self, since: int = 0) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60, since: int = 0) -> str:
        return "\n".join(self.log_text(since).splitlines()[-lines:])


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def _workdir():
    d = Path(tempfile.mkdtemp(prefix="tafel-it-"))
    yield d
    if os.environ.get("TAFEL_KEEP_DATA"):
        print(f"\nkept test data in {d}")
    else:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def server(_workdir):
    srv = TafelServer(_workdir / "shared-data", _workdir / "shared-tafel.log")
    srv.start()
    yield srv
    code = srv.stop()
    if code not in (0, None):
        print(f"\nWARNING: shared tafel exited with code {code} after SIGTERM:\n{srv.log_tail(40)}")


@pytest.fixture
def fresh_server(_workdir, request):
    name = uuid.uuid4().hex[:8]
    srv = TafelServer(_workdir / f"data-{name}", _workdir / f"tafel-{name}.log")
    srv.start()
    yield srv
    srv.kill9()


@pytest.fixture
def raw(server) -> RawClient:
    return server.raw


@pytest.fixture
def service(server):
    from azure.data.tables import TableServiceClient

    with TableServiceClient.from_connection_string(server.conn_str) as svc:
        yield svc


@pytest.fixture
def table_name() -> str:
    return unique_table_name()


@pytest.fixture
def table(service, table_name):
    """A freshly created table (TableClient over 127.0.0.1, i.e. merges go as PATCH)."""
    client = service.create_table(table_name)
    yield client
    try:
        service.delete_table(table_name)
    except Exception:  # noqa: BLE001 - best-effort cleanup
        pass


@pytest.fixture
def raw_table(raw, table_name):
    """A freshly created table name, created with raw HTTP."""
    r = raw.create_table(table_name)
    assert r.status_code == 201, (r.status_code, r.text)
    yield table_name
    try:
        raw.delete_table(table_name)
    except Exception:  # noqa: BLE001
        pass


@pytest.fixture(autouse=True)
def _log_marks(request):
    request.node._tafel_log_marks = {id(s): s.log_size() for s in _ALL_SERVERS}
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed:
        return
    marks = getattr(item, "_tafel_log_marks", {})
    for srv in list(_ALL_SERVERS):
        since = marks.get(id(srv), 0)
        text = srv.log_tail(200, since=since)
        if not text and not srv.is_running():
            continue
        state = "running" if srv.is_running() else (
            "stopped" if srv.proc is None else f"EXITED with code {srv.proc.returncode}"
        )
        rep.sections.append((f"tafel stderr (port {srv.port}, {state}, log {srv.log_path})", text or "(nothing logged)"))


def bulk_insert(raw: RawClient, table: str, entities: Sequence[dict], threads: int = 16) -> None:
    """Inserts entities concurrently with single-entity requests (no batches)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(e):
        r = raw.insert(table, e, headers={"Prefer": "return-no-content"})
        return r.status_code, r.text

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(one, entities))
    bad = [(e.get("PartitionKey"), e.get("RowKey"), res) for e, res in zip(entities, results) if res[0] != 204]
    assert not bad, f"{len(bad)} inserts failed, first: {bad[:3]}"


def sdk_error_code(exc) -> Optional[str]:
    """The service error code of an azure-core HttpResponseError. Some SDK paths (e.g.
    create_entity) re-raise the undecoded error, so fall back to the response itself."""
    code = getattr(exc, "error_code", None)
    if code is not None:
        return str(getattr(code, "value", code))
    resp = getattr(exc, "response", None)
    if resp is None:
        return None
    try:
        return jsonlib.loads(resp.text())["odata.error"]["code"]
    except Exception:  # noqa: BLE001
        return resp.headers.get("x-ms-error-code")
