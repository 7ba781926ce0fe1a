"""HTTPS on the Table API port: `tafel cert`, --cert/--key and --pfx, the SDK over TLS,
SAS `spr=https`, plain HTTP on the TLS port, TLS versions, and SIGHUP reload."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import ssl
import subprocess
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import requests
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableClient, TableSasPermissions, TableServiceClient, generate_table_sas
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from conftest import ACCOUNT, KEY, TafelServer, free_port, sdk_error_code, tafel_binary, unique_table_name


def tafel(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAFEL_")}
    return subprocess.run([str(tafel_binary()), *args], capture_output=True, text=True, env=env, timeout=60)


def make_cert(out: Path, *names: str) -> subprocess.CompletedProcess:
    r = tafel("cert", "--out", str(out), *(a for n in names for a in ("--name", n)))
    assert r.returncode == 0, r.stderr
    return r


def sans(pem: bytes) -> list:
    cert = x509.load_pem_x509_certificate(pem)
    return [str(n) for n in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value]


@pytest.fixture(scope="module")
def tls_dir(_workdir) -> Path:
    out = _workdir / f"tls-{uuid.uuid4().hex[:6]}"
    make_cert(out)
    return out


@pytest.fixture(scope="module")
def https_server(_workdir, tls_dir):
    srv = TafelServer(
        _workdir / f"data-tls-{uuid.uuid4().hex[:6]}",
        _workdir / "tafel-tls.log",
        extra_args=["--cert", str(tls_dir / "cert.pem"), "--key", str(tls_dir / "key.pem")],
    )
    srv.ca_file = tls_dir / "ca.pem"
    srv.start()
    yield srv
    srv.stop()


def sdk(srv: TafelServer) -> TableServiceClient:
    return TableServiceClient.from_connection_string(srv.conn_str, connection_verify=str(srv.ca_file))


def test_tafel_cert_makes_a_ca_and_a_certificate_for_the_local_names_and_reuses_the_ca(tmp_path):
    r = make_cert(tmp_path, "tafel.test", "10.1.2.3")
    assert "Made a new CA" in r.stdout
    for hint in ("connection_verify", "NODE_EXTRA_CA_CERTS", "update-ca-certificates", "--cert"):
        assert hint in r.stdout, hint
    for name in ("ca.pem", "ca-key.pem", "cert.pem", "key.pem"):
        assert (tmp_path / name).stat().st_size > 0
    assert (tmp_path / "key.pem").stat().st_mode & 0o077 == 0
    assert (tmp_path / "ca-key.pem").stat().st_mode & 0o077 == 0
    names = sans((tmp_path / "cert.pem").read_bytes())
    for want in ("localhost", "127.0.0.1", "::1", "tafel.test", "10.1.2.3"):
        assert any(want in n for n in names), (want, names)
    ca_before = (tmp_path / "ca.pem").read_bytes()
    r = make_cert(tmp_path)
    assert "Reused the CA" in r.stdout
    assert (tmp_path / "ca.pem").read_bytes() == ca_before
    # The new certificate chains to the same CA.
    ca = x509.load_pem_x509_certificate(ca_before)
    leaf = x509.load_pem_x509_certificate((tmp_path / "cert.pem").read_bytes())
    leaf.verify_directly_issued_by(ca)


def test_the_sdk_quickstart_over_https_with_shared_key(https_server):
    name = unique_table_name("tls")
    with sdk(https_server) as svc:
        table = svc.create_table(name)
        table.create_entity({"PartitionKey": "p", "RowKey": "1", "V": "over TLS"})
        table.submit_transaction([("create", {"PartitionKey": "p", "RowKey": "2"}), ("upsert", {"PartitionKey": "p", "RowKey": "1", "W": 2})])
        rows = list(table.query_entities("PartitionKey eq 'p'"))
        assert [(e["RowKey"], e.get("V"), e.get("W")) for e in rows] == [("1", "over TLS", 2), ("2", None, None)]
        svc.delete_table(name)


def test_odata_urls_and_location_over_https_say_https(https_server):
    raw = https_server.raw
    name = unique_table_name("tlsurl")
    full = "application/json;odata=fullmetadata"
    r = raw.create_table(name, accept=full)
    assert r.status_code == 201, r.text
    base = f"https://127.0.0.1:{https_server.port}/{ACCOUNT}"
    assert r.json()["odata.metadata"] == f"{base}/$metadata#Tables/@Element"
    assert r.json()["odata.id"] == f"{base}/Tables('{name}')"
    assert r.headers["Location"] == f"{base}/Tables('{name}')"
    r = raw.insert(name, {"PartitionKey": "p", "RowKey": "r"}, accept=full)
    assert r.status_code == 201, r.text
    assert r.json()["odata.metadata"] == f"{base}/$metadata#{name}/@Element"
    assert r.json()["odata.id"] == f"{base}/{name}(PartitionKey='p',RowKey='r')"
    assert r.headers["Location"] == f"{base}/{name}(PartitionKey='p',RowKey='r')"
    q = raw.get(f"/{name}()", accept=full).json()
    assert q["odata.metadata"] == f"{base}/$metadata#{name}"
    assert q["value"][0]["odata.id"] == f"{base}/{name}(PartitionKey='p',RowKey='r')"
    assert raw.get("/Tables", accept=full).json()["odata.metadata"] == f"{base}/$metadata#Tables"
    # Host-style too.
    h = raw.get(f"/{name}()", accept=full, host_style=True).json()
    assert h["odata.metadata"] == f"https://{ACCOUNT}.table.localhost:{https_server.port}/$metadata#{name}"
    assert raw.delete_table(name).status_code == 204


def test_a_sas_limited_to_https_works_over_https_and_is_refused_over_http(https_server, server):
    name = unique_table_name("spr")
    expiry = datetime.now(timezone.utc) + timedelta(hours=1)
    sas = generate_table_sas(
        AzureNamedKeyCredential(ACCOUNT, KEY), name, permission=TableSasPermissions(read=True, add=True), expiry=expiry, protocol="https"
    )
    assert "spr=https" in sas
    for srv in (https_server, server):
        verify = str(srv.ca_file) if srv.ca_file else True
        TableServiceClient.from_connection_string(srv.conn_str, connection_verify=verify).create_table(name)
    over_tls = TableClient(https_server.url, name, credential=AzureSasCredential(sas), connection_verify=str(https_server.ca_file))
    over_tls.create_entity({"PartitionKey": "p", "RowKey": "1"})
    assert [e["RowKey"] for e in over_tls.list_entities()] == ["1"]
    plain = TableClient(server.url, name, credential=AzureSasCredential(sas))
    with pytest.raises(HttpResponseError) as err:
        list(plain.list_entities())
    assert err.value.status_code == 403
    assert sdk_error_code(err.value) == "AuthorizationProtocolMismatch"


def test_plain_http_to_the_tls_port_gets_a_400_that_says_so_at_once(https_server):
    started = time.monotonic()
    r = requests.get(f"http://127.0.0.1:{https_server.port}/{ACCOUNT}/Tables", timeout=10)
    assert r.status_code == 400
    assert "HTTPS" in r.text and "https://" in r.text
    assert time.monotonic() - started < 5
    # The server goes on serving TLS.
    assert https_server.raw.get("/Tables").status_code == 200


def handshake(port: int, ca: Path, version: ssl.TLSVersion) -> str:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.minimum_version = ctx.maximum_version = version
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        with ctx.wrap_socket(sock, server_hostname="localhost") as tls:
            return tls.version()


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_tls_1_2_and_1_3_are_served_and_older_versions_refused(https_server):
    assert handshake(https_server.port, https_server.ca_file, ssl.TLSVersion.TLSv1_3) == "TLSv1.3"
    assert handshake(https_server.port, https_server.ca_file, ssl.TLSVersion.TLSv1_2) == "TLSv1.2"
    with pytest.raises((ssl.SSLError, ConnectionError)):
        handshake(https_server.port, https_server.ca_file, ssl.TLSVersion.TLSv1_1)


def test_a_pkcs12_file_serves_https_and_a_wrong_password_stops_the_start(_workdir, tls_dir, tmp_path):
    key = serialization.load_pem_private_key((tls_dir / "key.pem").read_bytes(), password=None)
    cert = x509.load_pem_x509_certificate((tls_dir / "cert.pem").read_bytes())
    ca = x509.load_pem_x509_certificate((tls_dir / "ca.pem").read_bytes())
    pfx = tmp_path / "server.pfx"
    pfx.write_bytes(
        pkcs12.serialize_key_and_certificates(b"tafel", key, cert, [ca], serialization.BestAvailableEncryption(b"s3cret"))
    )
    srv = TafelServer(tmp_path / "data", tmp_path / "tafel.log", extra_args=["--pfx", str(pfx), "--pwd", "s3cret"])
    srv.ca_file = tls_dir / "ca.pem"
    srv.start()
    try:
        assert srv.raw.get("/Tables").status_code == 200
    finally:
        srv.stop()
    r = tafel("serve", "--port", str(free_port()), "--no-admin", "--data-dir", str(tmp_path / "d2"), "--pfx", str(pfx), "--pwd", "wrong")
    assert r.returncode != 0
    assert str(pfx) in r.stderr and "password" in r.stderr
    assert "wrong" not in r.stderr.replace(str(tmp_path), "")


def test_a_missing_certificate_file_stops_the_start_and_is_named(tmp_path):
    r = tafel("serve", "--port", str(free_port()), "--no-admin", "--data-dir", str(tmp_path), "--cert", "/nonexistent/c.pem", "--key", "/nonexistent/k.pem")
    assert r.returncode != 0
    assert "/nonexistent/c.pem" in r.stderr
    r = tafel("serve", "--port", str(free_port()), "--no-admin", "--data-dir", str(tmp_path), "--cert", "/nonexistent/c.pem")
    assert r.returncode != 0 and "--key" in r.stderr


def served_names(port: int, ca: Path) -> list:
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        with ctx.wrap_socket(sock, server_hostname="localhost") as tls:
            der = tls.getpeercert(binary_form=True)
    return sans(ssl.DER_cert_to_PEM_cert(der).encode())


def test_sighup_reloads_the_certificate_and_keeps_open_connections(_workdir, tmp_path):
    make_cert(tmp_path, "before.test")
    srv = TafelServer(tmp_path / "data", tmp_path / "tafel.log", extra_args=["--cert", str(tmp_path / "cert.pem"), "--key", str(tmp_path / "key.pem")])
    srv.ca_file = tmp_path / "ca.pem"
    srv.start()
    try:
        assert srv.raw.get("/Tables").status_code == 200
        assert "before.test" in str(served_names(srv.port, srv.ca_file))
        # An open keep-alive connection (unsigned: a 403 is an answer as good as any).
        conn = http.client.HTTPSConnection("127.0.0.1", srv.port, timeout=10, context=ssl.create_default_context(cafile=str(srv.ca_file)))
        path = f"/{ACCOUNT}/Tables"
        conn.request("GET", path)
        assert conn.getresponse().read() and conn.sock is not None
        open_socket = conn.sock
        make_cert(tmp_path, "after.test")
        os.kill(srv.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "after.test" not in str(served_names(srv.port, srv.ca_file)):
            assert time.monotonic() < deadline, "the new certificate was not served after SIGHUP"
            time.sleep(0.1)
        conn.request("GET", path)
        assert conn.getresponse().status == 403
        assert conn.sock is open_socket, "the open connection was dropped by the reload"
        conn.close()
        srv.wait_for_log("TLS certificate reloaded")
        # A certificate that does not load leaves the one in use.
        (tmp_path / "key.pem").write_text("not a key")
        os.kill(srv.proc.pid, signal.SIGHUP)
        srv.wait_for_log("keeping the one in use")
        assert srv.is_running()
        assert "after.test" in str(served_names(srv.port, srv.ca_file))
    finally:
        srv.stop()


def openssl_v1_pair(out: Path, cn: str = "localhost") -> tuple[Path, Path]:
    """A self-signed X.509 version 1 certificate, as `openssl x509 -req -signkey` makes one
    (OpenSSL 3.0: no extensions, so version 1)."""
    out.mkdir(parents=True, exist_ok=True)
    key, csr, cert = out / "v1.key", out / "v1.csr", out / "v1.pem"
    subprocess.run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-subj", f"/CN={cn}", "-out", str(csr)], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-signkey", str(key), "-days", "30",
                    "-out", str(cert)], check=True, capture_output=True)
    assert x509.load_pem_x509_certificate(cert.read_bytes()).version == x509.Version.v1
    return cert, key


def test_a_self_signed_v1_certificate_is_served_and_a_wrong_key_is_named_as_such(tmp_path):
    # Before: refused with "the key does not fit the certificate", which was not the cause
    # (rustls's check reads v3 certificates only).
    cert, key = openssl_v1_pair(tmp_path / "a")
    srv = TafelServer(tmp_path / "data", tmp_path / "tafel.log", extra_args=["--cert", str(cert), "--key", str(key)])
    srv.start()
    try:
        ctx = ssl.create_default_context(cafile=str(cert))
        ctx.check_hostname = False
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as raw_sock:
            with ctx.wrap_socket(raw_sock, server_hostname="localhost") as tls:
                assert tls.getpeercert(binary_form=True) == x509.load_pem_x509_certificate(cert.read_bytes()).public_bytes(serialization.Encoding.DER)
    finally:
        srv.stop()
    assert "X.509 version 1" in srv.log_path.read_text()
    # Another pair's key: now the message that says so is the true one.
    _, other_key = openssl_v1_pair(tmp_path / "b")
    r = tafel("serve", "--port", str(free_port()), "--no-admin", "--data-dir", str(tmp_path / "d2"),
              "--cert", str(cert), "--key", str(other_key))
    assert r.returncode != 0 and "the key does not fit the certificate" in r.stderr, r.stderr
