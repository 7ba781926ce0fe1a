"""Azurite's command line and environment (docs/azurite.md): a command line from Azurite's
README with `tafel` in place of `azurite-table` serves the SDK; AZURITE_ACCOUNTS names the
accounts; --disableProductStyleUrl, --debug FILE, --cert FILE.pfx --pwd behave as Azurite's;
a flag Tafel cannot honour is refused by name; none of them clutters `--help`; a second
server on another table port starts beside the first. Also `tafel health`, the container's
HEALTHCHECK, wherever the admin listener went."""

from __future__ import annotations

import base64
import os
import uuid

import pytest
import requests
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError
from azure.data.tables import TableServiceClient
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from conftest import BACKEND, free_port, tafel_binary
from launch import Launched, run_tafel

# The command line, not the store: once, in the embedded pass (these servers run in memory).
pytestmark = pytest.mark.skipif(BACKEND != "embedded", reason="the command line; run once")


def sdk_round_trip(conn_str: str, **kw) -> None:
    name = "az" + uuid.uuid4().hex[:8]
    with TableServiceClient.from_connection_string(conn_str, **kw) as svc:
        table = svc.create_table(name)
        table.create_entity({"PartitionKey": "p", "RowKey": "r", "v": 1})
        assert table.get_entity("p", "r")["v"] == 1
        assert [e["RowKey"] for e in table.query_entities("v eq 1")] == ["r"]
        svc.delete_table(name)


def test_azurite_readme_command_line_serves_the_sdk(tmp_path):
    port = free_port()
    # azurite-table --tableHost 0.0.0.0 --tablePort 10002 --location ./azurite-data --inMemoryPersistence
    # (with the switches Azurite users add in CI); the admin listener moved off 10012 for the suite.
    srv = Launched(["--tableHost", "0.0.0.0", "--tablePort", str(port), "--location", "./azurite-data",
                    "--inMemoryPersistence", "--skipApiVersionCheck", "--loose", "--disableTelemetry", "--silent",
                    "--admin-port", str(free_port())], port, tmp_path)
    srv.wait_listening()
    try:
        sdk_round_trip(srv.conn_str())
    finally:
        assert srv.stop() == 0
    # In memory: --location made nothing, and the log says it was not used.
    assert not (tmp_path / "azurite-data").exists()
    assert "nothing is written to the data directory" in srv.output()


def test_azurites_program_names_are_names_of_serve(tmp_path):
    # As a compose `command:` written for Azurite's image passes them to Tafel's entrypoint.
    for program in ("azurite-table", "azurite"):
        port = free_port()
        srv = Launched([program, "--tableHost", "0.0.0.0", "--tablePort", str(port), "--inMemoryPersistence",
                        "--no-admin"], port, tmp_path)
        srv.wait_listening()
        try:
            sdk_round_trip(srv.conn_str())
        finally:
            srv.stop()
    assert "azurite" not in run_tafel("--help").stdout


def test_location_is_the_data_directory_as_in_azurite(tmp_path):
    port = free_port()
    srv = Launched(["--tablePort", str(port), "-l", "./azurite-data", "--no-admin"], port, tmp_path)
    srv.wait_listening()
    try:
        sdk_round_trip(srv.conn_str())
    finally:
        srv.stop()
    assert (tmp_path / "azurite-data" / "tafel.redb").exists()


def test_azurite_accounts_variable_names_the_accounts(tmp_path):
    k1, k2, k3 = (base64.b64encode(os.urandom(32)).decode() for _ in range(3))
    port = free_port()
    srv = Launched(["--tablePort", str(port), "--inMemoryPersistence", "--no-admin"], port, tmp_path,
                   env={"AZURITE_ACCOUNTS": f"account1:{k1}:{k2};account2:{k3}"})
    srv.wait_listening()
    try:
        sdk_round_trip(srv.conn_str("account1", k1))
        sdk_round_trip(srv.conn_str("account1", k2))
        sdk_round_trip(srv.conn_str("account2", k3))
        # As in Azurite, the emulator's own account is not served beside them.
        with pytest.raises((ClientAuthenticationError, HttpResponseError)):
            sdk_round_trip(srv.conn_str(), retry_total=0)
    finally:
        srv.stop()


def listed_through_a_dotted_host(port: int) -> requests.Response:
    """GET /devstoreaccount1/Tables, signed by an account SAS, with a Host that has dots (a
    proxy's, a compose service's): host-style reads the account as "tables"."""
    from datetime import datetime, timedelta, timezone

    from azure.core.credentials import AzureNamedKeyCredential
    from azure.data.tables import AccountSasPermissions, ResourceTypes, generate_account_sas

    from conftest import ACCOUNT, KEY

    sas = generate_account_sas(AzureNamedKeyCredential(ACCOUNT, KEY), ResourceTypes(service=True, container=True, object=True),
                               AccountSasPermissions(read=True, list=True),
                               datetime.now(timezone.utc) + timedelta(hours=1))
    return requests.get(f"http://127.0.0.1:{port}/{ACCOUNT}/Tables?{sas}",
                        headers={"Host": f"tables.ci.example:{port}", "Accept": "application/json"}, timeout=10)


def test_disable_product_style_url_takes_the_account_from_the_path(tmp_path):
    port = free_port()
    path_only = Launched(["--tablePort", str(port), "--inMemoryPersistence", "--no-admin", "--disableProductStyleUrl"],
                         port, tmp_path)
    path_only.wait_listening()
    try:
        r = listed_through_a_dotted_host(port)
        assert r.status_code == 200, r.text
        sdk_round_trip(path_only.conn_str())
    finally:
        path_only.stop()
    port = free_port()
    default = Launched(["--tablePort", str(port), "--inMemoryPersistence", "--no-admin"], port, tmp_path)
    default.wait_listening()
    try:
        assert listed_through_a_dotted_host(port).status_code != 200
    finally:
        default.stop()


def test_debug_writes_a_debug_log_to_the_file(tmp_path):
    port = free_port()
    srv = Launched(["--tablePort", str(port), "--inMemoryPersistence", "--no-admin", "--debug", "debug.log"],
                   port, tmp_path)
    srv.wait_listening()
    try:
        sdk_round_trip(srv.conn_str())
    finally:
        srv.stop()
    text = (tmp_path / "debug.log").read_text()
    assert "DEBUG" in text and "listening on" in text


def test_debug_file_keeps_the_console_log(tmp_path):
    # #57: --debug FILE once took the log off the console, so `podman logs` was empty
    # and a wait for "listening on" never matched.
    port = free_port()
    srv = Launched(["--tablePort", str(port), "--inMemoryPersistence", "--no-admin", "-d", "debug.log"],
                   port, tmp_path)
    srv.wait_listening()
    try:
        sdk_round_trip(srv.conn_str())
    finally:
        srv.stop()
    console = srv.output()
    assert "listening on" in console and "DEBUG" not in console, console
    assert "DEBUG" in (tmp_path / "debug.log").read_text()


def test_azurite_version_flags_print_the_version():
    # #57: `azurite-table --version` (a script's check that the emulator is installed) was refused.
    for args in (["azurite-table", "--version"], ["azurite-table", "-v"], ["azurite", "-v"], ["-v"],
                 ["--version"], ["serve", "--version"]):
        r = run_tafel(*args)
        assert r.returncode == 0 and "0.1.0" in r.stdout, (args, r.stdout, r.stderr)


def test_extent_memory_limit_caps_the_in_memory_store(tmp_path):
    port = free_port()
    srv = Launched(["azurite", "--tablePort", str(port), "--inMemoryPersistence", "--extentMemoryLimit", "64.5",
                    "--no-admin"], port, tmp_path)
    srv.wait_listening()
    try:
        sdk_round_trip(srv.conn_str())
    finally:
        srv.stop()
    r = run_tafel("--extentMemoryLimit", "0", "--inMemoryPersistence", "--no-admin", cwd=tmp_path)
    assert r.returncode != 0 and "megabytes" in r.stderr, r.stderr


def test_a_second_tafel_on_another_table_port_starts(tmp_path):
    # #57: both wanted admin port 10012, and the second exited "Address already in use".
    # Given table ports and nothing else, both start; each logs where its admin listener is.
    servers = []
    try:
        for i in range(2):
            port = free_port()
            cwd = tmp_path / f"s{i}"
            cwd.mkdir()
            srv = Launched(["--inMemoryPersistence", "--tablePort", str(port)], port, cwd)
            servers.append(srv)
            srv.wait_listening()
            sdk_round_trip(srv.conn_str())
        admins = []
        for srv in servers:
            import re
            import time
            deadline = time.monotonic() + 10
            while not (m := re.search(r"admin listener on 127\.0\.0\.1:(\d+)", srv.output())):
                assert time.monotonic() < deadline, srv.output()
                time.sleep(0.05)
            admins.append(int(m.group(1)))
            assert requests.get(f"http://127.0.0.1:{admins[-1]}/ready", timeout=5).status_code == 200
        assert admins[0] != admins[1]
        # An admin port asked for that is taken still fails, saying which and why.
        r = run_tafel("--inMemoryPersistence", "--tablePort", str(free_port()), "--admin-port", str(admins[0]),
                      cwd=tmp_path)
        assert r.returncode != 0 and f"binding the admin listener 127.0.0.1:{admins[0]}" in r.stderr, r.stderr
        assert "Address already in use" in r.stderr, r.stderr
    finally:
        for srv in servers:
            srv.stop()


def test_cert_with_pwd_is_a_pkcs12_file_as_azurite_takes_it(tmp_path):
    r = run_tafel("cert", "--out", str(tmp_path / "tls"))
    assert r.returncode == 0, r.stderr
    tls = tmp_path / "tls"
    key = serialization.load_pem_private_key((tls / "key.pem").read_bytes(), password=None)
    cert = x509.load_pem_x509_certificate((tls / "cert.pem").read_bytes())
    pfx = tmp_path / "server.pfx"
    pfx.write_bytes(pkcs12.serialize_key_and_certificates(b"t", key, cert, None, serialization.BestAvailableEncryption(b"pw")))
    port = free_port()
    srv = Launched(["--tablePort", str(port), "--inMemoryPersistence", "--no-admin", "--cert", str(pfx), "--pwd", "pw",
                    "--oauth", "basic"], port, tmp_path)
    srv.wait_listening()
    try:
        sdk_round_trip(srv.conn_str(scheme="https", host="localhost"), connection_verify=str(tls / "ca.pem"))
    finally:
        srv.stop()
    # --cert alone names neither a key nor a password: said so, not a confusing TLS error.
    r = run_tafel("--tablePort", str(free_port()), "--inMemoryPersistence", "--no-admin", "--cert", str(tls / "cert.pem"))
    assert r.returncode != 0 and "--cert needs --key" in r.stderr, r.stderr


def test_flags_tafel_cannot_honour_are_refused_by_name(tmp_path):
    # The all-in-one `azurite` command's blob and queue flags: Tafel has no such service.
    r = run_tafel("--blobHost", "0.0.0.0", "--queueHost", "0.0.0.0", "--tableHost", "0.0.0.0", "--loose",
                  "--inMemoryPersistence", "--no-admin", "--tablePort", str(free_port()), cwd=tmp_path)
    assert r.returncode != 0, r.stderr
    assert "--blobHost is Azurite's flag" in r.stderr and "Table service only" in r.stderr, r.stderr
    # A flag Azurite does not have either: clap's own refusal, naming it.
    r = run_tafel("--tableHostt", "0.0.0.0", cwd=tmp_path)
    assert r.returncode != 0 and "--tableHostt" in r.stderr, r.stderr
    r = run_tafel("--blobKeepAliveTimeout", "5", "--inMemoryPersistence", "--no-admin", cwd=tmp_path)
    assert r.returncode != 0 and "--blobKeepAliveTimeout is Azurite's flag" in r.stderr, r.stderr


def test_table_keep_alive_timeout_sets_the_idle_connection_timeout(tmp_path):
    import socket
    import time

    port = free_port()
    srv = Launched(["--tablePort", str(port), "--inMemoryPersistence", "--no-admin", "--tableKeepAliveTimeout", "1"],
                   port, tmp_path)
    srv.wait_listening()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            start = time.monotonic()
            assert s.recv(1) == b""  # closed by the server, idle
            assert time.monotonic() - start < 5
    finally:
        srv.stop()


def test_azurite_flags_are_hidden_from_help():
    r = run_tafel("--help")
    assert r.returncode == 0
    for flag in ("tableHost", "inMemoryPersistence", "skipApiVersionCheck", "location"):
        assert flag not in r.stdout
    assert "--in-memory" in r.stdout


def test_health_says_ready_then_not_when_the_server_drains_or_is_gone(tmp_path):
    import threading
    import time

    # A request held in flight (a fault rule's delay) keeps the drain going while health asks.
    (tmp_path / "faults.toml").write_text('[[rule]]\ntable = "slow"\noperation = "InsertEntity"\ndelay-ms = 3000\n')
    port, admin = free_port(), free_port()
    srv = Launched(["serve", "--in-memory", "--port", str(port), "--admin-port", str(admin), "--drain-seconds", "10",
                    "--faults", "faults.toml"], port, tmp_path)
    srv.wait_listening()
    try:
        ok = run_tafel("health", "--admin-port", str(admin))
        assert ok.returncode == 0, ok.stderr
        # The container's variables find it too: an unspecified admin host is probed on loopback.
        ok = run_tafel("health", env={"TAFEL_ADMIN_HOST": "0.0.0.0", "TAFEL_ADMIN_PORT": str(admin)})
        assert ok.returncode == 0, ok.stderr
        table = TableServiceClient.from_connection_string(srv.conn_str(), retry_total=0).create_table("slow")
        slow = threading.Thread(target=lambda: table.create_entity({"PartitionKey": "p", "RowKey": "r"}))
        slow.start()
        time.sleep(0.5)
        srv.proc.send_signal(15)
        deadline = time.monotonic() + 3
        while True:
            draining = run_tafel("health", "--admin-port", str(admin))
            if draining.returncode != 0 or time.monotonic() > deadline:
                break
        assert draining.returncode == 1 and "draining" in draining.stderr, draining.stderr
        slow.join()
    finally:
        srv.stop()
    gone = run_tafel("health", "--admin-port", str(admin))
    assert gone.returncode == 1 and "not ready" in gone.stderr
    assert tafel_binary().exists()


def test_health_follows_the_listeners_file_however_the_server_was_configured(tmp_path):
    # #57: the image's HEALTHCHECK probed 10012 forever when an argument moved or removed
    # the admin listener. The server writes where it listens; health reads that.
    listeners = tmp_path / "tafel.listeners"
    env = {"TAFEL_LISTENERS_FILE": str(listeners)}
    missing = run_tafel("health", env=env)
    assert missing.returncode == 1 and "has not written where it listens" in missing.stderr, missing.stderr
    port, admin = free_port(), free_port()
    srv = Launched(["serve", "--in-memory", "--port", str(port), "--admin-port", str(admin)], port, tmp_path, env=env)
    srv.wait_listening()
    try:
        ok = run_tafel("health", env=env)
        assert ok.returncode == 0, ok.stderr
        assert f"admin=127.0.0.1:{admin}" in listeners.read_text()
    finally:
        srv.stop()
    assert not listeners.exists(), "removed at exit"
    port = free_port()
    srv = Launched(["serve", "--in-memory", "--port", str(port), "--no-admin"], port, tmp_path, env=env)
    srv.wait_listening()
    try:
        ok = run_tafel("health", env=env)
        assert ok.returncode == 0 and "no admin listener (--no-admin)" in ok.stderr, ok.stderr
    finally:
        srv.stop()
    gone = run_tafel("health", env=env)
    assert gone.returncode == 1
