"""The configuration file (`--config tafel.toml`), `tafel config print` and `--version`."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path

import requests

from conftest import KEY, free_port, tafel_binary

SECRET_TOKEN = "tok-6f1c0e3a9b"
SECRET_PW = "pw-1b2c3d4e"


def run(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TAFEL_")}
    full_env.update(env or {})
    return subprocess.run(
        [str(tafel_binary()), *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=60
    )


def printed(out: str) -> dict:
    """`config print` lines as {key: (value text, source)}."""
    result = {}
    for line in out.splitlines():
        m = re.match(r"^([a-z-]+) = (.*?)\s+# (flag|env|file|default)$", line)
        if m:
            result[m.group(1)] = (m.group(2), m.group(3))
    return result


def test_version_names_the_commit_and_the_backends():
    r = run("--version")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(
        r"tafel \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(-dirty)?|unknown); backends: embedded, postgres\)\n", r.stdout
    ), r.stdout


def test_serve_with_the_backend_from_env_takes_its_url_as_a_flag(tmp_path):
    """Regression: with TAFEL_BACKEND=postgres in the environment, `tafel serve
    --postgres-url …` was refused for want of a --postgres-url: the top level's flags,
    reading the same environment, were checked too."""
    url = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    r = run("serve", "--postgres-url", url, "--data-dir", str(tmp_path), "--no-admin", env={"TAFEL_BACKEND": "postgres"})
    assert r.returncode != 0
    assert "required arguments were not provided" not in r.stderr, r.stderr
    assert "connecting to the" in r.stderr, r.stderr
    # Without the URL anywhere, the server still asks for it by name.
    r = run("serve", "--data-dir", str(tmp_path), env={"TAFEL_BACKEND": "postgres"})
    assert r.returncode == 2 and "--postgres-url" in r.stderr, r.stderr


def test_precedence_is_flag_then_env_then_file_then_default(tmp_path):
    cfg = tmp_path / "tafel.toml"
    cfg.write_text('port = 11111\nhost = "127.0.0.2"\ncache-mb = 64\ndrain-seconds = 9\nno-admin = true\n')
    r = run("config", "print", "--config", str(cfg), "--port", "33333", env={"TAFEL_PORT": "22222", "TAFEL_CACHE_MB": "32"})
    assert r.returncode == 0, r.stderr
    p = printed(r.stdout)
    assert p["port"] == ("33333", "flag")
    assert p["cache-mb"] == ("32", "env")
    assert p["host"] == ('"127.0.0.2"', "file")
    assert p["drain-seconds"] == ("9", "file")
    assert p["no-admin"] == ("true", "file")
    assert p["admin-port"] == ("10012", "default")
    r = run("config", "print", "--config", str(cfg), env={"TAFEL_PORT": "22222"})
    assert printed(r.stdout)["port"] == ("22222", "env")
    r = run("config", "print", "--config", str(cfg))
    assert printed(r.stdout)["port"] == ("11111", "file")


def test_config_print_lists_every_flag_and_masks_secrets(tmp_path):
    cfg = tmp_path / "tafel.toml"
    cfg.write_text(
        f'admin-token = "{SECRET_TOKEN}"\n'
        f'account = ["alpha:{KEY}", "beta:{KEY}"]\n'
        f'postgres-url = "postgresql://tafel:{SECRET_PW}@db.internal:5432/tafel"\n'
    )
    r = run("config", "print", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    for secret in (SECRET_TOKEN, KEY, SECRET_PW):
        assert secret not in r.stdout
    p = printed(r.stdout)
    assert p["admin-token"] == ('"********"', "file")
    assert p["account"] == ('["alpha:********", "beta:********"]', "file")
    assert p["postgres-url"][0] == '"postgresql://tafel:********@db.internal:5432/tafel"'
    # Every serve flag is there, under its own name.
    help_text = run("serve", "--help").stdout
    flags = set(re.findall(r"^\s+--([a-z][a-z-]+)", help_text, re.M)) - {"help", "config"}
    listed = set(p) | set(re.findall(r"^# ([a-z-]+) is not set", r.stdout, re.M))
    assert flags == listed, (flags ^ listed)
    # What config print prints is a file --config takes, meaning the same.
    again = tmp_path / "again.toml"
    again.write_text("\n".join(l for l in r.stdout.splitlines() if not l.startswith("#")) + "\n")
    r2 = run("config", "print", "--config", str(again))
    assert r2.returncode == 0, r2.stderr
    assert {k: v[0] for k, v in printed(r2.stdout).items()} == {k: v[0] for k, v in p.items()}


def test_unknown_keys_and_bad_values_are_refused_by_name(tmp_path):
    cfg = tmp_path / "tafel.toml"
    cfg.write_text("port = 10002\nprot = 10003\n")
    r = run("serve", "--config", str(cfg))
    assert r.returncode != 0
    assert "unknown key `prot`" in r.stderr
    cfg.write_text('port = "not a port"\n')
    r = run("serve", "--config", str(cfg))
    assert r.returncode != 0 and "--port" in r.stderr and "not a port" in r.stderr
    cfg.write_text("no-admin = 1\n")
    r = run("serve", "--config", str(cfg))
    assert r.returncode != 0 and "no-admin" in r.stderr and "true or false" in r.stderr
    cfg.write_text("config = 'other.toml'\n")
    assert "unknown key `config`" in run("serve", "--config", str(cfg)).stderr


def test_a_server_runs_from_its_config_file(tmp_path):
    port, admin_port = free_port(), free_port()
    log = tmp_path / "access.log"
    cfg = tmp_path / "tafel.toml"
    cfg.write_text(
        f'port = {port}\nadmin-port = {admin_port}\ndata-dir = "{tmp_path / "data"}"\n'
        f'access-log = "{log}"\nlog-format = "json"\ndrain-seconds = 0\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAFEL_")}
    env["TAFEL_CONFIG"] = str(cfg)
    proc = subprocess.Popen([str(tafel_binary())], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert requests.get(f"http://127.0.0.1:{admin_port}/ready", timeout=5).status_code == 200
        requests.get(f"http://127.0.0.1:{port}/devstoreaccount1/Tables", timeout=5)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert '"operation":"QueryTables"' in log.read_text()
