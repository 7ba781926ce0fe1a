"""The explorer's Faults page in a real headless Chromium: add a rule with the form, see
it fire for an SDK request, a bad set edited as JSON refused with the server's message
(the set in force kept), and Clear. Every result is checked on /faults itself."""

from __future__ import annotations

import json

import requests
from selenium.webdriver.support.ui import Select

from conftest import TafelServer, unique_table_name
from explorer_browser import Browser, browser  # noqa: F401 - a fixture


def faults(srv):
    return requests.get(srv.admin_url + "/faults", timeout=10).json()["rules"]


def test_add_see_fire_refuse_and_clear_fault_rules(browser, _workdir):
    from azure.data.tables import TableClient

    name = unique_table_name("fp")
    srv = TafelServer(_workdir / f"data-{name}", _workdir / f"tafel-{name}.log")
    srv.start()
    try:
        b: Browser = browser
        b.load(srv.admin_url + "/#/faults")
        b.wait(lambda: "No fault rules" in b.text("#faults-list"), "an empty list")
        b.type("#fault-table", name)
        Select(b.el("#fault-operation")).select_by_visible_text("InsertEntity")
        Select(b.el("#fault-error")).select_by_visible_text("ServerBusy")
        b.type("#fault-times", "2")
        b.click("#faults-add-submit")
        b.wait(lambda: "answer ServerBusy" in b.text("#faults-list"), "the rule listed")
        assert faults(srv) == [
            {"table": name, "operation": "InsertEntity", "error": "ServerBusy", "times": 2, "matched": 0, "fired": 0}
        ]
        with TableClient.from_connection_string(srv.conn_str, name) as t:
            t.create_table()
            t.create_entity({"PartitionKey": "p", "RowKey": "r"})  # retried past the two 503s
        b.d.refresh()
        b.wait(lambda: b.text("#faults-list .fired") == "2", "the fire count")

        # A bad set, edited as JSON: refused with the server's message, the set kept.
        rules = json.loads(b.el("#faults-json").get_attribute("value"))
        assert rules == [{"table": name, "operation": "InsertEntity", "error": "ServerBusy", "times": 2}]
        b.js("document.querySelector('#faults-json').value = arguments[0]",
             json.dumps(rules + [{"operation": "Nope", "error": "ServerBusy"}]))
        b.click("#faults-apply")
        b.wait(lambda: "rule 2: operation" in b.text("#faults-error"), "the refusal shown")
        assert [r["fired"] for r in faults(srv)] == [2]

        b.click("#faults-clear")
        b.wait(lambda: "No fault rules" in b.text("#faults-list"), "cleared")
        assert faults(srv) == []
        b.screenshot("11-faults")
    finally:
        srv.stop()
