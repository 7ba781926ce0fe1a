"""The container image (Containerfile, scripts/image), built and run with podman: the SDK
against the published port, data surviving a new container on the same volume, `podman
stop` draining within its grace period with no acknowledged write lost, the HEALTHCHECK
turning healthy, the server running as a non-root user, and --in-memory leaving nothing
behind. Podman runs here as CI runs it: rootful, vfs storage and runc, its storage and
configuration in a temporary directory (nothing of the machine's is changed)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests
from azure.core.exceptions import HttpResponseError, ServiceRequestError
from azure.data.tables import TableServiceClient

from conftest import ACCOUNT, BACKEND, KEY, REPO_ROOT, free_port, tafel_binary
from doc_recipes import commands, recipe

HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}

pytestmark = pytest.mark.skipif(BACKEND != "embedded", reason="the image's own store; run once")


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    exe = shutil.which("podman")
    if exe is None or os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI runs the container tests: podman (and root) are required (.ci/run installs it)")
        pytest.skip("podman is not installed, or not root")
    work = tmp_path_factory.mktemp("podman")
    conf = work / "containers.conf"
    # The settings docs/containers.md gives for a host like this one.
    conf.write_text(recipe("containers.md", "podman-containers-conf"))
    wrapper = work / "podman"
    wrapper.write_text(
        f"#!/bin/sh\nexec env CONTAINERS_CONF={conf} {exe} --root {work}/root --runroot {work}/run "
        f"--storage-driver vfs --runtime runc \"$@\"\n")
    wrapper.chmod(0o755)
    # `docker` and `podman` on the recipes' PATH are this storage's podman.
    shims = work / "bin"
    shims.mkdir()
    for name in ("docker", "podman"):
        (shims / name).symlink_to(wrapper)
    # This storage is the session's own: the docs' `tafel:dev` is the image under test.
    tag = "tafel:dev"
    env = {**os.environ, "CONTAINER_ENGINE": str(wrapper), "TAFEL_BIN": str(tafel_binary()),
           "PATH": f"{shims}:{tafel_binary().parent}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    built = subprocess.run(["bash", "-euo", "pipefail", "-c", recipe("containers.md", "build-image")],
                           cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]

    def run(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        r = subprocess.run([str(wrapper), *args], capture_output=True, text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, f"podman {' '.join(args)}: {r.stderr[-3000:]}"
        return r

    run.tag = tag
    run.wrapper = str(wrapper)
    run.env = env
    yield run
    # Only this storage: its containers, volumes and images, then the directory.
    run("rm", "-a", "-f", check=False)
    run("volume", "prune", "-f", check=False)
    run("rmi", "-a", "-f", check=False)
    shutil.rmtree(work / "root", ignore_errors=True)


def conn_str(port: int) -> str:
    return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"TableEndpoint=http://127.0.0.1:{port}/{ACCOUNT};")


def start(podman, name: str, port: int, *args: str, volume: str | None = None) -> None:
    vol = ["-v", f"{volume}:/data"] if volume else []
    podman("run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:10002", *vol, podman.tag, *args)
    deadline = time.monotonic() + 30
    while True:
        try:
            with TableServiceClient.from_connection_string(conn_str(port), retry_total=0) as svc:
                list(svc.list_tables())
            return
        except (ServiceRequestError, HttpResponseError):
            if time.monotonic() > deadline:
                raise AssertionError(podman("logs", name, check=False).stderr[-3000:])
            time.sleep(0.1)


def test_the_image_serves_the_sdk_as_a_non_root_user_and_turns_healthy(podman):
    port = free_port()
    start(podman, "basic", port)
    with TableServiceClient.from_connection_string(conn_str(port)) as svc:
        table = svc.create_table("containers")
        table.create_entity({"PartitionKey": "p", "RowKey": "1", "v": "hello"})
        assert table.get_entity("p", "1")["v"] == "hello"
    # PID 1 is tafel, as the image's user.
    top = podman("top", "basic", "user", "pid", "args").stdout.split("\n")[1].split()
    assert top[:3] == ["tafel", "1", "/tafel"], top
    info = json.loads(podman("inspect", "basic").stdout)[0]
    assert info["Config"]["User"] == "10001:10001"
    # The HEALTHCHECK (`tafel health`, no shell in the image), run as the engine runs it.
    assert podman("healthcheck", "run", "basic", check=False).returncode == 0
    status = json.loads(podman("inspect", "basic").stdout)[0]["State"]["Health"]["Status"]
    assert status == "healthy"
    # A browser opening the Table port's root from the host is not sent to the container's
    # loopback (#57): it is told how to reach the explorer. The SDK's requests are untouched.
    page = requests.get(f"http://127.0.0.1:{port}/", headers=HTML, allow_redirects=False, timeout=5)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html"), page.status_code
    assert "TAFEL_ADMIN_HOST=0.0.0.0" in page.text and "-p 10012:10012" in page.text, page.text
    labels = json.loads(podman("image", "inspect", podman.tag).stdout)[0]["Labels"]
    assert labels["org.opencontainers.image.version"] == "0.1.0"
    assert len(labels["org.opencontainers.image.revision"]) == 40
    assert "org.opencontainers.image.source" in labels
    # Idle, it stops at once on SIGTERM: no drain to wait out (#57).
    began = time.monotonic()
    podman("stop", "-t", "15", "basic")
    took = time.monotonic() - began
    assert json.loads(podman("inspect", "basic").stdout)[0]["State"]["ExitCode"] == 0
    assert took < 3, took
    podman("rm", "-f", "basic")


def test_the_healthcheck_follows_an_admin_listener_moved_or_turned_off_by_arguments(podman):
    # #57: `tafel health` probed 10012 whatever the arguments said, and never passed.
    for name, args in (("moved", ["serve", "--in-memory", "--admin-port", "11012"]),
                       ("noadmin", ["serve", "--in-memory", "--no-admin"]),
                       ("azurite", ["azurite-table", "--tableHost", "0.0.0.0", "--inMemoryPersistence"])):
        start(podman, name, free_port(), *args)
        check = podman("healthcheck", "run", name, check=False)
        assert check.returncode == 0, (name, check.stdout, check.stderr)
        assert json.loads(podman("inspect", name).stdout)[0]["State"]["Health"]["Status"] == "healthy"
        podman("rm", "-f", name)


def test_a_root_owned_bind_mount_says_what_to_do(podman, tmp_path):
    # #57: "embedded store: Permission denied (os error 13)", and nothing more.
    data = tmp_path / "root-owned"
    data.mkdir(mode=0o755)
    os.chown(data, 0, 0)
    r = podman("run", "--name", "perm", "-v", f"{data}:/data", podman.tag, check=False, timeout=60)
    assert r.returncode != 0
    said = r.stdout + r.stderr
    assert "/data is not writable" in said and "uid 10001" in said and "chown -R 10001:10001" in said, said
    assert "--user" in said
    podman("rm", "-f", "perm")
    # As the message says: given to the image's user, it serves.
    os.chown(data, 10001, 10001)
    podman("run", "-d", "--name", "perm", "-v", f"{data}:/data", podman.tag)
    deadline = time.monotonic() + 30
    while not (data / "tafel.redb").exists():
        assert time.monotonic() < deadline, podman("logs", "perm", check=False).stderr
        time.sleep(0.1)
    podman("rm", "-f", "perm")


def test_stop_drains_in_its_grace_period_and_a_new_container_on_the_volume_has_every_acknowledged_write(podman):
    port = free_port()
    podman("volume", "create", "kept")
    start(podman, "first", port, volume="kept")
    acknowledged, stop_writing = [], threading.Event()

    def writer():
        with TableServiceClient.from_connection_string(conn_str(port), retry_total=0) as svc:
            table = svc.create_table_if_not_exists("kept")
            i = 0
            while not stop_writing.is_set():
                try:
                    table.create_entity({"PartitionKey": "p", "RowKey": f"{i:06d}"})
                    acknowledged.append(f"{i:06d}")
                except (ServiceRequestError, HttpResponseError):
                    time.sleep(0.05)
                i += 1

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(1)
    began = time.monotonic()
    podman("stop", "-t", "15", "first", timeout=60)
    took = time.monotonic() - began
    stop_writing.set()
    t.join()
    info = json.loads(podman("inspect", "first").stdout)[0]["State"]
    # Drained (5 s by default) and exited by itself: not killed at the 15 s grace period.
    assert info["ExitCode"] == 0 and took < 14, (info, took)
    logs = podman("logs", "first").stderr
    assert "draining before shutdown" in logs and "stopped" in logs
    assert len(acknowledged) > 20
    start(podman, "second", port, volume="kept")
    with TableServiceClient.from_connection_string(conn_str(port)) as svc:
        got = {e["RowKey"] for e in svc.get_table_client("kept").list_entities(select=["RowKey"])}
    assert set(acknowledged) <= got
    # SIGINT (Ctrl-C, `podman kill -s INT`) stops at once, cleanly.
    podman("kill", "-s", "INT", "second")
    assert podman("wait", "second").stdout.strip() == "0"
    podman("rm", "-f", "first", "second")


def test_in_memory_leaves_nothing_in_the_volume_or_the_container(podman):
    port = free_port()
    podman("volume", "create", "empty")
    start(podman, "mem", port, "serve", "--in-memory", volume="empty")
    with TableServiceClient.from_connection_string(conn_str(port)) as svc:
        table = svc.create_table("gone")
        table.submit_transaction([("create", {"PartitionKey": "p", "RowKey": str(i)}) for i in range(100)])
    # Nothing written in the container's own file system either (podman itself puts
    # /etc/hosts and /etc/resolv.conf there).
    # /tmp holds the listeners file the HEALTHCHECK reads (a few bytes, no data).
    changed = [line for line in podman("diff", "mem").stdout.splitlines()
               if not line.split()[1].startswith("/etc") and line.split()[1] not in ("/tmp", "/tmp/tafel.listeners")]
    assert changed == []
    podman("stop", "mem")
    mountpoint = Path(json.loads(podman("volume", "inspect", "empty").stdout)[0]["Mountpoint"])
    assert mountpoint.is_dir() and list(mountpoint.iterdir()) == []
    podman("rm", "-f", "mem")


# --- the recipes of docs/containers.md, as printed (doc_recipes.py) ------------------------


def sh(podman, script: str, timeout: float = 300) -> subprocess.CompletedProcess:
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=REPO_ROOT, env=podman.env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{script}\n--- stdout\n{r.stdout[-2000:]}\n--- stderr\n{r.stderr[-3000:]}"
    return r


@pytest.fixture
def port_10002():
    """The recipes publish the emulator's port, as printed."""
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", 10002))
        except OSError:
            pytest.fail("docs/containers.md's recipes publish port 10002, which is taken on this machine", pytrace=False)


def serves_the_connection_string(name: str, podman) -> None:
    conn = recipe("containers.md", "connection-string").strip()
    deadline = time.monotonic() + 30
    while True:
        try:
            with TableServiceClient.from_connection_string(conn, retry_total=0) as svc:
                table = svc.create_table_if_not_exists("recipe")
                table.upsert_entity({"PartitionKey": "p", "RowKey": name})
                assert table.get_entity("p", name)["RowKey"] == name
            return
        except (ServiceRequestError, HttpResponseError):
            assert time.monotonic() < deadline, f"{name}: nothing served the connection string"
            time.sleep(0.2)


def test_the_docker_run_recipes_serve_the_connection_string(podman, port_10002):
    for name in ("run-with-volume", "run-in-memory", "run-azurite-command-line"):
        script = recipe("containers.md", name)
        assert all(c.startswith("docker run -d ") for c in commands(script)), script
        container = sh(podman, script).stdout.split()[-1]
        try:
            serves_the_connection_string(name, podman)
        finally:
            podman("rm", "-f", container)
    podman("volume", "rm", "tables-data")


def test_the_compose_file_runs_with_podman_compose(podman, port_10002):
    compose = (REPO_ROOT / "docs" / "examples" / "compose.yaml").read_text()
    assert recipe("containers.md", "compose-file").strip() in re.sub(r"\n *#[^\n]*", "", compose).strip()
    if shutil.which("podman-compose", path=podman.env["PATH"]) is None:
        pytest.fail("podman-compose is missing (tests/python/requirements.txt installs it)", pytrace=False)
    sh(podman, recipe("containers.md", "compose-up"))
    try:
        serves_the_connection_string("compose", podman)
        volumes = [v for v in podman("volume", "ls", "--format", "{{.Name}}").stdout.split() if v.endswith("tables-data")]
        assert len(volumes) == 1, volumes
        mountpoint = Path(json.loads(podman("volume", "inspect", volumes[0]).stdout)[0]["Mountpoint"])
        assert (mountpoint / "tafel.redb").exists()
    finally:
        sh(podman, recipe("containers.md", "compose-down"))
    assert not [n for n in podman("ps", "-a", "--format", "{{.Names}}").stdout.split() if "tables" in n]


def test_the_github_actions_services_block_turns_healthy(podman):
    block = recipe("containers.md", "github-actions-services")
    env = re.findall(r"^\s+(TAFEL_\w+): \"([^\"]*)\"", block, re.M)
    options = shlex.split(" ".join(line.strip() for line in block.split("options: >-")[1].splitlines())) \
        if "options:" in block else []
    # A --health-cmd string runs under /bin/sh, which the image does not have.
    assert env and "--health-cmd" not in options
    port = free_port()
    podman("run", "-d", "--name", "gha", "-p", f"127.0.0.1:{port}:10002",
           *[a for k, v in env for a in ("-e", f"{k}={v}")], *options, podman.tag)
    deadline = time.monotonic() + 30
    while podman("healthcheck", "run", "gha", check=False).returncode != 0:
        assert time.monotonic() < deadline, podman("logs", "gha", check=False).stderr
        time.sleep(0.5)
    assert json.loads(podman("inspect", "gha").stdout)[0]["State"]["Health"]["Status"] == "healthy"
    podman("rm", "-f", "gha")


def test_testcontainers_python_starts_the_image_as_the_page_says(podman, tmp_path):
    sock = tmp_path / "podman.sock"
    snippet = tmp_path / "fixture.py"
    # The page's snippet, then what a test does with its connection string.
    snippet.write_text(recipe("containers.md", "testcontainers-python") +
                       "    from azure.data.tables import TableServiceClient\n"
                       "    with TableServiceClient.from_connection_string(conn) as svc:\n"
                       "        svc.create_table('fixture').create_entity({'PartitionKey': 'p', 'RowKey': 'r'})\n"
                       "        print([(e['PartitionKey'], e['RowKey']) for e in svc.get_table_client('fixture').list_entities()])\n")
    # The page's environment and service, then (test glue) a wait for the socket.
    script = (recipe("containers.md", "testcontainers-podman") +
              f'while [ ! -S "{sock}" ]; do sleep 0.1; done\n{sys.executable} {snippet}\n')
    # To files: the service left running keeps pipes open past the script's end.
    out_file, err_file = tmp_path / "out", tmp_path / "err"
    with open(out_file, "wb") as out, open(err_file, "wb") as err:
        proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, start_new_session=True,
                                env={**podman.env, "DOCKER_HOST": f"unix://{sock}"}, stdout=out, stderr=err)
    try:
        proc.wait(timeout=180)
        out, err = out_file.read_text(), err_file.read_text()
    finally:
        # The recipe leaves `podman system service` running, as a session would: stop it.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, err[-3000:]
    assert "[('p', 'r')]" in out, out


def test_moving_from_azurite_as_the_doc_says(tmp_path):
    from test_transfer_azurite import AZURITE

    if not AZURITE.exists():
        pytest.fail(f"{AZURITE} is missing: run `npm ci` in tests/azurite (scripts/test does)", pytrace=False)
    az_port, tf_port = free_port(), free_port()
    azurite = subprocess.Popen([str(AZURITE), "--tablePort", str(az_port), "--inMemoryPersistence", "--silent",
                                "--disableTelemetry"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from launch import Launched

    tafel = Launched(["--in-memory", "--port", str(tf_port), "--no-admin"], tf_port, tmp_path)
    try:
        tafel.wait_listening()
        az_conn, tf_conn = conn_str(az_port), conn_str(tf_port)
        deadline = time.monotonic() + 60
        while True:
            try:
                with TableServiceClient.from_connection_string(az_conn, retry_total=0) as svc:
                    list(svc.list_tables())
                break
            except (ServiceRequestError, HttpResponseError):
                assert time.monotonic() < deadline, "Azurite did not start"
                time.sleep(0.2)
        with TableServiceClient.from_connection_string(az_conn) as svc:
            for name, n in (("orders", 250), ("customers", 30)):
                t = svc.create_table(name)
                for i in range(0, n, 50):
                    t.submit_transaction([("create", {"PartitionKey": "p", "RowKey": f"{j:04d}", "n": j})
                                          for j in range(i, min(n, i + 50))])
        env = {**os.environ, "AZURITE_CONN": az_conn, "TAFEL_CONN": tf_conn,
               "PATH": f"{tafel_binary().parent}:{os.environ['PATH']}"}
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", recipe("containers.md", "moving-from-azurite")],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        with TableServiceClient.from_connection_string(tf_conn) as svc:
            counts = {t: len(list(svc.get_table_client(t).list_entities())) for t in ("orders", "customers", "orders2")}
        assert counts == {"orders": 250, "customers": 30, "orders2": 250}
    finally:
        tafel.stop()
        azurite.terminate()
        azurite.wait(timeout=30)
