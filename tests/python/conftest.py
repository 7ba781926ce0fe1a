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

import json as jsonlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Optional, Sequence
from urllib.parse import urlsplit

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from ports import free_port  # noqa: F401 - re-exported: tests import it from conftest
from rawhttp import (  # noqa: F401 - re-exported: tests import these from conftest
    ACCOUNT,
    DEFAULT_VERSION,
    JSON_FULL,
    JSON_MINIMAL,
    JSON_NONE,
    KEY,
    QueryType,
    RawClient,
    assert_error,
    build_query,
    canonicalized_resource,
    entity_path,
    error_code_of,
    etag_for_timestamp,
    odata_key,
    shared_key_lite_string_to_sign,
    shared_key_string_to_sign,
    sign,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

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


def pg_ctl(action: str, mode: str = "immediate") -> None:
    """Stops (``immediate``: a crash, no clean shutdown; or ``fast``) or starts the suite's
    cluster (scripts/with-postgres). Skips without that cluster.

    A crash is preceded by a CHECKPOINT: the suite writes a lot, and replaying up to
    max_wal_size of log once took PostgreSQL past pg_ctl's wait on a loaded CI machine,
    leaving the cluster down for the tests after. The crash itself is unchanged."""
    ctl, data, opts = (os.environ.get(k) for k in ("TAFEL_TEST_PG_CTL", "TAFEL_TEST_PGDATA", "TAFEL_TEST_PG_OPTS"))
    if not ctl or not data or not opts:
        pytest.skip("needs scripts/with-postgres's cluster (TAFEL_TEST_PG_CTL, TAFEL_TEST_PGDATA)")
    log = Path(data).parent / "server.log"
    if action == "stop":
        subprocess.run(
            ["psql", "-v", "ON_ERROR_STOP=1", "-q", POSTGRES_ADMIN_URL, "-c", "CHECKPOINT"],
            check=True,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
        )
        cmd = [ctl, "-D", data, "-w", "-t", "120", "-m", mode, "stop"]
    else:
        cmd = [ctl, "-D", data, "-w", "-t", "300", "-l", str(log), "start", "-o", opts]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=330)
    if r.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-30:] if log.exists() else []
        raise RuntimeError(
            f"pg_ctl {action} exited {r.returncode}: {r.stdout}{r.stderr}\n--- server.log ---\n" + "\n".join(tail)
        )


def backend_args(database_url: Optional[str], backend: str = BACKEND) -> list:
    # Explicit either way: the server inherits TAFEL_BACKEND from the suite's environment.
    if backend != "postgres":
        return ["--backend", "embedded"]
    return ["--backend", "postgres", "--postgres-url", database_url or ""]


def tafel_binary() -> Path:
    env = os.environ.get("TAFEL_BIN")
    path = Path(env) if env else REPO_ROOT / "target" / "release" / "tafel"
    return path


@pytest.fixture
def small_disk(tmp_path):
    """Mounts a size-limited tmpfs — a real disk that fills up — and returns its path:
    `small_disk("160m")`. Needs root (the suite runs as root); skips without it. The
    embedded store's write-ahead log takes 128 MiB of a disk up front."""
    mounts = []

    def mount(size: str) -> Path:
        mnt = tmp_path / f"disk-{len(mounts)}"
        mnt.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
        mounts.append(mnt)
        return mnt

    yield mount
    for mnt in mounts:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def grow_disk(mnt: Path, size: str) -> None:
    """Frees space on a `small_disk`: makes it `size` large."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mnt)], check=True)


def unique_table_name(prefix: str = "t") -> str:
    # 3..63 chars, letters and digits, starts with a letter.
    return (prefix + uuid.uuid4().hex[:20])[:63]


# ---------------------------------------------------------------------------
# The server process
# ---------------------------------------------------------------------------


class TafelServer:
    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        port: Optional[int] = None,
        extra_args: Sequence[str] = (),
        backend: str = BACKEND,
    ):
        self.binary = tafel_binary()
        # The suite's backend unless a test needs a given one (a migration's source).
        self.backend = backend
        self.data_dir = Path(data_dir)
        self.log_path = Path(log_path)
        # A port we chose may be chosen again until the server first comes up; after that
        # restarts keep it, as clients hold its address.
        self._port_ours = port is None
        self._was_up = False
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

    def conn_str_for(self, host: str, account: str = ACCOUNT, key: str = KEY) -> str:
        return (
            f"DefaultEndpointsProtocol={self.scheme};AccountName={account};AccountKey={key};"
            f"TableEndpoint={self.scheme}://{host}:{self.port}/{account};"
        )

    # Lifecycle ---------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> None:
        # A port free_port() found may be taken by the time the server binds it (another
        # server, or a client's ephemeral port): a port of ours is then chosen again. The
        # Table API port stays once the server has been up, as restarts must keep it.
        for attempt in range(3):
            try:
                self._start_once(timeout)
                self._was_up = True
                return
            except RuntimeError as e:
                msg = str(e)
                if attempt == 2 or "Address already in use" not in msg:
                    raise
                admin_ours = not any(a in self.extra_args for a in ("--admin-port", "--no-admin"))
                if admin_ours and "binding the admin listener" in msg:
                    self.admin_port = free_port()
                elif self._port_ours and not self._was_up and f"binding 127.0.0.1:{self.port}" in msg:
                    self.port = free_port()
                else:
                    raise

    def _start_once(self, timeout: float) -> None:
        if not self.binary.exists():
            pytest.fail(
                f"tafel binary not found at {self.binary}; build it with "
                f"`cargo build --release -p tafel` or set TAFEL_BIN",
                pytrace=False,
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.backend == "postgres" and self.database_url is None:
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
            *backend_args(self.database_url, self.backend),
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
                raise RuntimeError(f"tafel exited with code {code} during startup:\n{self.startup_error()}")
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

    def wait_for_log(self, text: str, timeout: float = 10, since: int = 0) -> None:
        """Waits until the log holds `text`: the server acts first and logs after (a
        client can see a reloaded certificate before its line reaches the file)."""
        deadline = time.monotonic() + timeout
        while text not in self.log_text(since):
            assert time.monotonic() < deadline, f"{text!r} not logged within {timeout}s:\n{self.log_tail(20, since)}"
            time.sleep(0.05)

    def startup_error(self) -> str:
        """The log's last 80 lines before the error's stack backtrace (RUST_BACKTRACE=1), whose
        frames once pushed the error itself ("No space left on device") out of the tail shown."""
        lines = self.log_text().splitlines()
        if "Stack backtrace:" in lines:
            lines = lines[: len(lines) - lines[::-1].index("Stack backtrace:") - 1]
        return "\n".join(lines[-80:])


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


def scrape(server: TafelServer, token: str | None = None) -> dict:
    """Every sample of /metrics as {(name, sorted label pairs): value}."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = requests.get(server.admin_url + "/metrics", headers=headers, timeout=10)
    assert r.status_code == 200, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def index_url(server: TafelServer, table: str, prop: str | None = None) -> str:
    """The admin API's index listing of `table`, or its index on `prop`."""
    url = f"{server.admin_url}/accounts/{ACCOUNT}/tables/{table}/indexes"
    return url if prop is None else f"{url}/{prop}"


def index_listing(server: TafelServer, table: str) -> dict:
    """`table`'s indexes as the admin API lists them, by property."""
    r = requests.get(index_url(server, table), timeout=30)
    assert r.status_code == 200, (r.status_code, r.text)
    return {i["property"]: i for i in r.json()["indexes"]}


def wait_index_ready(server: TafelServer, table: str, prop: str, timeout: float = 120) -> dict:
    """Waits until the index on `prop` is ready (a table with data builds it online); its listing."""
    until = time.monotonic() + timeout
    while True:
        listed = index_listing(server, table)[prop]
        if listed["state"] == "ready":
            assert "progress" not in listed, listed
            return listed
        assert time.monotonic() < until, f"the index on {prop} is still building: {listed}"
        time.sleep(0.02)


def declare_index(server: TafelServer, table: str, prop: str, timeout: float = 120) -> dict:
    """Declares an index through the admin API and waits for its build (201 ready on a table
    without entities; 202 building, then ready): the PUT's answer, as listed once ready."""
    r = requests.put(index_url(server, table, prop), timeout=120)
    assert r.status_code in (201, 202), (r.status_code, r.text)
    made = r.json()
    assert made["state"] == ("ready" if r.status_code == 201 else "building"), made
    return {**made, **wait_index_ready(server, table, prop, timeout)}
