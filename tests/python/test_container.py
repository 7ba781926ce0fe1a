"""The container image (Containerfile, scripts/image), built and run with podman: the SDK
against the published port, data surviving a new container on the same volume, `podman
stop` draining within its grace period with no acknowledged write lost, the HEALTHCHECK
turning healthy, the server running as a non-root user, and --in-memory leaving nothing
behind. Podman runs here as CI runs it: rootful, vfs storage and runc, its storage and
configuration in a temporary directory (nothing of the machine's is changed)."""

from __future__ import annotations

import json
import os
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
    yield run
    run("rm", "-a", "-f", check=False)
    run("volume", "prune", "-f", check=False)
    run("system", "reset", "-f", check=False)
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
