"""The Azure CLI matrix drives `az storage table` / `az storage entity` as a user would,
against the server named by the environment (tests/clients/run-all)."""

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

URL = os.environ["TAFEL_TABLE_URL"]
ACCOUNT = os.environ["TAFEL_ACCOUNT"]
KEY = os.environ["TAFEL_KEY"]
CONN = os.environ["TAFEL_CONNECTION_STRING"]
RUN = uuid.uuid4().hex[:8]
AZ = str(Path(sys.executable).parent / "az")


def az_raw(*args, auth=("--connection-string", CONN)):
    """Runs one `az` command; returns the finished process (stdout JSON, stderr text)."""
    return subprocess.run([AZ, *args, *auth, "--only-show-errors", "-o", "json"], capture_output=True, text=True, timeout=120)


def az(*args, **kw):
    """Runs one `az` command that must succeed; returns its parsed JSON output."""
    done = az_raw(*args, **kw)
    assert done.returncode == 0, f"az {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout) if done.stdout.strip() else None


def az_fails(*args, **kw):
    """Runs one `az` command that must fail; returns its error text."""
    done = az_raw(*args, **kw)
    assert done.returncode != 0, f"az {' '.join(args)} succeeded: {done.stdout}"
    return done.stderr


@pytest.fixture
def table(request):
    stem = "".join(ch for ch in request.node.name if ch.isalnum())[:30]
    name = f"az{RUN}{stem}"[:63]
    assert az("storage", "table", "create", "-n", name) == {"created": True}
    yield name
    az("storage", "table", "delete", "-n", name)
