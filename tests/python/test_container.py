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
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError, ServiceRequestError
from azure.data.tables import TableServiceClient

from conftest import ACCOUNT, BACKEND, KEY, REPO_ROOT, free_port, tafel_binary

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
    conf.write_text('[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\n[containers]\ndefault_ulimits = []\n')
    wrapper = work / "podman"
    wrapper.write_text(
        f"#!/bin/sh\nexec env CONTAINERS_CONF={conf} {exe} --root {work}/root --runroot {work}/run "
        f"--storage-driver vfs --runtime runc \"$@\"\n")
    wrapper.chmod(0o755)
    tag = f"localhost/tafel:test-{uuid.uuid4().hex[:8]}"
    built = subprocess.run([str(REPO_ROOT / "scripts" / "image"), tag], capture_output=True, text=True, timeout=600,
                           env={**os.environ, "CONTAINER_ENGINE": str(wrapper), "TAFEL_BIN": str(tafel_binary())})
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]

    def run(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        r = subprocess.run([str(wrapper), *args], capture_output=True, text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, f"podman {' '.join(args)}: {r.stderr[-3000:]}"
        return r

    run.tag = tag
    run.wrapper = str(wrapper)
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
    labels = json.loads(podman("image", "inspect", podman.tag).stdout)[0]["Labels"]
    assert labels["org.opencontainers.image.version"] == "0.1.0"
    assert len(labels["org.opencontainers.image.revision"]) == 40
    assert "org.opencontainers.image.source" in labels
    podman("rm", "-f", "basic")


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
    changed = [line for line in podman("diff", "mem").stdout.splitlines() if not line.split()[1].startswith("/etc")]
    assert changed == []
    podman("stop", "mem")
    mountpoint = Path(json.loads(podman("volume", "inspect", "empty").stdout)[0]["Mountpoint"])
    assert mountpoint.is_dir() and list(mountpoint.iterdir()) == []
    podman("rm", "-f", "mem")


# --- the recipes of docs/containers.md ---------------------------------------------------

DOC = REPO_ROOT / "docs" / "containers.md"


def doc_block(heading: str, lang: str) -> str:
    """The first ```lang block after `## heading` in docs/containers.md."""
    text = DOC.read_text()
    after = text[text.index(f"## {heading}\n"):]
    start = after.index(f"```{lang}\n") + len(lang) + 4
    return after[start:after.index("```", start)]


def test_the_compose_files_service_runs_with_its_azurite_command_line(podman):
    # No compose tool here: its service's command, port and volume, as compose passes them.
    compose = (REPO_ROOT / "docs" / "examples" / "compose.yaml").read_text()
    assert compose.split("image: ")[1].split()[0] == "tafel:dev"
    command = json.loads(re.search(r"command: (\[.*\])", compose).group(1))
    assert re.search(r'- "127\.0\.0\.1:10002:10002"', compose) and "tables-data:/data" in compose
    assert doc_block("Compose", "yaml").strip() in re.sub(r"\n *#[^\n]*", "", compose).strip()
    port = free_port()
    start(podman, "composed", port, *command, volume="tables-data")
    with TableServiceClient.from_connection_string(conn_str(port)) as svc:
        svc.create_table("composed").create_entity({"PartitionKey": "p", "RowKey": "r"})
    podman("stop", "composed")
    mountpoint = Path(json.loads(podman("volume", "inspect", "tables-data").stdout)[0]["Mountpoint"])
    assert (mountpoint / "tafel.redb").exists()
    podman("rm", "-f", "composed")


def test_the_github_actions_services_block_turns_healthy(podman):
    block = doc_block("GitHub Actions", "yaml")
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


def test_testcontainers_python_starts_the_image(podman, tmp_path, monkeypatch):
    sock = tmp_path / "podman.sock"
    service = subprocess.Popen([podman.wrapper, "system", "service", "--time=0", f"unix://{sock}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not sock.exists():
            assert time.monotonic() < deadline and service.poll() is None, "podman system service did not start"
            time.sleep(0.1)
        monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
        monkeypatch.setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
        monkeypatch.setenv("TESTCONTAINERS_CONNECTION_MODE", "docker_host")
        # Read at import: imported only now, with the variables set.
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.waiting_utils import wait_for_logs

        snippet = doc_block("Testcontainers", "python").replace('"tafel:dev"', "IMAGE")
        scope = {"IMAGE": podman.tag, "KEY": KEY}
        exec(snippet + "\n    RESULT = conn\n    from azure.data.tables import TableServiceClient\n"
             "    with TableServiceClient.from_connection_string(conn) as svc:\n"
             "        svc.create_table('fixture').create_entity({'PartitionKey': 'p', 'RowKey': 'r'})\n"
             "        ROWS = list(svc.get_table_client('fixture').list_entities())\n",
             {"DockerContainer": DockerContainer, "wait_for_logs": wait_for_logs}, scope)
        assert [(r["PartitionKey"], r["RowKey"]) for r in scope["ROWS"]] == [("p", "r")]
    finally:
        service.terminate()
        service.wait(timeout=30)


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
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", doc_block("Moving from Azurite", "sh")],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        with TableServiceClient.from_connection_string(tf_conn) as svc:
            counts = {t: len(list(svc.get_table_client(t).list_entities())) for t in ("orders", "customers", "orders2")}
        assert counts == {"orders": 250, "customers": 30, "orders2": 250}
    finally:
        tafel.stop()
        azurite.terminate()
        azurite.wait(timeout=30)
