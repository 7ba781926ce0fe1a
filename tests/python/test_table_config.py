"""Tables in the configuration file (docs/operations.md, "Tables in the configuration file"):
`[[table]]` entries of `tafel serve --config FILE` create tables, set their TTL policies and
create their indexes at every start; a restart with a changed file applies the change; a bad
file stops the start with a non-zero exit and a message naming the file and the entry. Run on
both backends."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from datetime import datetime, timedelta, timezone

import pytest
import requests
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableServiceClient

from conftest import (
    ACCOUNT,
    BACKEND,
    TafelServer,
    backend_args,
    create_postgres_database,
    free_port,
    tafel_binary,
)
from doc_recipes import recipe

DAY = 86_400


def server_with(workdir, cfg) -> TafelServer:
    name = uuid.uuid4().hex[:8]
    return TafelServer(workdir / f"tcfg-{name}", workdir / f"tcfg-{name}.log", extra_args=["--config", str(cfg)])


def ttl_of(srv, table: str) -> dict:
    r = requests.get(f"{srv.admin_url}/accounts/{ACCOUNT}/tables/{table}/ttl", timeout=10)
    assert r.status_code == 200, (r.status_code, r.text)
    return {"seconds": r.json()["seconds"], "property": r.json()["property"]}


def indexes_of(srv, table: str) -> dict:
    r = requests.get(f"{srv.admin_url}/accounts/{ACCOUNT}/tables/{table}/indexes", timeout=10)
    assert r.status_code == 200, (r.status_code, r.text)
    return {i["property"]: i["state"] for i in r.json()["indexes"]}


def move_clock(srv, seconds: int) -> None:
    r = requests.put(f"{srv.admin_url}/clock", data=json.dumps({"offset-seconds": seconds}), timeout=10,
                     headers={"Content-Type": "application/json"})
    assert r.status_code == 200, (r.status_code, r.text)


def test_the_ttl_policy_from_the_file_expires_data(_workdir, tmp_path):
    cfg = tmp_path / "tafel.toml"
    cfg.write_text(recipe("lifecycle.md", "ttl-config"))
    srv = server_with(_workdir, cfg)
    srv.start()
    try:
        # The docs' entry: table "orders", a day after the last write or at ExpiresAt.
        assert ttl_of(srv, "orders") == {"seconds": DAY, "property": "ExpiresAt"}
        with TableServiceClient.from_connection_string(srv.conn_str) as svc:
            tc = svc.get_table_client("orders")  # created by the file, not here
            soon = datetime.now(timezone.utc) + timedelta(hours=1)
            tc.create_entity({"PartitionKey": "p", "RowKey": "soon", "ExpiresAt": soon})
            tc.create_entity({"PartitionKey": "p", "RowKey": "plain"})
            move_clock(srv, 2 * 3600)
            with pytest.raises(ResourceNotFoundError):
                tc.get_entity("p", "soon")
            assert tc.get_entity("p", "plain")["RowKey"] == "plain"
            move_clock(srv, DAY + 60)
            with pytest.raises(ResourceNotFoundError):
                tc.get_entity("p", "plain")
            assert list(tc.list_entities()) == []
    finally:
        srv.stop()


def test_indexes_from_the_file_are_listed_and_answer_queries(_workdir, tmp_path):
    cfg = tmp_path / "tafel.toml"
    cfg.write_text(recipe("indexes.md", "index-config"))
    srv = server_with(_workdir, cfg)
    srv.start()
    try:
        assert indexes_of(srv, "Customers") == {"Email": "ready", "Status": "ready"}
        with TableServiceClient.from_connection_string(srv.conn_str) as svc:
            tc = svc.get_table_client("Customers")
            for i in range(20):
                tc.create_entity({"PartitionKey": f"p{i % 4}", "RowKey": f"{i}", "Email": f"u{i}@x", "Status": "new"})
        r = srv.raw.request("GET", "/Customers()", query={"$filter": "Email eq 'u7@x'"})
        assert r.status_code == 200, r.text
        assert r.headers["x-tafel-query-plan"] == "index:Email"
        assert [e["RowKey"] for e in r.json()["value"]] == ["7"]
    finally:
        srv.stop()


def test_the_index_of_every_property_from_the_file_answers_a_query_on_any_property(_workdir, tmp_path):
    cfg = tmp_path / "tafel.toml"
    cfg.write_text('[[table]]\nname = "events"\nindexes = ["*"]\n')
    srv = server_with(_workdir, cfg)
    srv.start()
    try:
        assert indexes_of(srv, "events") == {"*": "ready"}
        with TableServiceClient.from_connection_string(srv.conn_str) as svc:
            tc = svc.get_table_client("events")
            for i in range(12):
                tc.create_entity({"PartitionKey": f"p{i % 3}", "RowKey": f"{i:02}", "Kind": f"k{i % 4}", "Size": i})
        r = srv.raw.request("GET", "/events()", query={"$filter": "Size eq 7"})
        assert r.status_code == 200 and r.headers["x-tafel-query-plan"] == "index:Size", (r.status_code, r.text)
        assert [e["RowKey"] for e in r.json()["value"]] == ["07"]
    finally:
        srv.stop()


def test_a_restart_with_a_changed_file_applies_the_change(_workdir, tmp_path):
    cfg = tmp_path / "tafel.toml"
    cfg.write_text('[[table]]\nname = "orders"\nttl-seconds = 60\nindexes = ["Email"]\n')
    srv = server_with(_workdir, cfg)
    srv.start()
    try:
        assert ttl_of(srv, "orders") == {"seconds": 60, "property": None}
        # A table the file does not list keeps what the admin API gives it.
        with TableServiceClient.from_connection_string(srv.conn_str) as svc:
            svc.create_table("unlisted")
        r = requests.put(f"{srv.admin_url}/accounts/{ACCOUNT}/tables/unlisted/ttl", data='{"seconds": 30}', timeout=10)
        assert r.status_code == 200, r.text
        assert indexes_of(srv, "orders") == {"Email": "ready"}
        srv.stop()

        cfg.write_text('[[table]]\nname = "orders"\nttl-property = "ExpiresAt"\nindexes = ["Status"]\n')
        srv.start()
        assert ttl_of(srv, "orders") == {"seconds": None, "property": "ExpiresAt"}
        # Created if missing, never dropped.
        assert indexes_of(srv, "orders") == {"Email": "ready", "Status": "ready"}
        assert ttl_of(srv, "unlisted") == {"seconds": 30, "property": None}
        srv.stop()

        # An entry without TTL keys clears the stored policy.
        cfg.write_text('[[table]]\nname = "orders"\n')
        srv.start()
        assert ttl_of(srv, "orders") == {"seconds": None, "property": None}
        assert ttl_of(srv, "unlisted") == {"seconds": 30, "property": None}
        assert "config file: TTL policy cleared" in srv.log_text()
    finally:
        srv.stop()


def start_with(cfg, data_dir) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAFEL_")}
    database = create_postgres_database() if BACKEND == "postgres" else None
    return subprocess.run(
        [str(tafel_binary()), "serve", "--config", str(cfg), "--data-dir", str(data_dir), "--port", str(free_port()),
         "--no-admin", *backend_args(database)],
        capture_output=True, text=True, env=env, timeout=60,
    )


BAD = [
    ('[table]\nname = "orders"\n', "write each as [[table]]"),
    ('[[table]]\nname = "orders"\nttl = 60\n', '[[table]] #1 ("orders"): unknown key `ttl`'),
    ('[[table]]\nname = "ok1"\n[[table]]\nname = "orders"\nttl-seconds = "60"\n',
     '[[table]] #2 ("orders"): `ttl-seconds` must be a whole number, not string'),
    ('[[table]]\nname = "orders"\nttl-seconds = 0\n', "from 1 to"),
    ('[[table]]\nname = "orders"\nttl-property = "Timestamp"\n', "system property"),
    ('[[table]]\nname = "orders"\nttl-property = "Expires At"\n', "not a valid property name"),
    ('[[table]]\nname = "orders"\nindexes = ["RowKey"]\n', "other than PartitionKey, RowKey and Timestamp"),
    ('[[table]]\nname = "orders"\nindexes = "Email"\n', "`indexes` must be a list"),
    ('[[table]]\nname = "x"\n', "resource name length"),
    ('[[table]]\nttl-seconds = 60\n', "`name` is missing"),
    ('[[table]]\naccount = "nobody"\nname = "orders"\n', 'has no account named "nobody"'),
    ('[[table]]\nname = "orders"\n[[table]]\nname = "ORDERS"\n', "listed twice"),
]


@pytest.mark.parametrize("text,says", BAD, ids=[s for _, s in BAD])
def test_a_bad_file_stops_the_start_naming_the_file_and_entry(tmp_path, text, says):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    r = start_with(cfg, tmp_path / "data")
    assert r.returncode != 0
    assert str(cfg) in r.stderr and says in r.stderr, r.stderr
    assert "panicked" not in r.stderr, r.stderr
