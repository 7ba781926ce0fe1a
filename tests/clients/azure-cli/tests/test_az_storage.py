"""az storage table … and az storage entity …: tables, typed entities, filters, paging with
markers, conditional writes, SAS and account keys."""

import pytest

from conftest import ACCOUNT, KEY, RUN, URL, az, az_fails


def entity(table, pk, rk, *props):
    return az("storage", "entity", "insert", "-t", table, "-e", f"PartitionKey={pk}", f"RowKey={rk}", *props)


def show(table, pk, rk, *extra, **kw):
    return az("storage", "entity", "show", "-t", table, "--partition-key", pk, "--row-key", rk, *extra, **kw)


def query(table, *extra, **kw):
    return az("storage", "entity", "query", "-t", table, *extra, **kw)


def test_tables_create_exist_list_and_delete():
    names = [f"azt{RUN}a", f"azt{RUN}b"]
    for n in names:
        assert az("storage", "table", "create", "-n", n) == {"created": True}
    # Without --fail-on-exist the CLI creates if not exists and says created either way.
    assert az("storage", "table", "create", "-n", names[0]) == {"created": True}
    assert "TableAlreadyExists" in az_fails("storage", "table", "create", "-n", names[0], "--fail-on-exist")
    assert az("storage", "table", "exists", "-n", names[0]) == {"exists": True}
    assert az("storage", "table", "exists", "-n", f"azt{RUN}none") == {"exists": False}
    listed = [t["name"] for t in az("storage", "table", "list") if t["name"].startswith(f"azt{RUN}")]
    assert listed == names
    for n in names:
        assert az("storage", "table", "delete", "-n", n) == {"deleted": True}
    assert az("storage", "table", "exists", "-n", names[0]) == {"exists": False}


def test_typed_properties_round_trip(table):
    entity(
        table, "t", "1",
        "Str=Zoë 東京 'q' + & # %",
        "Int32=-2147483648", "Int32@odata.type=Edm.Int32",
        f"Int64={2**53 + 1}", "Int64@odata.type=Edm.Int64",
        "Double=1.5", "Double@odata.type=Edm.Double",
        "Bool=true", "Bool@odata.type=Edm.Boolean",
        "When=2024-01-02T03:04:05.1234567Z", "When@odata.type=Edm.DateTime",
        "Id=12345678-1234-5678-9abc-def012345678", "Id@odata.type=Edm.Guid",
        "Bytes=AP8=", "Bytes@odata.type=Edm.Binary",
    )  # fmt: skip
    got = show(table, "t", "1")
    assert got["Str"] == "Zoë 東京 'q' + & # %"
    assert got["Int32"] == -2147483648
    assert got["Int64"] == {"edm_type": "Edm.Int64", "value": 2**53 + 1}
    assert got["Double"] == 1.5 and got["Bool"] is True
    assert got["When"].startswith("2024-01-02T03:04:05.123456")
    assert str(got["Id"]).endswith("12345678-1234-5678-9abc-def012345678") or got["Id"]["value"] == "12345678-1234-5678-9abc-def012345678"
    assert "etag" in got and got["etag"].startswith('W/"datetime')
    assert show(table, "t", "1", "--select", "Str")["Str"] == "Zoë 東京 'q' + & # %"


AWKWARD = ["with space", "it's", "a+b", "x&y=z", "#hash", "100%", "Zoë 東京"]


def test_filters_on_awkward_strings_and_numbers(table):
    for i, s in enumerate(AWKWARD):
        entity(table, "f", f"{i:02}", f"S={s}", f"N={i}", "N@odata.type=Edm.Int32")
    for i, s in enumerate(AWKWARD):
        quoted = s.replace("'", "''")
        got = query(table, "--filter", f"S eq '{quoted}'")["items"]
        assert [e["RowKey"] for e in got] == [f"{i:02}"], s
    got = query(table, "--filter", "N ge 5 and PartitionKey eq 'f'", "--select", "RowKey", "N")["items"]
    assert [(e["RowKey"], e["N"]) for e in got] == [("05", 5), ("06", 6)]
    assert set(got[0]) <= {"RowKey", "N", "etag", "Timestamp"}


def test_num_results_pages_with_a_marker(table):
    for i in range(7):
        entity(table, "p", f"{i:02}", f"N={i}", "N@odata.type=Edm.Int32")
    first = query(table, "--num-results", "3")
    assert [e["N"] for e in first["items"]] == [0, 1, 2]
    marker = first["nextMarker"]
    assert marker.get("nextpartitionkey") and marker.get("nextrowkey")
    second = query(table, "--num-results", "3", "--marker", *(f"{k}={v}" for k, v in marker.items()))
    assert [e["N"] for e in second["items"]] == [3, 4, 5]


def test_merge_replace_and_delete_with_etags(table):
    etag = entity(table, "p", "e", "V=1", "Keep=x")["etag"]
    merged = az("storage", "entity", "merge", "-t", table, "-e", "PartitionKey=p", "RowKey=e", "V=2", "--if-match", etag)
    got = show(table, "p", "e")
    # The CLI types a value that looks like a number as one.
    assert (got["V"], got["Keep"]) == (2, "x")
    stale = az_fails("storage", "entity", "replace", "-t", table, "-e", "PartitionKey=p", "RowKey=e", "V=3", "--if-match", etag)
    assert "The update condition specified in the request was not satisfied." in stale
    az("storage", "entity", "replace", "-t", table, "-e", "PartitionKey=p", "RowKey=e", "V=4", "--if-match", merged["etag"])
    got = show(table, "p", "e")
    assert got["V"] == 4 and "Keep" not in got
    entity(table, "p", "e", "W=5", "--if-exists", "merge")
    assert show(table, "p", "e")["W"] == 5
    # The CLI shows the service's message (Azure's words), not its code.
    assert "The specified entity already exists." in az_fails("storage", "entity", "insert", "-t", table, "-e", "PartitionKey=p", "RowKey=e")
    az("storage", "entity", "delete", "-t", table, "--partition-key", "p", "--row-key", "e")
    assert "The specified resource does not exist." in az_fails("storage", "entity", "show", "-t", table, "--partition-key", "p", "--row-key", "e")


def test_account_name_and_key_with_the_table_endpoint(table):
    auth = ("--account-name", ACCOUNT, "--account-key", KEY, "--table-endpoint", URL)
    az("storage", "entity", "insert", "-t", table, "-e", "PartitionKey=k", "RowKey=1", "V=by key", auth=auth)
    assert show(table, "k", "1")["V"] == "by key"
    wrong = ("--account-name", ACCOUNT, "--account-key", "d3Jvbmcga2V5IHdyb25nIGtleSB3cm9uZyBrZXk=", "--table-endpoint", URL)
    # The CLI reports a 403 AuthenticationFailed in its own words.
    assert "Authentication failure" in az_fails("storage", "entity", "show", "-t", table, "--partition-key", "k", "--row-key", "1", auth=wrong)


def test_a_table_sas_reads_and_cannot_write(table):
    entity(table, "a", "1", "V=a")
    sas = az("storage", "table", "generate-sas", "-n", table, "--permissions", "r", "--expiry", "2099-01-01T00:00Z")
    auth = ("--account-name", ACCOUNT, "--sas-token", sas, "--table-endpoint", URL)
    assert [e["V"] for e in query(table, auth=auth)["items"]] == ["a"]
    denied = az_fails("storage", "entity", "insert", "-t", table, "-e", "PartitionKey=z", "RowKey=1", auth=auth)
    assert "Forbidden" in denied  # the CLI shows the status, not the code


def test_an_account_sas_lists_tables_and_reads(table):
    entity(table, "a", "1", "V=a")
    sas = az(
        "storage", "account", "generate-sas", "--services", "t", "--resource-types", "sco",
        "--permissions", "rl", "--expiry", "2099-01-01T00:00Z",
    )  # fmt: skip
    auth = ("--account-name", ACCOUNT, "--sas-token", sas, "--table-endpoint", URL)
    assert table in [t["name"] for t in az("storage", "table", "list", auth=auth)]
    assert [e["V"] for e in query(table, auth=auth)["items"]] == ["a"]


@pytest.mark.parametrize("permissions", ["r", "raud"])
def test_a_stored_access_policy_backs_a_sas(table, permissions):
    az("storage", "table", "policy", "create", "-t", table, "-n", "p1", "--permissions", permissions, "--expiry", "2099-01-01T00:00Z")
    assert az("storage", "table", "policy", "show", "-t", table, "-n", "p1")["permission"] == permissions
    sas = az("storage", "table", "generate-sas", "-n", table, "--policy-name", "p1")
    auth = ("--account-name", ACCOUNT, "--sas-token", sas, "--table-endpoint", URL)
    insert = ("storage", "entity", "insert", "-t", table, "-e", "PartitionKey=s", "RowKey=1")
    if "a" in permissions:
        az(*insert, auth=auth)
        assert query(table, auth=auth)["items"][0]["RowKey"] == "1"
    else:
        assert "Forbidden" in az_fails(*insert, auth=auth)
