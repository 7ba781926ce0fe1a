"""Table ACLs (operations.md §4-§5), service properties and stats (§6-§7) and CORS (§8):
through azure-data-tables where the SDK exposes the operation, and raw HTTP (``requests``)
for wire details, validation errors, preflight and the CORS headers of actual requests."""

from __future__ import annotations

import base64
import re
import uuid
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime

import pytest
import requests
from azure.core.credentials import AzureNamedKeyCredential, AzureSasCredential
from azure.core.exceptions import HttpResponseError
from azure.data.tables import (
    TableAccessPolicy,
    TableAnalyticsLogging,
    TableClient,
    TableCorsRule,
    TableMetrics,
    TableRetentionPolicy,
    TableServiceClient,
    generate_table_sas,
)

from conftest import ACCOUNT, KEY, TafelServer, sdk_error_code, unique_table_name

UTC = timezone.utc
XML = "application/xml"
ACL = {"comp": "acl"}
PROPS = {"restype": "service", "comp": "properties"}
STATS = {"restype": "service", "comp": "stats"}


def xml_code(r: requests.Response):
    """The <Code> of an XML error body (service and ACL operations answer errors in XML)."""
    m = re.search(r"<Code>([^<]*)</Code>", r.text)
    return m.group(1) if m else None


def assert_xml_error(r: requests.Response, status: int, code: str):
    detail = f"{r.request.method} {r.request.url} -> {r.status_code} {r.text[:300]!r}"
    assert r.status_code == status, detail
    assert r.headers.get("x-ms-error-code") == code, detail
    assert r.headers.get("content-type", "").startswith(XML), detail
    assert xml_code(r) == code, detail


def acl_doc(*identifiers: str) -> str:
    return '<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers>' + "".join(identifiers) + "</SignedIdentifiers>"


def sid(id_: str, start: str = "", expiry: str = "", permission: str = "") -> str:
    parts = ""
    if start:
        parts += f"<Start>{start}</Start>"
    if expiry:
        parts += f"<Expiry>{expiry}</Expiry>"
    if permission:
        parts += f"<Permission>{permission}</Permission>"
    return f"<SignedIdentifier><Id>{id_}</Id><AccessPolicy>{parts}</AccessPolicy></SignedIdentifier>"


# ---------------------------------------------------------------------------
# Table ACL
# ---------------------------------------------------------------------------


def test_acl_round_trip_normalises_dates_and_permissions(raw, raw_table):
    body = acl_doc(
        sid("full", "2024-06-01T00:00:00Z", "2024-07-01T12:30:00.5Z", "dura"),
        sid("just-expiry", expiry="2030-01-01T00:00:00.1234567Z"),
        sid("offset", start="2024-06-01T02:00:00+02:00"),
        "<SignedIdentifier><Id>bare</Id></SignedIdentifier>",
    )
    r = raw.put(f"/{raw_table}", query=ACL, body=body, content_type=XML)
    assert r.status_code == 204, (r.status_code, r.text)
    assert r.content == b""
    g = raw.get(f"/{raw_table}", query=ACL, accept=XML)
    assert g.status_code == 200, g.text
    assert g.headers["content-type"].startswith(XML)
    text = g.text
    assert text.startswith('<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers>'), text
    assert (
        "<SignedIdentifier><Id>full</Id><AccessPolicy><Start>2024-06-01T00:00:00.0000000Z</Start>"
        "<Expiry>2024-07-01T12:30:00.5000000Z</Expiry><Permission>raud</Permission></AccessPolicy></SignedIdentifier>"
    ) in text
    assert "<Id>just-expiry</Id><AccessPolicy><Expiry>2030-01-01T00:00:00.1234567Z</Expiry></AccessPolicy>" in text
    assert "<Id>offset</Id><AccessPolicy><Start>2024-06-01T00:00:00.0000000Z</Start></AccessPolicy>" in text
    assert "<SignedIdentifier><Id>bare</Id></SignedIdentifier>" in text
    # Order is kept.
    assert [m for m in re.findall(r"<Id>([^<]*)</Id>", text)] == ["full", "just-expiry", "offset", "bare"]
    # HEAD answers with the headers only.
    h = raw.request("HEAD", f"/{raw_table}", query=ACL, accept=XML)
    assert h.status_code == 200 and h.content == b""


def test_acl_through_the_sdk(table):
    assert table.get_table_access_policy() == {}
    table.set_table_access_policy(
        {
            "reader": TableAccessPolicy(
                permission="r", start=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), expiry=datetime(2031, 1, 1, tzinfo=UTC)
            ),
            "writer": TableAccessPolicy(permission="ua", expiry=datetime(2031, 1, 1, tzinfo=UTC)),
        }
    )
    got = table.get_table_access_policy()
    assert set(got) == {"reader", "writer"}
    assert got["reader"].permission == "r"
    assert str(got["reader"].start).startswith("2024-01-02") and "03:04:05" in str(got["reader"].start)
    assert got["writer"].permission == "au"  # canonical order
    assert got["writer"].start is None
    # Setting replaces every policy.
    table.set_table_access_policy({"only": TableAccessPolicy(permission="d", expiry=datetime(2031, 1, 1, tzinfo=UTC))})
    assert set(table.get_table_access_policy()) == {"only"}
    with pytest.raises(ValueError):
        # The SDK turns the server's InvalidXmlDocument for a sixth policy into a ValueError.
        table.set_table_access_policy({f"p{i}": TableAccessPolicy(permission="r") for i in range(6)})
    assert set(table.get_table_access_policy()) == {"only"}


@pytest.mark.parametrize(
    "body,code",
    [
        (acl_doc(sid("x" * 65, permission="r")), "InvalidXmlNodeValue"),
        (acl_doc(sid("", permission="r")), "InvalidXmlNodeValue"),
        (acl_doc(sid("same", permission="r"), sid("same", permission="a")), "InvalidXmlNodeValue"),
        (acl_doc(sid("p", permission="rw")), "InvalidXmlNodeValue"),
        (acl_doc(sid("p", permission="R")), "InvalidXmlNodeValue"),
        (acl_doc(sid("p", start="yesterday")), "InvalidXmlNodeValue"),
        (acl_doc(sid("p", expiry="2024-13-01T00:00:00Z")), "InvalidXmlNodeValue"),
        (acl_doc(*[sid(f"id{i}", permission="r") for i in range(6)]), "InvalidXmlDocument"),
        ("<SignedIdentifiers><SignedIdentifier>", "InvalidXmlDocument"),
        ("<NotAcl/>", "InvalidXmlDocument"),
        ("<SignedIdentifiers><SignedIdentifier><AccessPolicy/></SignedIdentifier></SignedIdentifiers>", "InvalidXmlDocument"),
        ("<SignedIdentifiers><Other/></SignedIdentifiers>", "InvalidXmlDocument"),
        ('<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><SignedIdentifiers/>', "InvalidXmlDocument"),
    ],
    ids=[
        "id-65-chars",
        "id-empty",
        "id-duplicate",
        "permission-w",
        "permission-uppercase",
        "start-not-a-date",
        "expiry-month-13",
        "six-identifiers",
        "unclosed",
        "wrong-root",
        "no-id",
        "unknown-element",
        "doctype",
    ],
)
def test_acl_validation(raw, raw_table, body, code):
    good = acl_doc(sid("keep", permission="r"))
    assert raw.put(f"/{raw_table}", query=ACL, body=good, content_type=XML).status_code == 204
    r = raw.put(f"/{raw_table}", query=ACL, body=body, content_type=XML)
    assert_xml_error(r, 400, code)
    # A refused ACL leaves the stored one alone.
    assert "<Id>keep</Id>" in raw.get(f"/{raw_table}", query=ACL, accept=XML).text


def test_acl_limits_accepted(raw, raw_table):
    ids = [sid("x" * 64, permission="r"), sid("é" * 64, permission="a")] + [
        sid(f"id{i}", permission="raud") for i in range(3)
    ]
    r = raw.put(f"/{raw_table}", query=ACL, body=acl_doc(*ids), content_type=XML)
    assert r.status_code == 204, r.text
    g = raw.get(f"/{raw_table}", query=ACL, accept=XML)
    assert g.text.count("<SignedIdentifier>") == 5
    assert "é" * 64 in g.content.decode("utf-8")


def test_acl_empty_body_clears(raw, raw_table):
    raw.put(f"/{raw_table}", query=ACL, body=acl_doc(sid("a", permission="r")), content_type=XML)
    r = raw.put(f"/{raw_table}", query=ACL, body=b"", content_type=XML)
    assert r.status_code == 204, r.text
    g = raw.get(f"/{raw_table}", query=ACL, accept=XML)
    assert g.text == '<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers />'


def test_acl_missing_table_and_methods(raw, service):
    missing = unique_table_name("noacl")
    assert_xml_error(raw.get(f"/{missing}", query=ACL, accept=XML), 404, "TableNotFound")
    r = raw.put(f"/{missing}", query=ACL, body=acl_doc(), content_type=XML)
    assert_xml_error(r, 404, "TableNotFound")
    with pytest.raises(HttpResponseError) as e:
        service.get_table_client(missing).get_table_access_policy()
    assert sdk_error_code(e.value) == "TableNotFound"
    name = unique_table_name("aclverb")
    service.create_table(name)
    try:
        assert_xml_error(raw.delete(f"/{name}", query=ACL, accept=XML), 405, "MethodNotAllowed")
    finally:
        service.delete_table(name)


def test_acl_goes_with_the_table(raw):
    name = unique_table_name("aclgone")
    assert raw.create_table(name).status_code == 201
    raw.put(f"/{name}", query=ACL, body=acl_doc(sid("a", permission="r")), content_type=XML)
    assert raw.delete_table(name).status_code == 204
    assert raw.create_table(name).status_code == 201
    try:
        assert "<SignedIdentifiers />" in raw.get(f"/{name}", query=ACL, accept=XML).text
    finally:
        raw.delete_table(name)


def test_acl_needs_shared_key(server, table):
    table.set_table_access_policy({"p": TableAccessPolicy(permission="raud", expiry=datetime(2031, 1, 1, tzinfo=UTC))})
    sas = generate_table_sas(AzureNamedKeyCredential(ACCOUNT, KEY), table.table_name, policy_id="p")
    tc = TableClient(endpoint=server.url, table_name=table.table_name, credential=AzureSasCredential(sas))
    for op in (lambda: tc.get_table_access_policy(), lambda: tc.set_table_access_policy({})):
        with pytest.raises(HttpResponseError) as e:
            op()
        assert e.value.status_code == 403
    assert set(table.get_table_access_policy()) == {"p"}


def test_acl_and_properties_survive_restart(fresh_server):
    raw = fresh_server.raw
    name = unique_table_name("aclkeep")
    assert raw.create_table(name).status_code == 201
    body = acl_doc(sid("kept", "2024-01-01T00:00:00Z", "2031-01-01T00:00:00Z", "ra"))
    assert raw.put(f"/{name}", query=ACL, body=body, content_type=XML).status_code == 204
    props = (
        "<StorageServiceProperties><Cors><CorsRule><AllowedOrigins>https://kept.example</AllowedOrigins>"
        "<AllowedMethods>GET</AllowedMethods><MaxAgeInSeconds>5</MaxAgeInSeconds></CorsRule></Cors>"
        "</StorageServiceProperties>"
    )
    assert raw.put("/", query=PROPS, body=props, content_type=XML).status_code == 202
    fresh_server.restart(graceful=True)
    g = raw.get(f"/{name}", query=ACL, accept=XML)
    assert "<Id>kept</Id>" in g.text and "<Permission>ra</Permission>" in g.text
    assert "<AllowedOrigins>https://kept.example</AllowedOrigins>" in raw.get("/", query=PROPS, accept=XML).text


# ---------------------------------------------------------------------------
# Service properties and stats
# ---------------------------------------------------------------------------


def test_default_properties_on_the_wire(fresh_server):
    g = fresh_server.raw.get("/", query=PROPS, accept=XML)
    assert g.status_code == 200, g.text
    assert g.headers["content-type"].startswith(XML)
    assert g.text == (
        '<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties>'
        "<Logging><Version>1.0</Version><Delete>false</Delete><Read>false</Read><Write>false</Write>"
        "<RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></Logging>"
        "<HourMetrics><Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>false</Enabled>"
        "</RetentionPolicy></HourMetrics>"
        "<MinuteMetrics><Version>1.0</Version><Enabled>false</Enabled><RetentionPolicy><Enabled>false</Enabled>"
        "</RetentionPolicy></MinuteMetrics><Cors /></StorageServiceProperties>"
    )


def test_properties_through_the_sdk(fresh_server):
    with TableServiceClient.from_connection_string(fresh_server.conn_str) as svc:
        svc.set_service_properties(
            analytics_logging=TableAnalyticsLogging(
                read=True, delete=True, retention_policy=TableRetentionPolicy(enabled=True, days=30)
            ),
            hour_metrics=TableMetrics(enabled=True, include_apis=True, retention_policy=TableRetentionPolicy(enabled=True, days=3)),
            minute_metrics=TableMetrics(enabled=False),
            cors=[
                TableCorsRule(["https://a.example", "https://b.example"], ["GET", "PUT"], max_age_in_seconds=60),
                TableCorsRule(["*"], ["DELETE"], allowed_headers=["x-ms-meta*"], exposed_headers=["etag"]),
            ],
        )
        p = svc.get_service_properties()
        assert (p["analytics_logging"].read, p["analytics_logging"].write, p["analytics_logging"].delete) == (True, False, True)
        assert p["analytics_logging"].retention_policy.enabled is True
        assert p["analytics_logging"].retention_policy.days == 30
        assert p["hour_metrics"].enabled and p["hour_metrics"].include_apis is True
        assert p["hour_metrics"].retention_policy.days == 3
        assert p["minute_metrics"].enabled is False
        a, b = p["cors"]
        assert a.allowed_origins == ["https://a.example", "https://b.example"] or "https://b.example" in str(a.allowed_origins)
        assert a.max_age_in_seconds == 60
        assert "DELETE" in str(b.allowed_methods) and "x-ms-meta*" in str(b.allowed_headers)
        # Only the CORS element: the others stay.
        svc.set_service_properties(cors=[])
        p = svc.get_service_properties()
        assert p["cors"] == [] and p["analytics_logging"].read is True and p["hour_metrics"].enabled is True


def test_properties_put_is_202_and_partial(raw_fresh):
    raw = raw_fresh
    full = (
        '<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties>'
        "<Logging><Version>1.0</Version><Delete>true</Delete><Read>false</Read><Write>true</Write>"
        "<RetentionPolicy><Enabled>true</Enabled><Days>7</Days></RetentionPolicy></Logging>"
        "<MinuteMetrics><Version>1.0</Version><Enabled>true</Enabled>"
        "<RetentionPolicy><Enabled>false</Enabled><Days>9</Days></RetentionPolicy></MinuteMetrics>"
        "</StorageServiceProperties>"
    )
    r = raw.put("/", query=PROPS, body=full, content_type=XML)
    assert r.status_code == 202 and r.content == b"", (r.status_code, r.text)
    text = raw.get("/", query=PROPS, accept=XML).text
    assert "<Logging><Version>1.0</Version><Delete>true</Delete><Read>false</Read><Write>true</Write>" in text
    # Enabled metrics get IncludeAPIs (false when not given); disabled retention drops Days.
    assert (
        "<MinuteMetrics><Version>1.0</Version><Enabled>true</Enabled><IncludeAPIs>false</IncludeAPIs>"
        "<RetentionPolicy><Enabled>false</Enabled></RetentionPolicy></MinuteMetrics>"
    ) in text
    assert "<HourMetrics><Version>1.0</Version><Enabled>false</Enabled>" in text
    r = raw.put("/", query=PROPS, body="<StorageServiceProperties/>", content_type=XML)
    assert r.status_code == 202
    assert raw.get("/", query=PROPS, accept=XML).text == text


CORS_RULE = (
    "<CorsRule><AllowedOrigins>{o}</AllowedOrigins><AllowedMethods>{m}</AllowedMethods>"
    "<MaxAgeInSeconds>{a}</MaxAgeInSeconds><ExposedHeaders>{e}</ExposedHeaders><AllowedHeaders>{h}</AllowedHeaders></CorsRule>"
)


def cors_doc(*rules: str) -> str:
    return "<StorageServiceProperties><Cors>" + "".join(rules) + "</Cors></StorageServiceProperties>"


def rule(o="https://a.example", m="GET", a="10", e="", h="") -> str:
    return CORS_RULE.format(o=o, m=m, a=a, e=e, h=h)


def retention_doc(days: str, element: str = "HourMetrics") -> str:
    return (
        f"<StorageServiceProperties><{element}><Version>1.0</Version><Enabled>true</Enabled>"
        f"<RetentionPolicy><Enabled>true</Enabled><Days>{days}</Days></RetentionPolicy></{element}>"
        "</StorageServiceProperties>"
    )


@pytest.mark.parametrize(
    "body,code",
    [
        (cors_doc(*[rule()] * 6), "InvalidXmlNodeValue"),
        (cors_doc(rule(m="GET,TRACE")), "InvalidXmlNodeValue"),
        (cors_doc(rule(o="")), "InvalidXmlNodeValue"),
        (cors_doc(rule(m="")), "InvalidXmlNodeValue"),
        (cors_doc(rule(o="*,https://a.example")), "InvalidXmlNodeValue"),
        (cors_doc(rule(a="-1")), "InvalidXmlNodeValue"),
        (cors_doc(rule(a="soon")), "InvalidXmlNodeValue"),
        (cors_doc(rule(h="x-a*,x-b*,x-c*")), "InvalidXmlNodeValue"),
        (cors_doc(rule(e=",".join(f"h{i}" for i in range(65)))), "InvalidXmlNodeValue"),
        (cors_doc(rule(o="https://" + "a" * 300)), "InvalidXmlNodeValue"),
        (retention_doc("0"), "InvalidXmlNodeValue"),
        (retention_doc("366", "Logging").replace("<Enabled>true</Enabled><Retention", "<Delete>false</Delete><Read>false</Read><Write>false</Write><Retention"), "InvalidXmlNodeValue"),
        (retention_doc("7").replace("1.0", "2.0"), "InvalidXmlNodeValue"),
        (retention_doc("7").replace("<Enabled>true</Enabled><Retention", "<Enabled>yes</Enabled><Retention"), "InvalidXmlNodeValue"),
        ("<StorageServiceProperties><Cors><CorsRule><AllowedOrigins>*</AllowedOrigins></CorsRule></Cors></StorageServiceProperties>", "InvalidXmlDocument"),
        ("<StorageServiceProperties><Logging><Version>1.0</Version></Logging></StorageServiceProperties>", "InvalidXmlDocument"),
        ("<StorageServiceProperties>", "InvalidXmlDocument"),
        ("", "InvalidXmlDocument"),
        ("<Other/>", "InvalidXmlDocument"),
    ],
    ids=[
        "six-rules",
        "method-trace",
        "no-origins",
        "no-methods",
        "star-and-list",
        "negative-max-age",
        "max-age-text",
        "three-prefixed-headers",
        "65-exposed-headers",
        "long-origin",
        "days-0",
        "days-366",
        "version-2",
        "bool-yes",
        "rule-missing-elements",
        "logging-missing-elements",
        "unclosed",
        "empty",
        "wrong-root",
    ],
)
def test_properties_validation(raw_fresh, body, code):
    good = cors_doc(rule(o="https://keep.example"))
    assert raw_fresh.put("/", query=PROPS, body=good, content_type=XML).status_code == 202
    r = raw_fresh.put("/", query=PROPS, body=body, content_type=XML)
    assert_xml_error(r, 400, code)
    assert "https://keep.example" in raw_fresh.get("/", query=PROPS, accept=XML).text


def test_service_root_errors(raw):
    assert_xml_error(raw.get("/", query={"restype": "service", "comp": "nope"}, accept=XML), 400, "InvalidQueryParameterValue")
    assert_xml_error(raw.get("/", query={"restype": "container", "comp": "properties"}, accept=XML), 400, "InvalidQueryParameterValue")
    assert_xml_error(raw.delete("/", query=PROPS, accept=XML), 405, "MethodNotAllowed")
    assert_xml_error(raw.put("/", query=STATS, body="", content_type=XML), 405, "MethodNotAllowed")


def test_service_stats(service, raw):
    stats = service.get_service_stats()  # goes to the path-style secondary, /acct-secondary/acct/
    geo = stats["geo_replication"]
    assert geo["status"] == "live"
    assert abs(geo["last_sync_time"] - datetime.now(UTC)) < timedelta(minutes=5)
    # The document itself, from the host-style secondary.
    g = raw.get("/", query=STATS, accept=XML, host_style=True, headers={"Host": f"{raw.account}-secondary.table.localhost"})
    assert g.status_code == 200 and g.headers["content-type"].startswith(XML), g.text
    m = re.fullmatch(
        r'<\?xml version="1.0" encoding="utf-8"\?><StorageServiceStats><GeoReplication><Status>live</Status>'
        r"<LastSyncTime>([^<]+)</LastSyncTime></GeoReplication></StorageServiceStats>",
        g.text,
    )
    assert m, g.text
    assert abs(parsedate_to_datetime(m.group(1)) - datetime.now(UTC)) < timedelta(minutes=5)


def test_service_stats_only_on_the_secondary(raw):
    """Azure serves replication stats from the secondary endpoint only."""
    assert_xml_error(raw.get("/", query=STATS, accept=XML), 400, "InvalidQueryParameterValue")


def test_properties_are_per_account(two_accounts):
    srv, second = two_accounts
    srv.raw.put("/", query=PROPS, body=cors_doc(rule(o="https://first.example")), content_type=XML)
    assert "first.example" in srv.raw.get("/", query=PROPS, accept=XML).text
    assert "<Cors />" in second.get("/", query=PROPS, accept=XML).text
    ok = preflight(srv, "https://first.example", "GET")
    assert ok.status_code == 200
    other = preflight(srv, "https://first.example", "GET", account="second")
    assert other.status_code == 403 and other.headers.get("x-ms-error-code") == "CorsPreflightFailure"


# ---------------------------------------------------------------------------
# CORS
# ---------------------------------------------------------------------------


@pytest.fixture
def raw_fresh(fresh_server):
    return fresh_server.raw


SECOND_KEY = base64.b64encode(b"key of the second test account!!").decode()


@pytest.fixture
def two_accounts(_workdir):
    from conftest import RawClient

    srv = TafelServer(
        _workdir / f"data-{uuid.uuid4().hex[:8]}",
        _workdir / f"tafel-{uuid.uuid4().hex[:8]}.log",
        extra_args=["--account", f"{ACCOUNT}:{KEY}", "--account", f"second:{SECOND_KEY}"],
    )
    srv.start()
    yield srv, RawClient(srv, account="second", key=SECOND_KEY)
    srv.kill9()


def preflight(srv, origin, method, headers=None, account=ACCOUNT, path="/Tables"):
    h = {}
    if origin is not None:
        h["Origin"] = origin
    if method is not None:
        h["Access-Control-Request-Method"] = method
    if headers is not None:
        h["Access-Control-Request-Headers"] = headers
    return requests.options(f"http://127.0.0.1:{srv.port}/{account}{path}", headers=h)


@pytest.fixture
def cors_server(fresh_server):
    doc = cors_doc(
        rule(
            o="https://app.example,https://other.example",
            m="GET,PUT,MERGE,POST",
            a="600",
            e="x-ms-request-id,etag",
            h="x-ms-meta*,content-type,x-ms-date",
        ),
        rule(o="https://app.example", m="DELETE", a="30", h="*"),
        rule(o="*", m="GET", a="5", e="x-ms-*", h=""),
    )
    r = fresh_server.raw.put("/", query=PROPS, body=doc, content_type=XML)
    assert r.status_code == 202, r.text
    return fresh_server


def test_preflight_matches_the_first_rule(cors_server):
    r = preflight(cors_server, "https://app.example", "PUT", "X-MS-Meta-Color, content-type")
    assert r.status_code == 200, (r.status_code, r.text)
    assert r.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert r.headers["Access-Control-Allow-Methods"] == "PUT"
    assert r.headers["Access-Control-Allow-Headers"] == "X-MS-Meta-Color,content-type"
    assert r.headers["Access-Control-Max-Age"] == "600"
    assert r.headers["Access-Control-Allow-Credentials"] == "true"
    assert r.headers["Vary"] == "Origin"
    assert r.content == b""
    # DELETE is only in the second rule (any header allowed there).
    r = preflight(cors_server, "https://app.example", "DELETE", "x-custom")
    assert r.status_code == 200 and r.headers["Access-Control-Max-Age"] == "30"
    # Any origin may GET without headers (third rule): answered with `*`, no credentials.
    r = preflight(cors_server, "https://stranger.example", "GET")
    assert r.status_code == 200
    assert r.headers["Access-Control-Allow-Origin"] == "*"
    assert "Access-Control-Allow-Credentials" not in r.headers
    assert r.headers["Access-Control-Max-Age"] == "5"
    # Works on any resource path, without credentials.
    for path in ["/", "/sometable", "/sometable(PartitionKey='a',RowKey='b')", "/$batch"]:
        assert preflight(cors_server, "https://other.example", "POST", path=path).status_code == 200, path


@pytest.mark.parametrize(
    "origin,method,headers",
    [
        ("https://evil.example", "PUT", None),
        ("https://app.example", "PATCH", None),
        ("https://app.example", "PUT", "x-not-allowed"),
        ("https://other.example", "DELETE", None),
        ("https://stranger.example", "GET", "x-ms-date"),
        ("https://app.example.evil", "GET", "content-type"),
    ],
)
def test_preflight_without_a_matching_rule(cors_server, origin, method, headers):
    r = preflight(cors_server, origin, method, headers)
    assert_xml_error(r, 403, "CorsPreflightFailure")
    assert "Access-Control-Allow-Origin" not in r.headers


def test_preflight_needs_origin_and_method(cors_server):
    assert_xml_error(preflight(cors_server, None, "GET"), 400, "InvalidHeaderValue")
    assert_xml_error(preflight(cors_server, "https://app.example", None), 400, "InvalidHeaderValue")


def test_preflight_without_rules_or_account(fresh_server):
    assert_xml_error(preflight(fresh_server, "https://app.example", "GET"), 403, "CorsPreflightFailure")
    assert_xml_error(preflight(fresh_server, "https://app.example", "GET", account="nosuchaccount"), 403, "CorsPreflightFailure")


def test_cors_headers_on_actual_requests(cors_server):
    raw = cors_server.raw
    name = unique_table_name("cors")
    r = raw.create_table(name, headers={"Origin": "https://app.example"})
    assert r.status_code == 201
    assert r.headers["Access-Control-Allow-Origin"] == "https://app.example"
    assert r.headers["Access-Control-Expose-Headers"] == "x-ms-request-id,etag"
    assert r.headers["Access-Control-Allow-Credentials"] == "true"
    assert r.headers["Vary"] == "Origin"
    # Error responses carry them too.
    r = raw.get(f"/{unique_table_name('nope')}()", headers={"Origin": "https://app.example"})
    assert r.status_code == 404 and r.headers["x-ms-error-code"] == "TableNotFound"
    assert r.headers["Access-Control-Allow-Origin"] == "https://app.example"
    r = raw.get("/Tables", headers={"Origin": "https://app.example"}, auth=None)
    assert r.status_code == 403 and r.headers["Access-Control-Allow-Origin"] == "https://app.example"
    # Any origin may GET (third rule): `*`, its exposed headers, no credentials.
    r = raw.get("/Tables", headers={"Origin": "https://stranger.example"})
    assert r.status_code == 200
    assert r.headers["Access-Control-Allow-Origin"] == "*"
    assert r.headers["Access-Control-Expose-Headers"] == "x-ms-*"
    assert "Access-Control-Allow-Credentials" not in r.headers
    assert "Vary" not in r.headers  # the same answer for every origin
    # No matching rule (method, then origin): no CORS headers, but the answer varies by Origin.
    r = raw.delete(f"/Tables('{name}')", headers={"Origin": "https://stranger.example"})
    assert r.status_code == 204  # CORS only decides headers; the request itself was authorised
    assert "Access-Control-Allow-Origin" not in r.headers and r.headers["Vary"] == "Origin"
    other = unique_table_name("cors")
    r = raw.create_table(other, headers={"Origin": "https://evil.example"})
    assert r.status_code == 201
    assert "Access-Control-Allow-Origin" not in r.headers and r.headers["Vary"] == "Origin"
    # No Origin: not a CORS request.
    r = raw.get("/Tables")
    assert "Access-Control-Allow-Origin" not in r.headers and "Vary" not in r.headers
