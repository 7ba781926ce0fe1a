"""Shared fixtures for the azure-data-tables matrix: the server comes from the environment
(tests/clients/run-all), every table is new and unique to the run, and is deleted after."""

import json
import os
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.data.tables import VERSION, TableServiceClient

URL = os.environ["TAFEL_TABLE_URL"]
ACCOUNT = os.environ["TAFEL_ACCOUNT"]
KEY = os.environ["TAFEL_KEY"]
CONN = os.environ["TAFEL_CONNECTION_STRING"]
RUN = uuid.uuid4().hex[:8]

SDK = tuple(int(part) for part in VERSION.split(".")[:2])
# azure-data-tables 12.0-12.2 send $batch to https:// whatever the endpoint's scheme (fixed
# in 12.3), so over plain HTTP their transactions cannot reach any server.
BATCH_OK = SDK >= (12, 3) or URL.startswith("https:")
needs_batch = pytest.mark.skipif(not BATCH_OK, reason=f"azure-data-tables {VERSION} sends $batch over https only")


def key_credential():
    return AzureNamedKeyCredential(ACCOUNT, KEY)


def in_an_hour():
    return datetime.now(timezone.utc) + timedelta(hours=1)


def code_of(exc):
    """The service error code of an azure-core error: the SDK decodes it on some paths
    (error_code) and re-raises the bare response on others (create_entity)."""
    code = getattr(exc, "error_code", None)
    if code is not None:
        return str(getattr(code, "value", code))
    response = exc.response
    try:
        return json.loads(response.text())["odata.error"]["code"]
    except (ValueError, KeyError):
        return response.headers.get("x-ms-error-code")


def value(v):
    """An Int64 comes back as EntityProperty(value, EdmType.INT64); the rest as Python values."""
    return getattr(v, "value", v)


@pytest.fixture(scope="session")
def service():
    return TableServiceClient.from_connection_string(CONN)


@pytest.fixture
def table(service, request):
    """A new table named for the test; deleted afterwards."""
    stem = "".join(ch for ch in request.node.name if ch.isalnum())[:30]
    name = f"py{RUN}{stem}"[:63]
    client = service.create_table(name)
    yield client
    service.delete_table(name)
