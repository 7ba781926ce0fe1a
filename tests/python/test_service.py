"""Table ACLs, service properties and CORS preflight (operations.md §4-8) via the SDK and raw HTTP."""

from datetime import datetime, timezone

import pytest
from azure.data.tables import (
    TableAccessPolicy,
    TableAnalyticsLogging,
    TableCorsRule,
    TableMetrics,
    TableRetentionPolicy,
    TableServiceClient,
)

from conftest import assert_error, unique_table_name

UTC = timezone.utc


def test_table_acl_round_trip(table):
    assert table.get_table_access_policy() == {}
    policies = {
        "read-only": TableAccessPolicy(
            start=datetime(2024, 6, 1, tzinfo=UTC), expiry=datetime(2024, 7, 1, tzinfo=UTC), permission="r"
        ),
        "all": TableAccessPolicy(expiry=datetime(2030, 1, 1, tzinfo=UTC), permission="raud"),
        "bare": TableAccessPolicy(),
    }
    table.set_table_access_policy(signed_identifiers=policies)
    got = table.get_table_access_policy()
    assert set(got) == set(policies)
    assert got["read-only"].permission == "r"
    assert str(got["read-only"].start).startswith("2024-06-01"), got["read-only"].start
    assert str(got["read-only"].expiry).startswith("2024-07-01"), got["read-only"].expiry
    assert got["bare"] is None  # a policy of no fields comes back as none, as Azure answers
    assert got["all"].permission == "raud"
    # Clearing.
    table.set_table_access_policy(signed_identifiers={})
    assert table.get_table_access_policy() == {}


def _acl_xml(n):
    ids = "".join(
        f"<SignedIdentifier><Id>id{i}</Id><AccessPolicy><Permission>r</Permission></AccessPolicy></SignedIdentifier>"
        for i in range(n)
    )
    return f'<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers>{ids}</SignedIdentifiers>'


def test_table_acl_limit_raw(raw, raw_table):
    r = raw.put(f"/{raw_table}", query={"comp": "acl"}, body=_acl_xml(5), content_type="application/xml")
    assert r.status_code == 204, (r.status_code, r.text)
    g = raw.get(f"/{raw_table}", query={"comp": "acl"}, accept="application/xml")
    assert g.status_code == 200, g.text
    assert g.text.count("<SignedIdentifier>") == 5
    r = raw.put(f"/{raw_table}", query={"comp": "acl"}, body=_acl_xml(6), content_type="application/xml")
    assert r.status_code == 400, (r.status_code, r.text)
    assert r.headers.get("x-ms-error-code") == "InvalidXmlDocument"
    g = raw.get(f"/{raw_table}", query={"comp": "acl"}, accept="application/xml")
    assert g.text.count("<SignedIdentifier>") == 5


def test_table_acl_missing_table(raw):
    r = raw.get(f"/{unique_table_name('noacl')}", query={"comp": "acl"}, accept="application/xml")
    assert r.status_code == 404
    assert r.headers.get("x-ms-error-code") == "TableNotFound"


def test_service_properties_round_trip(fresh_server):
    with TableServiceClient.from_connection_string(fresh_server.conn_str) as service:
        props = service.get_service_properties()
        assert props["cors"] == []
        assert props["analytics_logging"].write is False
        service.set_service_properties(
            analytics_logging=TableAnalyticsLogging(
                write=True, retention_policy=TableRetentionPolicy(enabled=True, days=7)
            ),
            hour_metrics=TableMetrics(
                enabled=True, include_apis=False, retention_policy=TableRetentionPolicy(enabled=True, days=7)
            ),
            cors=[
                TableCorsRule(
                    ["https://app.example.com"],
                    ["GET", "PUT", "MERGE"],
                    max_age_in_seconds=600,
                    exposed_headers=["x-ms-*"],
                    allowed_headers=["x-ms-*", "content-type"],
                )
            ],
        )
        props = service.get_service_properties()
        assert props["analytics_logging"].write is True
        assert props["analytics_logging"].retention_policy.days == 7
        assert props["hour_metrics"].enabled is True
        assert props["minute_metrics"].enabled is False
        [rule] = props["cors"]
        assert "https://app.example.com" in str(rule.allowed_origins)
        assert rule.max_age_in_seconds == 600

        # Omitted elements keep their values.
        service.set_service_properties(minute_metrics=TableMetrics(enabled=False))
        props = service.get_service_properties()
        assert props["analytics_logging"].write is True
        assert len(props["cors"]) == 1

    # CORS preflight against the rule above (unauthenticated).
    import requests

    url = f"{fresh_server.url}/Tables"
    ok = requests.options(
        url,
        headers={
            "Origin": "https://app.example.com",
            "Access-Control-Request-Method": "PUT",
            "Access-Control-Request-Headers": "x-ms-date,content-type",
        },
    )
    assert ok.status_code == 200, (ok.status_code, ok.text)
    assert ok.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert ok.headers.get("Access-Control-Max-Age") == "600"
    bad = requests.options(url, headers={"Origin": "https://evil.example.com", "Access-Control-Request-Method": "PUT"})
    assert bad.status_code == 403
    assert bad.headers.get("x-ms-error-code") == "CorsPreflightFailure"
    bad = requests.options(url, headers={"Origin": "https://app.example.com", "Access-Control-Request-Method": "DELETE"})
    assert bad.status_code == 403
    missing = requests.options(url, headers={"Origin": "https://app.example.com"})
    assert missing.status_code == 400
    assert missing.headers.get("x-ms-error-code") == "InvalidHeaderValue"


@pytest.mark.parametrize("days", [0, 366])
def test_service_properties_bad_retention(raw, days):
    xml = (
        '<?xml version="1.0" encoding="utf-8"?><StorageServiceProperties><HourMetrics><Version>1.0</Version>'
        "<Enabled>true</Enabled><IncludeAPIs>false</IncludeAPIs>"
        f"<RetentionPolicy><Enabled>true</Enabled><Days>{days}</Days></RetentionPolicy></HourMetrics>"
        "</StorageServiceProperties>"
    )
    r = raw.put("/", query={"restype": "service", "comp": "properties"}, body=xml, content_type="application/xml")
    assert r.status_code == 400, (r.status_code, r.text)
    assert r.headers.get("x-ms-error-code") == "InvalidXmlNodeValue"


def test_service_properties_malformed_xml(raw):
    r = raw.put("/", query={"restype": "service", "comp": "properties"}, body="<oops", content_type="application/xml")
    assert r.status_code == 400, (r.status_code, r.text)
    assert r.headers.get("x-ms-error-code") == "InvalidXmlDocument"
