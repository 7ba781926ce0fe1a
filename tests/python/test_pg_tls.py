"""TLS from Tafel to the database, end to end: the real binary against the cluster
``scripts/with-postgres`` starts with a test CA (``TAFEL_TEST_PG_CA``). Its role in
``TAFEL_TEST_PG_SSL_URL`` is let in over TLS only, so a server that works there really
talks TLS to the database; the one in ``TAFEL_TEST_PG_CERT_URL`` also needs the client
certificate. Runs only with ``TAFEL_BACKEND=postgres``."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

from conftest import TafelServer, entity_path, postgres_only, unique_table_name

pytestmark = postgres_only

CA = os.environ.get("TAFEL_TEST_PG_CA", "")
SSL_URL = os.environ.get("TAFEL_TEST_PG_SSL_URL", "")
CERT_URL = os.environ.get("TAFEL_TEST_PG_CERT_URL", "")
CLIENT_CERT = os.environ.get("TAFEL_TEST_PG_CLIENT_CERT", "")
CLIENT_KEY = os.environ.get("TAFEL_TEST_PG_CLIENT_KEY", "")


@pytest.fixture(autouse=True)
def _tls_cluster():
    if not (CA and SSL_URL and CERT_URL):
        pytest.skip("the test cluster serves no TLS (scripts/with-postgres sets TAFEL_TEST_PG_CA etc.)")


def server(workdir, database_url: str, extra_args=()) -> TafelServer:
    tag = uuid.uuid4().hex[:6]
    srv = TafelServer(workdir / f"pgtls-data-{tag}", workdir / f"pgtls-{tag}.log", extra_args=extra_args)
    srv.database_url = database_url
    return srv


def table_and_entity_work(srv: TafelServer) -> None:
    name = unique_table_name("tls")
    assert srv.raw.create_table(name).status_code == 201
    assert srv.raw.insert(name, {"PartitionKey": "p", "RowKey": "r", "V": 7}).status_code == 201
    got = srv.raw.get(entity_path(name, "p", "r"))
    assert got.status_code == 200 and got.json()["V"] == 7


def failed_start(srv: TafelServer) -> str:
    """Starts ``srv``, which must exit with an error; returns what it said."""
    with pytest.raises(RuntimeError, match="exited with code [1-9]"):
        srv.start(timeout=30)
    # The whole log: a backtrace (RUST_BACKTRACE=1) may push the message out of the tail.
    return srv.log_text()


def test_verify_full_with_the_test_ca(_workdir):
    srv = server(_workdir, f"{SSL_URL}?sslmode=verify-full&sslrootcert={CA}")
    srv.start()
    try:
        table_and_entity_work(srv)
        assert "sslmode=verify-full" in srv.log_text()
    finally:
        srv.stop()


def test_client_certificate_through_the_flags(_workdir):
    args = ["--postgres-sslmode", "verify-full", "--postgres-sslrootcert", CA,
            "--postgres-sslcert", CLIENT_CERT, "--postgres-sslkey", CLIENT_KEY]
    srv = server(_workdir, CERT_URL, extra_args=args)
    srv.start()
    try:
        table_and_entity_work(srv)
    finally:
        srv.stop()


def test_a_wrong_ca_stops_the_start(_workdir, tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("needs openssl to make a second CA")
    other = tmp_path / "other-ca.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(tmp_path / "other-ca.key"), "-out", str(other), "-days", "1", "-subj", "/CN=not the test CA",
         "-addext", "basicConstraints=critical,CA:TRUE"],
        check=True, capture_output=True,
    )
    said = failed_start(server(_workdir, f"{SSL_URL}?sslmode=verify-full&sslrootcert={other}"))
    assert "connecting to the postgres backend" in said and "UnknownIssuer" in said, said


def test_a_missing_root_certificate_names_the_flag(_workdir):
    said = failed_start(server(_workdir, SSL_URL, extra_args=["--postgres-sslrootcert", "/nonexistent/ca.pem"]))
    assert "--postgres-sslrootcert" in said and "/nonexistent/ca.pem" in said, said


def test_a_bad_sslmode_in_the_url_is_named(_workdir):
    said = failed_start(server(_workdir, f"{SSL_URL}?sslmode=verify_full"))
    assert "unknown sslmode `verify_full`" in said, said
