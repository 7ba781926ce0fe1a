"""Data-model limits (limits.md §1): each rule at the limit and one past it."""

import base64

import pytest

from conftest import assert_error, entity_path

KEY_TOO_LARGE = {"KeyValueTooLarge", "InvalidInput", "OutOfRangeInput"}
BAD_KEY = {"InvalidInput", "OutOfRangeInput"}
OUT_OF_RANGE = {"OutOfRangeInput", "InvalidInput"}
BAD_VALUE = {"InvalidInput", "InvalidValueType"}


def b64(n: int, fill: int = 0xAB) -> str:
    return base64.b64encode(bytes([fill]) * n).decode()


def ok_insert(raw, table, entity):
    r = raw.insert(table, entity)
    assert r.status_code == 201, (r.status_code, r.headers.get("x-ms-error-code"), r.text[:300])
    return r


# ---------------------------------------------------------------------------
# PartitionKey / RowKey
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["PartitionKey", "RowKey"])
@pytest.mark.parametrize(
    "unit,count_ok",
    [
        ("a", 512),  # 1 UTF-16 unit, 1 UTF-8 byte
        ("é", 512),  # 1 UTF-16 unit, 2 UTF-8 bytes
        ("あ", 512),  # 1 UTF-16 unit, 3 UTF-8 bytes: limit is in UTF-16, not UTF-8
        ("😀", 256),  # 2 UTF-16 units (surrogate pair)
    ],
)
def test_key_length(raw, raw_table, which, unit, count_ok):
    other = "RowKey" if which == "PartitionKey" else "PartitionKey"
    at_limit = unit * count_ok
    ok_insert(raw, raw_table, {which: at_limit, other: "x"})
    keys = {which: at_limit, other: "x"}
    g = raw.get_entity(raw_table, keys["PartitionKey"], keys["RowKey"])
    assert g.status_code == 200, g.text
    assert g.json()[which] == at_limit
    past = unit * (count_ok + 1)
    assert_error(raw.insert(raw_table, {which: past, other: "x"}), 400, KEY_TOO_LARGE)


@pytest.mark.parametrize("which", ["PartitionKey", "RowKey"])
@pytest.mark.parametrize(
    "char",
    ["/", "\\", "#", "?", "\x00", "\x01", "\t", "\n", "\x1f", "\x7f", "\x80", "\x9f"],
    ids=lambda c: f"U+{ord(c):04X}",
)
def test_key_forbidden_chars(raw, raw_table, which, char):
    other = "RowKey" if which == "PartitionKey" else "PartitionKey"
    assert_error(raw.insert(raw_table, {which: f"a{char}b", other: "x"}), 400, BAD_KEY)
    assert_error(raw.insert(raw_table, {which: char, other: "x"}), 400, BAD_KEY)


@pytest.mark.parametrize(
    "char", [" ", "~", "\xa0", "\u00a1", "!", "'", "%", "*"], ids=lambda c: f"U+{ord(c):04X}"
)
def test_key_allowed_neighbour_chars(raw, raw_table, char):
    # Just outside the forbidden ranges.
    ok_insert(raw, raw_table, {"PartitionKey": f"a{char}b", "RowKey": char})
    g = raw.get_entity(raw_table, f"a{char}b", char)
    assert g.status_code == 200, g.text


@pytest.mark.parametrize("enc", ["%23", "%5C", "%01", "%3F"])
def test_key_forbidden_chars_in_url(raw, raw_table, enc):
    path = f"/{raw_table}(PartitionKey='a{enc}b',RowKey='x')"
    r = raw.put(path, json={"V": 1})
    assert_error(r, 400, BAD_KEY)


def test_empty_keys_allowed(raw, raw_table):
    ok_insert(raw, raw_table, {"PartitionKey": "", "RowKey": "", "V": 1})
    ok_insert(raw, raw_table, {"PartitionKey": "", "RowKey": "r", "V": 2})
    ok_insert(raw, raw_table, {"PartitionKey": "p", "RowKey": "", "V": 3})
    g = raw.get(f"/{raw_table}(PartitionKey='',RowKey='')")
    assert g.status_code == 200, g.text
    assert g.json()["V"] == 1
    assert [(e["PartitionKey"], e["RowKey"]) for e in raw.query_all(raw_table)] == [("", ""), ("", "r"), ("p", "")]
    u = raw.request("MERGE", entity_path(raw_table, "", ""), json={"W": 1}, headers={"If-Match": "*"})
    assert u.status_code == 204, u.text
    d = raw.delete(entity_path(raw_table, "", ""), headers={"If-Match": "*"})
    assert d.status_code == 204, d.text
    assert_error(raw.get(entity_path(raw_table, "", "")), 404, "ResourceNotFound")


@pytest.mark.parametrize("missing", ["PartitionKey", "RowKey"])
def test_missing_key(raw, raw_table, missing):
    e = {"PartitionKey": "p", "RowKey": "r", "V": 1}
    del e[missing]
    assert_error(raw.insert(raw_table, e), 400, {"PropertiesNeedValue", "InvalidInput"})
    e[missing] = None
    assert_error(raw.insert(raw_table, e), 400, {"PropertiesNeedValue", "InvalidInput"})


def test_key_not_a_string(raw, raw_table):
    assert_error(
        raw.insert(raw_table, {"PartitionKey": 5, "RowKey": "r"}),
        400,
        {"PrimaryKeyPropertyIsInvalidType", "InvalidInput"},
    )


# ---------------------------------------------------------------------------
# Property names and counts
# ---------------------------------------------------------------------------


def test_property_name_length(raw, raw_table):
    name255 = "P" + "n" * 254
    ok_insert(raw, raw_table, {"PartitionKey": "p", "RowKey": "255", name255: 1})
    assert raw.get_entity(raw_table, "p", "255").json()[name255] == 1
    name256 = "P" + "n" * 255
    assert_error(raw.insert(raw_table, {"PartitionKey": "p", "RowKey": "256", name256: 1}), 400, "PropertyNameTooLong")


@pytest.mark.parametrize("name", ["bad-name", "1leading", "has space", "dot.ted", "", "semi;colon", "q?"])
def test_property_name_invalid(raw, raw_table, name):
    assert_error(raw.insert(raw_table, {"PartitionKey": "p", "RowKey": "r", name: 1}), 400, "PropertyNameInvalid")


@pytest.mark.parametrize("name", ["_underscore", "camelCase9", "A", "x_1_y"])
def test_property_name_valid(raw, raw_table, name):
    ok_insert(raw, raw_table, {"PartitionKey": "p", "RowKey": "r", name: 1})
    assert raw.get_entity(raw_table, "p", "r").json()[name] == 1


def test_too_many_properties(raw, raw_table):
    e = {"PartitionKey": "p", "RowKey": "252"}
    e.update({f"P{i:03d}": i for i in range(252)})
    ok_insert(raw, raw_table, e)
    got = raw.get_entity(raw_table, "p", "252").json()
    assert sum(1 for k in got if k.startswith("P") and k != "PartitionKey") == 252
    e = {"PartitionKey": "p", "RowKey": "253"}
    e.update({f"P{i:03d}": i for i in range(253)})
    assert_error(raw.insert(raw_table, e), 400, "TooManyProperties")


def test_too_many_properties_after_merge(raw, raw_table):
    e = {"PartitionKey": "p", "RowKey": "m"}
    e.update({f"P{i:03d}": i for i in range(250)})
    ok_insert(raw, raw_table, e)
    path = entity_path(raw_table, "p", "m")
    r = raw.request("MERGE", path, json={"Q1": 1, "Q2": 2}, headers={"If-Match": "*"})
    assert r.status_code == 204, r.text  # 252: at the limit
    r = raw.request("MERGE", path, json={"Q3": 3}, headers={"If-Match": "*"})
    assert_error(r, 400, "TooManyProperties")


def test_duplicate_property(raw, raw_table):
    body = '{"PartitionKey":"p","RowKey":"r","A":1,"A":2}'
    assert_error(raw.insert(raw_table, body), 400, "DuplicatePropertiesSpecified")
    body = '{"PartitionKey":"p","RowKey":"r","PartitionKey":"q"}'
    assert_error(raw.insert(raw_table, body), 400, "DuplicatePropertiesSpecified")


@pytest.mark.parametrize("value", ['{"x":1}', "[1,2]", "[]", "{}"])
def test_nested_values_rejected(raw, raw_table, value):
    body = '{"PartitionKey":"p","RowKey":"r","A":' + value + "}"
    assert_error(raw.insert(raw_table, body), 400, "InvalidInput")


@pytest.mark.parametrize("body", ["{", "not json", '["PartitionKey"]', '"str"', '{"PartitionKey":"p",}'])
def test_malformed_json(raw, raw_table, body):
    assert_error(raw.insert(raw_table, body), 400, "InvalidInput")


# ---------------------------------------------------------------------------
# Value sizes
# ---------------------------------------------------------------------------


def test_string_size(raw, raw_table):
    ok_insert(raw, raw_table, {"PartitionKey": "s", "RowKey": "ascii", "S": "a" * 32000})
    assert raw.get_entity(raw_table, "s", "ascii").json()["S"] == "a" * 32000
    assert_error(
        raw.insert(raw_table, {"PartitionKey": "s", "RowKey": "ascii2", "S": "a" * 32768}), 400, "PropertyValueTooLarge"
    )


def test_string_size_counts_utf16_units(raw, raw_table):
    # 16,000 astral chars = 32,000 UTF-16 units: fine.
    ok_insert(raw, raw_table, {"PartitionKey": "s", "RowKey": "astral", "S": "😀" * 16000})
    assert raw.get_entity(raw_table, "s", "astral").json()["S"] == "😀" * 16000
    # 16,384 astral chars = 32,768 UTF-16 units: too large although only 16,384 code points.
    assert_error(
        raw.insert(raw_table, {"PartitionKey": "s", "RowKey": "astral2", "S": "😀" * 16384}),
        400,
        "PropertyValueTooLarge",
    )
    # 32,000 BMP chars of 3 UTF-8 bytes each (96,000 bytes) = 32,000 units: fine.
    ok_insert(raw, raw_table, {"PartitionKey": "s", "RowKey": "cjk", "S": "あ" * 32000})


def test_binary_size(raw, raw_table):
    ok_insert(raw, raw_table, {"PartitionKey": "b", "RowKey": "ok", "B": b64(64000), "B@odata.type": "Edm.Binary"})
    got = raw.get_entity(raw_table, "b", "ok").json()
    assert base64.b64decode(got["B"]) == bytes([0xAB]) * 64000
    assert_error(
        raw.insert(raw_table, {"PartitionKey": "b", "RowKey": "big", "B": b64(65536), "B@odata.type": "Edm.Binary"}),
        400,
        "PropertyValueTooLarge",
    )


def _binaries(count, size=60000):
    e = {}
    for i in range(count):
        e[f"B{i:02d}"] = b64(size, i)
        e[f"B{i:02d}@odata.type"] = "Edm.Binary"
    return e


def test_entity_size_binary(raw, raw_table):
    # 16 x 60,000 bytes = 960,000 bytes of data (< 1 MiB), although the base64 JSON body is
    # ~1.28 MB: the limit is on the entity, not the request body.
    e = {"PartitionKey": "big", "RowKey": "16"}
    e.update(_binaries(16))
    r = raw.insert(raw_table, e, headers={"Prefer": "return-no-content"})
    assert r.status_code == 204, (r.status_code, r.text[:300])
    got = raw.get_entity(raw_table, "big", "16").json()
    assert base64.b64decode(got["B15"]) == bytes([15]) * 60000
    # 20 x 60,000 = 1,200,000 bytes > 1 MiB.
    e = {"PartitionKey": "big", "RowKey": "20"}
    e.update(_binaries(20))
    assert_error(raw.insert(raw_table, e), 400, "EntityTooLarge")
    # Also on replace.
    assert_error(raw.put(entity_path(raw_table, "big", "16"), json=e, headers={"If-Match": "*"}), 400, "EntityTooLarge")


def test_entity_size_after_merge(raw, raw_table):
    e = {"PartitionKey": "big", "RowKey": "m"}
    e.update(_binaries(16))
    assert raw.insert(raw_table, e, headers={"Prefer": "return-no-content"}).status_code == 204
    extra = {"X1": b64(60000), "X1@odata.type": "Edm.Binary", "X2": b64(60000), "X2@odata.type": "Edm.Binary"}
    r = raw.request("MERGE", entity_path(raw_table, "big", "m"), json=extra, headers={"If-Match": "*"})
    assert_error(r, 400, "EntityTooLarge")
    got = raw.get_entity(raw_table, "big", "m").json()
    assert "X1" not in got


def test_entity_size_strings_count_two_bytes_per_char(raw, raw_table):
    # AZ size formula (limits.md): strings count 4 + 2 bytes per UTF-16 unit.
    # 16 x 32,000 chars ~ 1,024,356 bytes: fits.
    e = {"PartitionKey": "p", "RowKey": "16"}
    e.update({f"S{i:02d}": "s" * 32000 for i in range(16)})
    r = raw.insert(raw_table, e, headers={"Prefer": "return-no-content"})
    assert r.status_code == 204, (r.status_code, r.text[:300])
    # 17 x 32,000 chars ~ 1,088,374 bytes > 1 MiB (the JSON body is only ~544 KB).
    e = {"PartitionKey": "p", "RowKey": "17"}
    e.update({f"S{i:02d}": "s" * 32000 for i in range(17)})
    assert_error(raw.insert(raw_table, e), 400, "EntityTooLarge")


def test_request_body_over_4mib(raw, raw_table):
    e = {"PartitionKey": "p", "RowKey": "huge", "S": "x" * (5 * 1024 * 1024)}
    r = raw.insert(raw_table, e)
    assert r.status_code in (400, 413), (r.status_code, r.text[:300])
    assert_error(r, (400, 413), {"RequestBodyTooLarge", "EntityTooLarge", "ContentLengthExceeded", "PropertyValueTooLarge"})


# ---------------------------------------------------------------------------
# Typed values
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,ok",
    [
        ("1601-01-01T00:00:00Z", True),
        ("1601-01-01T00:00:00.0000000Z", True),
        ("1600-12-31T23:59:59.9999999Z", False),
        ("1000-01-01T00:00:00Z", False),
        ("0001-01-01T00:00:00Z", False),
        ("9999-12-31T23:59:59.9999999Z", True),
    ],
)
def test_datetime_range(raw, raw_table, value, ok):
    e = {"PartitionKey": "d", "RowKey": "r", "D": value, "D@odata.type": "Edm.DateTime"}
    r = raw.insert(raw_table, e)
    if ok:
        assert r.status_code == 201, (r.status_code, r.text)
    else:
        assert_error(r, 400, OUT_OF_RANGE)


@pytest.mark.parametrize("value", ["", "not a date", "2024-13-01T00:00:00Z", "2024-02-30T00:00:00Z", "10000-01-01T00:00:00Z"])
def test_datetime_invalid(raw, raw_table, value):
    e = {"PartitionKey": "d", "RowKey": "r", "D": value, "D@odata.type": "Edm.DateTime"}
    assert_error(raw.insert(raw_table, e), 400, {"InvalidInput", "OutOfRangeInput", "InvalidValueType"})


@pytest.mark.parametrize(
    "value,ok",
    [(2147483647, True), (-2147483648, True), (2147483648, False), (-2147483649, False), (1.5, False)],
)
def test_int32_range_annotated(raw, raw_table, value, ok):
    e = {"PartitionKey": "i", "RowKey": "r", "N": value, "N@odata.type": "Edm.Int32"}
    r = raw.insert(raw_table, e)
    if ok:
        assert r.status_code == 201, (r.status_code, r.text)
        assert raw.get_entity(raw_table, "i", "r").json()["N"] == value
    else:
        assert_error(r, 400, OUT_OF_RANGE | {"InvalidValueType"})


@pytest.mark.parametrize(
    "value,ok",
    [
        ("9223372036854775807", True),
        ("-9223372036854775808", True),
        ("9223372036854775808", False),
        ("-9223372036854775809", False),
        ("12x", False),
        ("1.5", False),
    ],
)
def test_int64_range(raw, raw_table, value, ok):
    e = {"PartitionKey": "i", "RowKey": "r", "N": value, "N@odata.type": "Edm.Int64"}
    r = raw.insert(raw_table, e)
    if ok:
        assert r.status_code == 201, (r.status_code, r.text)
        got = raw.get_entity(raw_table, "i", "r").json()
        assert got["N"] == value and got["N@odata.type"] == "Edm.Int64"
    else:
        assert_error(r, 400, OUT_OF_RANGE | {"InvalidValueType"})


@pytest.mark.parametrize(
    "typ,value",
    [
        ("Edm.Guid", "not-a-guid"),
        ("Edm.Guid", "3f2504e0-4f89-11d3-9a0c-0305e82c330"),
        ("Edm.Binary", "!!!notbase64"),
        ("Edm.Foo", "x"),
        ("Edm.Int64", 12.5),
        ("Edm.Boolean", "maybe"),
    ],
)
def test_bad_typed_values(raw, raw_table, typ, value):
    e = {"PartitionKey": "t", "RowKey": "r", "V": value, "V@odata.type": typ}
    assert_error(raw.insert(raw_table, e), 400, BAD_VALUE | {"OutOfRangeInput"})


def test_request_body_over_4mib_is_answered_even_while_the_client_still_sends(raw, raw_table):
    """The 413 must reach a client that writes its whole body before reading: the server
    reads the oversized body to the end instead of closing the connection under it."""
    import socket

    body = ('{"PartitionKey":"p","RowKey":"huge","S":"' + "x" * (5 * 1024 * 1024) + '"}').encode()
    r = raw.insert(raw_table, body, headers={"Prefer": "return-no-content"})
    assert_error(r, 413, "RequestBodyTooLarge")
    # Same over a bare socket with a declared length, sent in full before reading.
    head = (
        f"POST /{raw.account}/{raw_table} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"x-ms-version: 2019-02-02\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", raw.server.port), timeout=30) as s:
        s.sendall(head + body)
        reply = s.recv(65536).decode("latin-1")
    assert reply.startswith("HTTP/1.1 413"), reply[:200]


def test_entity_over_1mib_is_entity_too_large_before_its_values_are_checked(raw, raw_table):
    """Azure reports the whole entity's size before any one value's: 20 strings each one
    char over the limit (~1.3 MB in all) are EntityTooLarge, not PropertyValueTooLarge."""
    e = {"PartitionKey": "p", "RowKey": "both"}
    e.update({f"S{i:02d}": "s" * 32768 for i in range(20)})
    assert_error(raw.insert(raw_table, e), 400, "EntityTooLarge")
    one = {"PartitionKey": "p", "RowKey": "one", "S": "s" * 32768}
    assert_error(raw.insert(raw_table, one), 400, "PropertyValueTooLarge")
