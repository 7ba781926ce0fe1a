"""Round trips to the database per operation on the postgres backend (issue #27's headline
metric): a node reaches PostgreSQL through a proxy that adds 20 ms of round-trip time or
nothing, and no operation may take more round trips than ``roundtrips.TARGETS`` allows."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

import pytest

from conftest import TafelServer, create_postgres_database, postgres_only
from pgproxy import DelayProxy
from roundtrips import measure, table

pytestmark = postgres_only

# 50 ms, not 20: a loaded CI machine's few milliseconds of noise (other drills run
# beside this one) then stay a small share of a round trip (20 ms read 2.38 round
# trips for a 2-round-trip delete once).
RTT = 0.050
# Timing noise: a whole extra round trip is 1.0.
SLACK = 0.3


@pytest.fixture(scope="module")
def far_node(_workdir):
    database = create_postgres_database()
    parts = urlsplit(database)
    proxy = DelayProxy(parts.hostname, parts.port)
    tag = uuid.uuid4().hex[:6]
    srv = TafelServer(_workdir / f"rt-data-{tag}", _workdir / f"rt-tafel-{tag}.log")
    srv.database_url = proxy.url_for(database)
    srv.start()
    yield srv, proxy
    srv.stop()
    proxy.close()


def test_every_operation_stays_within_its_round_trip_target(far_node):
    srv, proxy = far_node
    results = measure(srv, proxy, RTT, repeat=5)
    print("\n" + table(results, RTT))
    over = [r for r in results if r.round_trips > r.target + SLACK]
    assert not over, "over target:\n" + table(over, RTT)
