"""Shared fixtures for the legacy azure-cosmosdb-table matrix: the server comes from the
environment (tests/clients/run-all); every table is new, unique to the run, and deleted after."""

import os
import uuid
from datetime import datetime, timedelta

import pytest
from azure.common import AzureHttpError
from azure.cosmosdb.table.tableservice import TableService

URL = os.environ["TAFEL_TABLE_URL"]
CONN = os.environ["TAFEL_CONNECTION_STRING"]
RUN = uuid.uuid4().hex[:8]


def in_an_hour():
    # The legacy SDK formats naive datetimes as UTC.
    return datetime.utcnow() + timedelta(hours=1)


def with_sas(sas):
    """A TableService that signs nothing and sends the SAS, through the same endpoint."""
    return TableService(connection_string=f"TableEndpoint={URL};SharedAccessSignature={sas}")


def refused(call, status):
    """Runs call, which must fail with this HTTP status; returns the service's error code."""
    with pytest.raises(AzureHttpError) as err:
        call()
    assert err.value.status_code == status, err.value
    return getattr(err.value, "error_code", None)


@pytest.fixture(scope="session")
def service():
    return TableService(connection_string=CONN)


@pytest.fixture
def table(service, request):
    """A new table named for the test; deleted afterwards."""
    stem = "".join(ch for ch in request.node.name if ch.isalnum())[:30]
    name = f"leg{RUN}{stem}"[:63]
    assert service.create_table(name, fail_on_exist=True)
    yield name
    service.delete_table(name)
