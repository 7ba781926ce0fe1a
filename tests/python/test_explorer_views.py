"""The web explorer across views in a real headless Chromium (issue #57, item 8): a dialog
belongs to the view it was opened on, so Back, another table or the Status page closes the
entity editor; and a table's columns keep one order across pages and filters."""

from __future__ import annotations

from conftest import ACCOUNT, unique_table_name
from explorer_browser import Browser, browser  # noqa: F401 - a fixture
from test_explorer import open_row, open_table, sign_in


def columns(b: Browser):
    """The grid's column headers after the check box column."""
    return [th.text for th in b.all("#entities thead th")][1:]


def test_the_entity_editor_closes_when_the_view_changes(browser, server, service):
    b = browser
    table = unique_table_name("editorback")
    other = unique_table_name("editorother")
    service.create_table(table).create_entity({"PartitionKey": "p", "RowKey": "r", "N": 1})
    service.create_table(other)
    sign_in(b, server)
    try:
        # Back: the table is left, and so is its editor.
        open_table(b, server, table)
        open_row(b)
        assert b.dialog().get_attribute("aria-label") == "Edit entity"
        b.d.back()
        b.wait(lambda: f"/{table}" not in b.d.current_url, "back to the account")
        b.no_dialog()
        b.wait(lambda: not b.all(f"#table-list li[aria-selected=true][data-name={table}]"), "the table deselected")

        # The Status page.
        open_table(b, server, table)
        open_row(b)
        b.dialog()
        b.js("location.hash = '#/status'")
        b.el("#status-cards")
        b.no_dialog()

        # Another table, by link.
        open_table(b, server, table)
        open_row(b)
        b.dialog()
        b.js(f"location.hash = '#/a/{ACCOUNT}/{other}'")
        b.wait(lambda: b.text("#table-name") == other, "the other table")
        b.no_dialog()

        # Leaving while the entity is still being read opens no editor afterwards.
        open_table(b, server, table)
        b.js("""
            const orig = window.fetch;
            window.fetch = (...a) => new Promise((ok) => setTimeout(() => ok(orig(...a)), 700));
            document.querySelector('#entities tbody tr[data-index]').click();
            location.hash = '#/status';
            setTimeout(() => { window.fetch = orig; }, 2000);
        """)
        b.el("#status-cards")
        b.js("return new Promise((ok) => setTimeout(ok, 1500))")
        assert not b.all("dialog[open]")
        # The entity was not changed by any of it.
        assert service.get_table_client(table).get_entity("p", "r")["N"] == 1
    finally:
        service.delete_table(table)
        service.delete_table(other)


def test_columns_keep_the_order_first_seen_across_pages_and_filters(browser, server, service):
    b = browser
    table = unique_table_name("columns")
    tc = service.create_table(table)
    # Each entity's properties come back in the order they were written: a grid that
    # followed each page's first row would show Zeta, Alpha on page 1 and Alpha, Zeta on
    # page 2.
    tc.create_entity({"PartitionKey": "p", "RowKey": "1", "Zeta": 1, "Alpha": "a"})
    tc.create_entity({"PartitionKey": "p", "RowKey": "2", "Alpha": "b", "Zeta": 2, "Mid": True})
    tc.create_entity({"PartitionKey": "p", "RowKey": "3", "Mid": False, "Alpha": "c"})
    sign_in(b, server)
    try:
        open_table(b, server, table, "?top=1")
        assert columns(b) == ["PartitionKey", "RowKey", "Timestamp", "Zeta", "Alpha"]
        b.click("#page-next")
        b.wait(lambda: b.text("#page-no") == "page 2" and not b.all("#grid[aria-busy]"), "page 2")
        assert columns(b) == ["PartitionKey", "RowKey", "Timestamp", "Zeta", "Alpha", "Mid"]
        b.click("#page-next")
        b.wait(lambda: b.text("#page-no") == "page 3" and not b.all("#grid[aria-busy]"), "page 3")
        # Only the page's properties, still in the table's order.
        assert columns(b) == ["PartitionKey", "RowKey", "Timestamp", "Alpha", "Mid"]
        b.click("#page-prev")
        b.wait(lambda: b.text("#page-no") == "page 2" and not b.all("#grid[aria-busy]"), "page 2 again")
        assert columns(b) == ["PartitionKey", "RowKey", "Timestamp", "Zeta", "Alpha", "Mid"]

        # A filter whose first row lists Mid first keeps the order too.
        open_table(b, server, table, "?filter=RowKey%20ge%20'2'")
        assert columns(b) == ["PartitionKey", "RowKey", "Timestamp", "Zeta", "Alpha", "Mid"]
        open_table(b, server, table, "?filter=RowKey%20eq%20'3'")
        assert columns(b) == ["PartitionKey", "RowKey", "Timestamp", "Alpha", "Mid"]
        # Cells sit under their own headers.
        cells = b.all("#entities tbody tr[data-index] td")[4:]
        assert [td.get_attribute("data-type") for td in cells] == ["String", "Boolean"]

        # Another table has its own order.
        other = unique_table_name("columnsother")
        service.create_table(other).create_entity({"PartitionKey": "p", "RowKey": "1", "Mid": 1, "Zeta": 2})
        try:
            open_table(b, server, other)
            assert columns(b) == ["PartitionKey", "RowKey", "Timestamp", "Mid", "Zeta"]
        finally:
            service.delete_table(other)
    finally:
        service.delete_table(table)
