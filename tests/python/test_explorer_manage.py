"""The explorer's Manage panel and Deleted tables view in a real headless Chromium: a table's
statistics, setting and clearing its expiry policy, adding and dropping an index (501 shown on
a backend without them), purging by filter and partition, and restoring a deleted table (under
its own name, and under another when its name is taken). Every result is checked on the server
itself: the admin API through plain HTTP and the entities through the Python SDK."""

from __future__ import annotations

import pytest
import requests
from azure.data.tables import TableServiceClient

from conftest import ACCOUNT, TafelServer, unique_table_name
from explorer_browser import Browser, browser  # noqa: F401 - a fixture
from test_explorer import grid_rows, open_table, sign_in

TOKEN = "manage-token-1"


@pytest.fixture(scope="module")
def soft(_workdir):
    """A server that keeps deleted tables for an hour."""
    srv = TafelServer(_workdir / "manage-data", _workdir / "manage.log", extra_args=["--table-soft-delete", "1h"])
    srv.start()
    yield srv
    srv.stop()


def admin(srv, method: str, path: str, **kw) -> requests.Response:
    return requests.request(method, f"{srv.admin_url}/accounts/{ACCOUNT}{path}", timeout=10, **kw)


def rows(svc: TableServiceClient, table: str) -> list:
    return sorted(((e["PartitionKey"], e["RowKey"]) for e in svc.get_table_client(table).list_entities()))


def filled(srv, n: int = 30) -> tuple:
    """A new table of `n` entities in partitions p0..p2, N = 0..n-1; every third has an Email."""
    name = unique_table_name("mg")
    svc = TableServiceClient.from_connection_string(srv.conn_str)
    tc = svc.create_table(name)
    by_pk: dict = {}
    for i in range(n):
        e = {"PartitionKey": f"p{i % 3}", "RowKey": f"{i:03}", "N": i}
        if i % 3 == 0:
            e["Email"] = f"u{i}@example.com"
        by_pk.setdefault(e["PartitionKey"], []).append(("create", e))
    for ops in by_pk.values():
        tc.submit_transaction(ops)
    return name, svc


def manage(b: Browser, srv, table: str) -> None:
    open_table(b, srv, table)
    if b.el("#manage-toggle").get_attribute("aria-expanded") != "true":
        b.click("#manage-toggle")
    b.el("#manage")


def test_statistics_match_the_data(browser, soft):
    name, svc = filled(soft, 31)
    b = browser
    sign_in(b, soft)
    manage(b, soft, name)
    b.wait(lambda: b.el("#stat-entities").get_attribute("data-value") == "31", "31 entities shown")
    assert len(rows(svc, name)) == 31
    shown_bytes = int(b.el("#stat-bytes").get_attribute("data-value"))
    assert shown_bytes == admin(soft, "GET", f"/tables/{name}/stats").json()["bytes"] and shown_bytes > 31 * 8
    assert b.el("#stat-partitions").get_attribute("data-value") == "3"

    # An insert through the SDK shows on the next look.
    svc.get_table_client(name).create_entity({"PartitionKey": "p9", "RowKey": "x"})
    b.d.refresh()  # the panel stays open across a reload
    b.wait(lambda: b.el("#stat-entities").get_attribute("data-value") == "32", "32 after an insert")
    assert b.el("#stat-partitions").get_attribute("data-value") == "4"
    b.screenshot("14-manage")


def test_set_refuse_and_clear_an_expiry_policy(browser, soft):
    name, _ = filled(soft, 3)
    b = browser
    sign_in(b, soft)
    manage(b, soft, name)
    b.wait(lambda: "No expiry" in b.text("#ttl-current"), "no policy at first")

    b.type("#ttl-seconds", "3600")
    b.click("#ttl-set")
    b.wait(lambda: b.el("#ttl-current").get_attribute("data-seconds") == "3600", "the policy shown")
    assert admin(soft, "GET", f"/tables/{name}/ttl").json() == {"table": name, "seconds": 3600, "property": None}

    b.type("#ttl-property", "ExpiresAt")
    b.click("#ttl-set")
    b.wait(lambda: b.el("#ttl-current").get_attribute("data-property") == "ExpiresAt", "both shown")
    assert "whichever is first" in b.text("#ttl-current")
    assert admin(soft, "GET", f"/tables/{name}/ttl").json() == {"table": name, "seconds": 3600, "property": "ExpiresAt"}

    # A bad one: the server's 400, naming the field, shown; the policy kept.
    b.type("#ttl-seconds", "0")
    b.click("#ttl-set")
    b.wait(lambda: '"seconds" must be' in b.text("#ttl-error"), "the refusal shown")
    assert "400" in b.text("#ttl-error")
    assert admin(soft, "GET", f"/tables/{name}/ttl").json()["seconds"] == 3600

    b.click("#ttl-clear")
    b.wait(lambda: "No expiry" in b.text("#ttl-current"), "cleared")
    assert b.js("return document.querySelector('#ttl-error').textContent") == ""  # the refusal is gone
    assert admin(soft, "GET", f"/tables/{name}/ttl").json() == {"table": name, "seconds": None, "property": None}


def test_add_and_drop_an_index(browser, soft):
    name, _ = filled(soft, 30)
    b = browser
    sign_in(b, soft)
    manage(b, soft, name)
    b.wait(lambda: b.all("#indexes-none"), "no indexes at first")
    b.type("#index-property", "Email")
    b.click("#index-add")
    b.wait(lambda: b.all("#indexes tr[data-property=Email] td[data-state=ready]"), "the index listed, ready")
    assert b.text("#indexes tr[data-property=Email] td.num") == "10"
    assert admin(soft, "GET", f"/tables/{name}/indexes").json()["indexes"] == [
        {"property": "Email", "state": "ready", "entries": 10}
    ]

    # A name that cannot be indexed: the server's 400 shown, nothing added.
    b.type("#index-property", "RowKey")
    b.click("#index-add")
    b.wait(lambda: "400 InvalidPropertyName" in b.text("#index-error"), "the refusal shown")
    assert [i["property"] for i in admin(soft, "GET", f"/tables/{name}/indexes").json()["indexes"]] == ["Email"]

    b.click("#indexes [data-drop=Email]")
    b.click("#confirm-ok")
    b.wait(lambda: b.all("#indexes-none"), "the list empty again")
    assert admin(soft, "GET", f"/tables/{name}/indexes").json()["indexes"] == []


def test_purge_by_filter_and_partition_leaves_exactly_the_rest(browser, soft):
    name, svc = filled(soft, 30)
    before = rows(svc, name)
    b = browser
    sign_in(b, soft)
    manage(b, soft, name)
    b.wait(lambda: len(grid_rows(b)) == 30, "every entity listed")

    # A filter that does not parse: the server's 400, nothing deleted.
    b.type("#purge-filter", "N gt")
    b.click("#purge-start")
    b.wait(lambda: "matching N gt" in b.dialog().text, "the confirmation")
    b.type("#confirm-input", name)
    b.click("#confirm-ok")
    b.wait(lambda: "400 InvalidFilter" in b.text("#purge-error"), "the refusal shown")
    assert rows(svc, name) == before

    b.type("#purge-filter", "N ge 10")
    b.type("#purge-partition", "p1")
    b.click("#purge-start")
    # It names what goes, and how much: p1 holds 1, 4, …, 28; those from 10 are 7.
    text = b.wait(lambda: (lambda t: t if "entities match" in t else None)(b.dialog().text), "the count")
    assert f"Every entity of {name} in partition 'p1' matching N ge 10 will be deleted" in text, text
    assert "7 entities match now" in text, text
    b.type("#confirm-input", name)
    b.click("#confirm-ok")
    b.wait(lambda: b.el("#purge-status").get_attribute("data-state") == "done", "the job done")
    assert b.el("#purge-status").get_attribute("data-deleted") == "7"

    expected = [(pk, rk) for pk, rk in before if not (pk == "p1" and int(rk) >= 10)]
    assert len(expected) == 23
    assert rows(svc, name) == expected
    # The list and the statistics show what is left.
    b.wait(lambda: len(grid_rows(b)) == 23, "the grid refreshed")
    b.wait(lambda: b.el("#stat-entities").get_attribute("data-value") == "23", "the statistics refreshed")


def test_a_deleted_table_is_restored_from_the_explorer(browser, soft):
    name, svc = filled(soft, 12)
    before = rows(svc, name)
    b = browser
    sign_in(b, soft)
    open_table(b, soft, name)
    b.click("#table-delete")
    b.type("#confirm-input", name)
    b.click("#confirm-ok")
    b.wait(lambda: name not in [t.name for t in svc.list_tables()], "the table deleted")

    b.click("#deleted-link")
    b.wait(lambda: b.all(f"#deleted-tables tr[data-name={name}]"), "the table listed as deleted")
    assert b.el("#deleted-policy").get_attribute("data-keep") == "3600"
    assert "1 h" in b.text("#deleted-policy")
    row = b.el(f"#deleted-tables tr[data-name={name}]")
    assert [td.text for td in row.find_elements("css selector", "td.num")][0] == "12"
    b.screenshot("15-deleted-tables")
    row.find_element("css selector", "button.restore").click()
    b.wait(lambda: not b.all(f"#deleted-tables tr[data-name={name}]"), "gone from the list")
    assert rows(svc, name) == before
    b.wait(lambda: name in [li.get_attribute("data-name") for li in b.all("#table-list li[data-name]")],
           "back in the table list")

    # Deleted again and its name taken: Restore says so; Restore as… brings it back under another.
    svc.delete_table(name)
    svc.create_table(name)
    b.d.refresh()
    row = b.el(f"#deleted-tables tr[data-name={name}]")
    row.find_element("css selector", "button.restore").click()
    b.wait(lambda: "409 TableAlreadyExists" in b.text("#deleted-error"), "the conflict shown")
    assert rows(svc, name) == []
    b.el(f"#deleted-tables tr[data-name={name}]").find_element("css selector", "button.restore-as").click()
    other = unique_table_name("mgas")
    b.type("#restore-as-name", "1bad")
    b.click("dialog[open] button.primary")
    b.wait(lambda: "400 InvalidResourceName" in b.text("#restore-as-error"), "a bad name refused")
    b.type("#restore-as-name", other)
    b.click("dialog[open] button.primary")
    b.no_dialog()
    b.wait(lambda: not b.all(f"#deleted-tables tr[data-name={name}]"), "restored")
    assert rows(svc, other) == before
    assert rows(svc, name) == []


def test_the_deleted_tables_view_says_when_none_are_kept(browser, server):
    r = requests.get(f"{server.admin_url}/accounts/{ACCOUNT}/deleted-tables", timeout=10)
    assert r.status_code == 200 and r.json()["keepSeconds"] is None, r.text
    b = browser
    sign_in(b, server)
    b.load(f"{server.admin_url}/#/a/{ACCOUNT}/deleted-tables")
    b.wait(lambda: "keeps no deleted tables" in b.text("#deleted-policy"), "soft delete said to be off")
    assert "--table-soft-delete" in b.text("#deleted-policy")
    assert b.el("#deleted-policy").get_attribute("data-keep") == ""


def test_the_panel_asks_for_the_admin_token(browser, _workdir):
    srv = TafelServer(_workdir / "manage-token-data", _workdir / "manage-token.log", extra_args=["--admin-token", TOKEN])
    srv.start()
    b = browser
    try:
        name, _ = filled(srv, 5)
        sign_in(b, srv)
        b.js("sessionStorage.removeItem('tafel.adminToken')")
        manage(b, srv, name)
        b.el("#manage-token")
        assert not b.all("#stat-entities")
        b.type("#manage-token", TOKEN)
        b.click("#manage .token button.primary")
        b.wait(lambda: b.el("#stat-entities").get_attribute("data-value") == "5", "the statistics with the token")
    finally:
        b.js("sessionStorage.removeItem('tafel.adminToken')")
        srv.stop()
