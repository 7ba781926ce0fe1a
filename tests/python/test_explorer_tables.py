"""The web explorer's table-level features in a real headless Chromium: prefix search and
paging of the table list, counting, access policies, duplicating and deleting an entity,
paging through a table with continuation tokens, and sign-in with a bearer token. Results
are checked through the Python SDK."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableServiceClient
from selenium.webdriver.common.keys import Keys

from conftest import ACCOUNT, bulk_insert, unique_table_name
from explorer_browser import Browser, browser  # noqa: F401 - a fixture
from test_explorer import grid_rows, open_row, open_table, prop_value, sign_in
from test_oauth import mint, start


def listed(b: Browser):
    return [li.get_attribute("data-name") for li in b.all("#table-list li[data-name]")]


def search(b: Browser, prefix: str):
    """Types a prefix and waits until the list shows that search (typing is debounced)."""
    b.type("#table-prefix", prefix)
    b.wait(lambda: b.el("#table-list").get_attribute("data-prefix") == prefix, f"the search for {prefix!r}")


def test_tables_by_prefix_page_by_page(browser, server, service):
    prefix = unique_table_name("pfx")[:14]
    names = sorted(f"{prefix}{i:03d}" for i in range(53))
    for n in names:
        service.create_table(n)
    b = browser
    sign_in(b, server)
    search(b, prefix)
    b.wait(lambda: listed(b) == names[:50], "the first page of 50 with the prefix")
    b.click("#tables-next")
    b.wait(lambda: listed(b) == names[50:], "the second page")
    assert b.text("#tables").count("page 2") == 1
    b.click("#tables-prev")
    b.wait(lambda: listed(b) == names[:50], "back to the first")
    search(b, prefix + "05")
    b.wait(lambda: listed(b) == names[50:], "a longer prefix narrows it")
    search(b, prefix + "x")
    b.wait(lambda: "No table starts with" in b.text("#table-list"), "nothing matches")
    for n in names:
        service.delete_table(n)


def test_count_paging_policies_duplicate_and_delete(browser, server, service, raw):
    table = unique_table_name("tbl")
    client = service.create_table(table)
    bulk_insert(raw, table, [{"PartitionKey": f"p{i % 3}", "RowKey": f"{i:05d}", "N": i} for i in range(1203)])
    b = browser
    sign_in(b, server)
    open_table(b, server, table)

    # Pages of 1,000 with continuation tokens, forward and back.
    b.wait(lambda: len(grid_rows(b)) == 1000, "a full first page")
    assert "more pages" in b.text("#result-status")
    b.click("#page-next")
    b.wait(lambda: len(grid_rows(b)) == 203 and b.text("#page-no") == "page 2", "the rest")
    assert b.el("#page-next").get_attribute("disabled") is not None
    b.click("#page-prev")
    b.wait(lambda: len(grid_rows(b)) == 1000 and b.text("#page-no") == "page 1", "page 1 again")
    b.type("#top", "10" + Keys.ENTER)
    b.wait(lambda: len(grid_rows(b)) == 10, "$top")

    # Count on demand, of the table and of a query.
    b.click("#count")
    b.wait(lambda: b.el("#count-result").get_attribute("data-count") == "1203", "every entity counted")
    b.click("dialog[open] button")
    b.type("#filter", "PartitionKey eq 'p1'" + Keys.ENTER)
    b.click("#count")
    b.wait(lambda: b.el("#count-result").get_attribute("data-count") == "401", "the query's entities counted")
    b.click("dialog[open] button")

    # Access policies: add one, read back through the SDK, then edit it away.
    b.click("#acl")
    b.click("dialog[open] form > button")
    inputs = b.all("dialog[open] tbody input")
    expiry = (datetime.now(timezone.utc) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for field, value in zip(inputs, ["readers", "", expiry, "r"]):
        field.clear()
        field.send_keys(value)
    b.screenshot("12-access-policies")
    b.click("dialog[open] button.primary")
    b.no_dialog()
    policy = client.get_table_access_policy()["readers"]
    assert policy.permission == "r" and policy.expiry.strftime("%Y-%m-%dT%H:%M:%SZ") == expiry
    b.click("#acl")
    b.wait(lambda: b.all("dialog[open] tbody input") and b.all("dialog[open] tbody input")[0].get_attribute("value") == "readers", "the policy shown")
    b.click("dialog[open] tbody button")
    b.click("dialog[open] button.primary")
    b.no_dialog()
    assert client.get_table_access_policy() == {}

    # Duplicate an entity under a new RowKey, then delete the original from its editor.
    b.type("#top", Keys.BACKSPACE * 3)
    b.type("#filter", "RowKey eq '00004'" + Keys.ENTER)
    b.wait(lambda: len(grid_rows(b)) == 1, "one row")
    open_row(b)
    b.wait(lambda: prop_value(b, "N").get_attribute("value") == "4", "the editor")
    b.click("#edit-duplicate")
    b.wait(lambda: b.text("dialog[open] h2") == "Duplicate entity", "the duplicate's editor")
    assert b.el("#edit-rk").get_attribute("value") == "00004-copy"
    b.click("#edit-save")
    b.no_dialog()
    assert client.get_entity("p1", "00004-copy")["N"] == 4
    open_row(b)
    b.click("#edit-delete")
    b.click("#confirm-ok")
    b.no_dialog()
    with pytest.raises(ResourceNotFoundError):
        client.get_entity("p1", "00004")
    service.delete_table(table)


def test_sign_in_with_a_bearer_token(browser, _workdir):
    """--oauth basic over plain HTTP: the Table API port refuses tokens (they would cross a
    network in the clear); the explorer's calls from this machine stay on loopback and pass."""
    srv = start(_workdir, None, "--oauth", "basic")
    try:
        b = browser
        sign_in(b, srv, kind="token", secret=mint(roles=None))
        b.wait(lambda: b.all("#table-new"), "signed in with the token")
        b.click("#table-new")
        name = unique_table_name("bearer")
        b.type("#new-table-name", name + Keys.ENTER)
        b.wait(lambda: b.text("#table-name") == name, "a table created with the token")
        with TableServiceClient.from_connection_string(srv.conn_str) as service:
            assert name in [t.name for t in service.list_tables()]
        assert ACCOUNT in b.d.current_url
    finally:
        srv.stop()
