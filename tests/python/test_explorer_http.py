"""The web explorer on the wire: where it is served (the admin listener; a browser opening the
Table API's bare root is sent there), the headers that keep its pages to their own origin,
its `/api/` path to the Table API (the same authentication, nothing without a credential),
`--no-explorer`, and the asset budget (everything embedded, under 300 KB compressed)."""

from __future__ import annotations

import gzip
import re
import uuid
from email.utils import formatdate

import requests

from conftest import ACCOUNT, KEY, TafelServer, canonicalized_resource, sign, shared_key_string_to_sign

HTML = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def signed_get(base: str, path: str, key: str = KEY) -> requests.Response:
    """GET base + /api + path, Shared Key signed for `path` (the Table API's own path)."""
    date = formatdate(usegmt=True)
    resource = canonicalized_resource(ACCOUNT, path, "")
    auth = f"SharedKey {ACCOUNT}:{sign(key, shared_key_string_to_sign('GET', '', '', date, resource))}"
    headers = {"x-ms-date": date, "x-ms-version": "2019-02-02", "Accept": "application/json;odata=nometadata", "Authorization": auth}
    return requests.get(f"{base}/api{path}", headers=headers, timeout=10)


def test_a_browser_opening_the_table_api_root_is_sent_to_the_explorer(server):
    root = f"http://127.0.0.1:{server.port}/"
    r = requests.get(root, headers=HTML, allow_redirects=False, timeout=5)
    assert r.status_code == 302 and r.headers["Location"] == server.admin_url + "/", r.headers
    # Anything else at the root stays the Table API's: a credential, a query, another Accept, a POST.
    for kwargs in (
        {"headers": {**HTML, "Authorization": "SharedKey devstoreaccount1:x"}},
        {"headers": HTML, "params": {"restype": "service", "comp": "properties"}},
        {"headers": {"Accept": "application/json"}},
    ):
        r = requests.get(root, allow_redirects=False, timeout=5, **kwargs)
        assert r.status_code != 302 and "x-ms-request-id" in r.headers, (kwargs, r.status_code)
    assert requests.post(root, headers=HTML, allow_redirects=False, timeout=5).status_code != 302


def test_explorer_pages_carry_headers_that_keep_them_to_their_origin(server):
    r = requests.get(server.admin_url + "/", timeout=5)
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/html; charset=utf-8"
    csp = r.headers["Content-Security-Policy"]
    for directive in ("default-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "script-src 'self'"):
        assert directive in csp
    assert r.headers["X-Frame-Options"] == "DENY" and r.headers["Referrer-Policy"] == "no-referrer"
    assert requests.get(server.admin_url + "/js/nothing.js", timeout=5).status_code == 404
    assert requests.post(server.admin_url + "/", timeout=5).status_code == 405


def test_every_asset_is_embedded_local_and_under_the_budget(server):
    """Walks what the page loads (index, its links, every module import): each is served,
    none names another origin (it works offline), and all of it gzipped is under 300 KB."""
    seen, queue, total = set(), ["/"], 0
    while queue:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        r = requests.get(server.admin_url + path, timeout=5)
        assert r.status_code == 200, path
        text = r.content.decode("utf-8")
        # An XML namespace (xmlns="http://…") is a name, not a fetch.
        local = re.sub(r'xmlns="[^"]*"', "", text)
        assert not re.search(r"""["'(]\s*(https?:)?//""", local), f"{path} refers to another origin"
        total += len(gzip.compress(r.content, 9))
        queue += re.findall(r'(?:href|src)="(/[^"#]+)"', text)
        queue += ["/js/" + m for m in re.findall(r'from "\./([\w-]+\.js)"', text)]
    assert {"/js/app.js", "/js/api.js", "/js/sign.js", "/explorer.css", "/favicon.svg"} <= seen
    assert total < 300 * 1024, f"{total} bytes compressed"


def test_the_api_path_is_the_table_api_with_its_authentication(server):
    r = signed_get(server.admin_url, f"/{ACCOUNT}/Tables")
    assert r.status_code == 200, r.text
    assert "value" in r.json()
    # No credential, a wrong key: refused exactly as on the Table API port.
    bare = requests.get(f"{server.admin_url}/api/{ACCOUNT}/Tables", timeout=5)
    assert bare.status_code == 403 and bare.headers["x-ms-error-code"] == "AuthenticationFailed"
    wrong = signed_get(server.admin_url, f"/{ACCOUNT}/Tables", key="d3Jvbmcta2V5")
    assert wrong.status_code == 403 and wrong.headers["x-ms-error-code"] == "AuthenticationFailed"
    # A host name with dots would be host-style addressing; the explorer's path is always path-style.
    r = requests.get(f"{server.admin_url}/api/{ACCOUNT}/Tables", headers={"Host": f"explorer.tafel.localhost:{server.admin_port}"}, timeout=5)
    assert r.status_code == 403 and r.headers["x-ms-error-code"] == "AuthenticationFailed"  # not InvalidUri/another account
    # A name that is not this machine's is refused before the pipeline (DNS rebinding).
    r = requests.get(f"{server.admin_url}/api/{ACCOUNT}/Tables", headers={"Host": f"explorer.example.com:{server.admin_port}"}, timeout=5)
    assert r.status_code == 403 and "x-ms-error-code" not in r.headers
    assert requests.get(f"{server.admin_url}/explorer.json", timeout=5).json()["tableEndpoint"] == f"http://127.0.0.1:{server.port}"


def test_no_explorer_serves_neither_pages_nor_api_nor_the_redirect(_workdir):
    name = uuid.uuid4().hex[:6]
    srv = TafelServer(_workdir / f"data-noexp-{name}", _workdir / f"tafel-noexp-{name}.log", extra_args=["--no-explorer"])
    srv.start()
    try:
        assert requests.get(srv.admin_url + "/", timeout=5).status_code == 404
        assert signed_get(srv.admin_url, f"/{ACCOUNT}/Tables").status_code == 404
        assert requests.get(srv.admin_url + "/health", timeout=5).status_code == 200
        r = requests.get(f"http://127.0.0.1:{srv.port}/", headers=HTML, allow_redirects=False, timeout=5)
        assert r.status_code != 302
    finally:
        srv.stop()
