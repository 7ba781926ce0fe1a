"""The web explorer in a real headless Chromium: a user's whole session (sign in, create a
table, insert an entity of every EDM type, find it with a filter and the builder, edit it,
an ETag conflict both ways, export and re-import, bulk delete, delete the table), a wrong
key refused, a read-only SAS that cannot write, a SAS made in the explorer, the status page,
and small screens. Every result is checked through the Python SDK, not the page alone.
Screenshots of each main screen go to target/explorer-screens/."""

from __future__ import annotations

import csv
import io
import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
import requests
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.core.exceptions import HttpResponseError
from azure.data.tables import EdmType, TableClient, TableSasPermissions, TableServiceClient, generate_table_sas
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from conftest import ACCOUNT, BACKEND, KEY, unique_table_name
from explorer_browser import Browser, browser  # noqa: F401 - a fixture

GUID = "0f8fad5b-d9cb-469f-a165-70867728950e"
BIG = "9007199254740993"  # 2**53 + 1: a JavaScript number would round it
NAME = "hello wörld + & # % 'q'"
WHEN = "2024-05-06T07:08:09.1234567Z"


def sign_in(b: Browser, server, account=ACCOUNT, key=None, kind="key", secret=None, expect_ok=True):
    b.load(server.admin_url + "/#/a/+")
    b.d.execute_script("sessionStorage.clear()")
    b.load(server.admin_url + "/")
    b.click(f".tab[data-kind={kind}]")
    b.type("#signin-account", account)
    if kind == "key" and key is None:
        b.click("#signin-dev")
    else:
        b.type("#signin-secret", secret if secret is not None else key)
    b.click("#signin-submit")
    if expect_ok:
        b.wait(lambda: "#/a/" in b.d.current_url and b.all("#tables"), "signed in")


def open_table(b: Browser, server, table: str, query: str = ""):
    b.load(f"{server.admin_url}/#/a/{ACCOUNT}/{table}{query}")
    b.wait(lambda: b.text("#table-name") == table, f"table {table} open")
    b.wait(lambda: not b.all("#grid[aria-busy]"), "grid loaded")


def grid_rows(b: Browser):
    return [r for r in b.all("#entities tbody tr[data-index]")]


def open_row(b: Browser, index: int = 0):
    """Opens a row's editor once the grid has settled (a save reloads it)."""
    b.wait(lambda: not b.all("#grid[aria-busy]"), "grid loaded")
    b.wait(lambda: grid_rows(b)[index].click() or True, "the row clicked")
    b.el("#edit-props")


def set_prop(b: Browser, index: int, name: str, type_: str, value: str, fmt: str = ""):
    while len(b.all("#edit-props tr")) <= index:
        b.click("#edit-add")
    row = b.all("#edit-props tr")[index]
    n = row.find_element("css selector", "[data-part=name]")
    n.clear()
    n.send_keys(name)
    Select(row.find_element("css selector", "[data-part=type]")).select_by_visible_text(type_)
    if type_ == "Boolean":
        Select(row.find_element("css selector", "[data-part=bool]")).select_by_visible_text(value)
        return
    if fmt:
        Select(row.find_element("css selector", "[data-part=format]")).select_by_visible_text(fmt)
    v = row.find_element("css selector", "[data-part=value]")
    v.clear()
    v.send_keys(value)


def prop_value(b: Browser, name: str):
    for row in b.all("#edit-props tr"):
        if row.find_element("css selector", "[data-part=name]").get_attribute("value") == name:
            return row.find_element("css selector", "[data-part=value]")
    raise AssertionError(f"no property {name} in the editor")


def assert_every_type(e: dict, int32: int = -42):
    """The entity the explorer inserted, read back through the SDK, type by type."""
    assert e["Name"] == NAME
    assert e["Small"] == int32 and isinstance(e["Small"], int)
    big = e["Big"]
    assert (big.value, big.edm_type) == (int(BIG), EdmType.INT64), big
    assert e["Ratio"] == 3.25
    assert e["Flag"] is True
    assert e["When"].tables_service_value == WHEN
    assert isinstance(e["Id"], uuid.UUID) and str(e["Id"]) == GUID
    assert e["Blob"] == b"\x00\xff\x10"


def test_a_whole_session_in_the_browser(browser, server, service):
    b = browser
    table = unique_table_name("explorer")
    # Sign in with the well-known development key.
    b.load(server.admin_url + "/")
    b.d.execute_script("sessionStorage.clear()")
    b.load(server.admin_url + "/")
    b.click("#signin-dev")
    b.screenshot("01-sign-in")
    b.click("#signin-submit")
    b.wait(lambda: b.all("#table-new"), "signed in")

    # Create a table.
    b.click("#table-new")
    b.type("#new-table-name", table + Keys.ENTER)
    b.wait(lambda: b.text("#table-name") == table, "the new table opens")
    assert table in [t.name for t in service.list_tables()]
    b.wait(lambda: any(li.text == table for li in b.all("#table-list li")), "listed")

    # Insert an entity of every EDM type, typed in the editor.
    b.click("#entity-new")
    b.type("#edit-pk", "p1")
    b.type("#edit-rk", "r1")
    for i, (name, t, v, fmt) in enumerate([
        ("Name", "String", NAME, ""), ("Small", "Int32", "-42", ""), ("Big", "Int64", BIG, ""),
        ("Ratio", "Double", "3.25", ""), ("Flag", "Boolean", "true", ""), ("When", "DateTime", WHEN, ""),
        ("Id", "Guid", GUID, ""), ("Blob", "Binary", "00ff10", "hex"),
    ]):
        set_prop(b, i, name, t, v, fmt)
    b.screenshot("03-editor")
    b.click("#edit-save")
    b.no_dialog()
    client = service.get_table_client(table)
    assert_every_type(client.get_entity("p1", "r1"))
    client.create_entity({"PartitionKey": "p2", "RowKey": "other", "Name": "not me", "Big": 5})
    b.click("#run")
    b.wait(lambda: len(grid_rows(b)) == 2, "both rows shown")
    cell = b.el("#entities td[data-type=Int64]")
    assert cell.text.startswith(BIG), cell.text  # exact, and its type shown beside it
    assert "Int64" in cell.text
    b.screenshot("02-entities")

    # A raw $filter on the Int64, then the builder on the string with every awkward character.
    b.type("#filter", f"Big eq {BIG}L" + Keys.ENTER)
    b.wait(lambda: len(grid_rows(b)) == 1 and "r1" in grid_rows(b)[0].text, "the filter finds it")
    assert "1 row on this page" in b.text("#result-status")
    # The server's plan under the results: no index, so the table's two rows were read.
    assert "plan table-scan, 2 examined" in b.text("#result-status"), b.text("#result-status")
    b.click("#builder-toggle")
    row = b.el(".builder-row")
    row.find_element("css selector", "[data-part=prop]").send_keys("Name")
    Select(row.find_element("css selector", "[data-part=type]")).select_by_visible_text("String")
    row.find_element("css selector", "[data-part=value]").send_keys(NAME)
    b.click("#builder-apply")
    b.wait(lambda: b.el("#filter").get_attribute("value") == "Name eq 'hello wörld + & # % ''q'''", "builder wrote the filter")
    b.wait(lambda: len(grid_rows(b)) == 1 and "p1" in grid_rows(b)[0].text, "the builder's filter finds it")
    # The query is a link: opened anew it shows the same rows.
    link = b.d.current_url
    assert "filter=" in link and KEY not in link
    b.load("about:blank")
    b.load(link)
    b.wait(lambda: len(grid_rows(b)) == 1 and b.el("#filter").get_attribute("value").startswith("Name eq"), "the link reopens the query")
    b.screenshot("04-query")

    # Edit: merge a new Int32 in; the rest is untouched.
    open_row(b)
    prop_value(b, "Small").clear()
    prop_value(b, "Small").send_keys("7")
    b.click("#edit-merge")
    b.click("#edit-save")
    b.no_dialog()
    assert_every_type(client.get_entity("p1", "r1"), int32=7)

    # ETag conflict: the SDK changes the entity while the editor has it open.
    open_row(b)
    client.update_entity({"PartitionKey": "p1", "RowKey": "r1", "Small": 100}, mode="merge")
    prop_value(b, "Small").clear()
    prop_value(b, "Small").send_keys("8")
    b.click("#edit-save")
    conflict = b.el("#edit-conflict")
    b.wait(lambda: "100 (Int32)" in conflict.text and "8 (Int32)" in conflict.text, "both versions shown")
    b.screenshot("05-conflict")
    b.click("#conflict-overwrite")
    b.no_dialog()
    assert client.get_entity("p1", "r1")["Small"] == 8
    # ... and once more, this time taking theirs.
    open_row(b)
    client.update_entity({"PartitionKey": "p1", "RowKey": "r1", "Small": 200}, mode="merge")
    prop_value(b, "Small").clear()
    prop_value(b, "Small").send_keys("9")
    b.click("#edit-save")
    b.click("#conflict-reload")
    b.wait(lambda: prop_value(b, "Small").get_attribute("value") == "200", "theirs reloaded")
    b.click("#edit-save")
    b.no_dialog()
    assert client.get_entity("p1", "r1")["Small"] == 200
    client.update_entity({"PartitionKey": "p1", "RowKey": "r1", "Small": -42}, mode="merge")

    # Export the whole table (both rows) as JSONL and CSV.
    b.type("#filter", Keys.CONTROL + "a" + Keys.DELETE + Keys.ENTER)
    b.wait(lambda: len(grid_rows(b)) == 2, "unfiltered again")
    b.click("#export-jsonl")
    jsonl = b.download(f"{table}.jsonl").read_text(encoding="utf-8")
    b.click("dialog[open] button")
    lines = [json.loads(l) for l in jsonl.splitlines()]
    assert [(l["PartitionKey"], l["RowKey"]) for l in lines] == [("p1", "r1"), ("p2", "other")]
    assert lines[0]["Big"] == BIG and lines[0]["Big@odata.type"] == "Edm.Int64"
    assert lines[0]["When"] == WHEN and lines[0]["Blob"] == "AP8Q"
    b.click("#export-csv")
    rows = list(csv.reader(io.StringIO(b.download(f"{table}.csv").read_text(encoding="utf-8"))))
    b.click("dialog[open] button")
    assert rows[0][:3] == ["PartitionKey", "RowKey", "Timestamp"] and "Big@type" in rows[0]
    assert rows[1][rows[0].index("Big")] == BIG and rows[1][rows[0].index("Big@type")] == "Edm.Int64"

    # Re-import each file into a table of its own: the same entities, type by type.
    for ext in ("jsonl", "csv"):
        copy = unique_table_name(f"import{ext}")
        service.create_table(copy)
        open_table(b, server, copy)
        b.click("#import")
        b.el("#import-file").send_keys(str(b.downloads / f"{table}.{ext}"))
        b.click("#import-start")
        b.wait(lambda: b.el("#import-status").get_attribute("data-done"), "import finished")
        assert "2 written, 0 rejected" in b.text("#import-status")
        b.click("dialog[open] .actions button")
        got = service.get_table_client(copy)
        assert_every_type(got.get_entity("p1", "r1"))
        assert got.get_entity("p2", "other")["Name"] == "not me"
        service.delete_table(copy)

    # Import with rejects: a bad Int32, and in insert mode an entity that exists.
    bad = b.downloads / "bad.jsonl"
    bad.write_text("\n".join([
        json.dumps({"PartitionKey": "p1", "RowKey": "r1", "X": 1}),
        json.dumps({"PartitionKey": "p3", "RowKey": "ok", "X": 2}),
        '{"PartitionKey": "p3", "RowKey": "big", "X@odata.type": "Edm.Int32", "X": 3000000000}',
    ]) + "\n")
    open_table(b, server, table)
    b.click("#import")
    b.el("#import-file").send_keys(str(bad))
    b.click("#import-start")
    b.wait(lambda: b.el("#import-status").get_attribute("data-done"), "import finished")
    report = b.text("#import-rejects")
    assert "EntityAlreadyExists" in report and "InvalidInput" in report, report
    assert "1 written, 2 rejected" in b.text("#import-status")
    b.screenshot("06-import-report")
    b.click("dialog[open] .actions button")
    assert client.get_entity("p3", "ok")["X"] == 2

    # Bulk delete of a selection, as batches.
    b.click("#run")
    b.wait(lambda: len(grid_rows(b)) == 3, "three rows")
    b.click("#select-all")
    b.click("#delete-selected")
    b.click("#confirm-ok")
    b.wait(lambda: b.all("#entities td.muted") and not grid_rows(b), "every row deleted")
    assert list(client.list_entities()) == []

    # Delete the table, typing its name to confirm.
    b.click("#table-delete")
    b.type("#confirm-input", table)
    b.click("#confirm-ok")
    b.wait(lambda: table not in [t.name for t in service.list_tables()], "table deleted")

    # The key was never sent: not in a URL, not in a header (only signatures are).
    for r in b.sent():
        assert KEY not in r["url"] and all(KEY not in str(v) for v in r["headers"].values()), r["url"]
    assert any(r["url"].startswith(server.admin_url + "/api/") for r in b.sent())
    # Nothing was fetched from anywhere else: the explorer works offline.
    elsewhere = [r["url"] for r in b.sent() if not r["url"].startswith((server.admin_url, "data:", "blob:", "about:"))]
    assert not elsewhere, elsewhere


def test_a_wrong_key_is_refused(browser, server):
    wrong = "d3Jvbmcta2V5LW9mLXRoZS1yaWdodC1sZW5ndGgtZm9yLWhtYWMtc2hhMjU2LWtleXM="
    sign_in(browser, server, key=wrong, expect_ok=False)
    err = browser.wait_text("#signin-error", lambda t: t != "", "the refusal shown")
    assert "403 AuthenticationFailed" in err, err
    assert browser.js("return sessionStorage.getItem('tafel.sessions')") in (None, "[]")
    browser.screenshot("07-wrong-key")


def test_a_read_only_sas_can_read_but_not_write(browser, server, service):
    table = unique_table_name("sasro")
    client = service.create_table(table)
    client.create_entity({"PartitionKey": "p", "RowKey": "seen", "V": 1})
    sas = generate_table_sas(AzureNamedKeyCredential(ACCOUNT, KEY), table, permission=TableSasPermissions(read=True),
                             expiry=datetime.now(timezone.utc) + timedelta(hours=1))
    b = browser
    sign_in(b, server, kind="sas", secret=sas)
    b.wait(lambda: b.text("#table-name") == table, "the SAS's table opens")
    b.wait(lambda: len(grid_rows(b)) == 1, "its row is readable")
    b.click("#entity-new")
    b.type("#edit-pk", "p")
    b.type("#edit-rk", "written")
    b.click("#edit-save")
    err = b.wait_text("#edit-error", lambda t: t != "", "the refusal shown")
    assert "403 AuthorizationPermissionMismatch" in err, err
    b.d.find_element("css selector", "dialog[open]").send_keys(Keys.ESCAPE)
    assert [e["RowKey"] for e in client.list_entities()] == ["seen"]
    service.delete_table(table)


def test_a_sas_made_in_the_explorer_works_in_the_sdk(browser, server, service):
    table = unique_table_name("sasmade")
    client = service.create_table(table)
    client.create_entity({"PartitionKey": "a", "RowKey": "1"})
    client.create_entity({"PartitionKey": "b", "RowKey": "1"})
    b = browser
    sign_in(b, server)
    open_table(b, server, table)
    b.click("#sas")
    b.type("#sas-spk", "a")
    b.type("#sas-epk", "a")
    b.click("dialog[open] button.primary")
    url = b.wait(lambda: b.el("#sas-url").get_attribute("value"), "a SAS URL")
    b.screenshot("08-sas")
    b.d.find_element("css selector", "dialog[open]").send_keys(Keys.ESCAPE)
    endpoint, token = url.split("?", 1)
    assert endpoint == f"http://127.0.0.1:{server.port}/{ACCOUNT}/{table}"
    with TableClient(f"http://127.0.0.1:{server.port}/{ACCOUNT}", table, credential=AzureSasCredential(token)) as c:
        assert [e["PartitionKey"] for e in c.list_entities()] == ["a"]  # its key range only
        with pytest.raises(HttpResponseError) as e:
            c.create_entity({"PartitionKey": "a", "RowKey": "2"})
        assert e.value.status_code == 403
    service.delete_table(table)


def test_the_status_page_shows_version_backend_and_rates(browser, server):
    b = browser
    sign_in(b, server)
    b.load(server.admin_url + "/#/status")
    version = requests.get(server.admin_url + "/explorer.json", timeout=5).json()["version"]
    b.wait(lambda: b.text("#status-version") == version, "the version")
    assert b.text("#status-backend") == BACKEND
    assert b.text("#status-ready") == "yes"
    b.wait(lambda: "QueryTables" in b.text("#status-ops"), "per-operation rows")
    b.wait(lambda: b.text("#status-rate") != "…", "a rate once two scrapes are in")
    assert " ms" in b.text("#status-ops")
    b.screenshot("09-status")


def test_keys_dark_mode_and_a_phone_sized_screen(browser, server, service):
    table = unique_table_name("keys")
    service.create_table(table).create_entity({"PartitionKey": "p", "RowKey": "r", "N": 1})
    b = browser
    sign_in(b, server)
    open_table(b, server, table)
    b.d.find_element("css selector", "body").send_keys("/")
    b.wait(lambda: b.js("return document.activeElement.id") == "filter", "/ focuses the filter")
    b.js("document.activeElement.blur()")
    b.d.find_element("css selector", "body").send_keys("n")
    b.wait(lambda: b.text("dialog[open] h2") == "New entity", "n opens a new entity")
    b.d.find_element("css selector", "dialog[open]").send_keys(Keys.ESCAPE)
    b.no_dialog()
    b.click("#theme")  # auto -> light
    b.click("#theme")  # light -> dark
    assert b.js("return document.documentElement.dataset.theme") == "dark"
    assert b.js("return getComputedStyle(document.body).backgroundColor") == "rgb(20, 24, 31)"
    b.screenshot("10-dark")
    b.click("#theme")
    b.d.set_window_size(390, 844)
    open_table(b, server, table)
    assert b.js("return document.documentElement.scrollWidth <= window.innerWidth + 1"), "no sideways scrolling on a phone"
    b.screenshot("11-phone")
    b.d.set_window_size(1280, 800)
    service.delete_table(table)


def test_signing_without_webcrypto_matches_webcrypto(browser, server):
    """Over plain HTTP on another host a page has no crypto.subtle; the fallback must sign the same."""
    browser.load(server.admin_url + "/")
    same = browser.d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        import('/js/sign.js').then(async (s) => {
          const enc = new TextEncoder();
          const out = [];
          for (const [key, msg] of [[new Uint8Array(64).fill(7), ''], [enc.encode('k'), 'x'.repeat(1000)],
                                    [new Uint8Array(100).fill(1), 'GET\\n\\n\\nWed\\n/a/b'], [s.b64decode(arguments[0]), 'ünïcode']]) {
            out.push(s.b64encode(s.hmacFallback(key, enc.encode(msg))) === await s.hmac(key, msg));
          }
          done(out);
        });
    """, KEY)
    assert same == [True, True, True, True]
