"""A real headless Chromium (Debian's `chromium` and `chromium-driver`) driven by Selenium,
for the web explorer's tests: finding elements, waiting on what the page shows, downloads,
screenshots (under target/explorer-screens/) and the requests the page made."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Callable, List, Optional

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from conftest import REPO_ROOT

SCREENS = REPO_ROOT / "target" / "explorer-screens"
WAIT = 15.0


def _binary(*names: str) -> str:
    for n in names:
        found = shutil.which(n)
        if found:
            return found
    raise RuntimeError(f"none of {names} is installed: apt-get install chromium chromium-driver")


class Browser:
    def __init__(self, downloads: Path, width: int = 1280, height: int = 800):
        self.downloads = downloads
        downloads.mkdir(parents=True, exist_ok=True)
        o = Options()
        o.binary_location = _binary("chromium", "chromium-browser")
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  f"--window-size={width},{height}", "--lang=en-US"):
            o.add_argument(a)
        o.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                            "download.prompt_for_download": False})
        o.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
        self.d = webdriver.Chrome(service=Service(_binary("chromedriver")), options=o)
        self.d.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        self.requests: List[dict] = []
        self.logged: List[dict] = []

    def load(self, url: str, tries: int = 3) -> None:
        """Opens `url`, again if Chromium dropped one of its files because the host's network
        changed meanwhile (net::ERR_NETWORK_CHANGED: another test's network namespace coming or
        going, not the server): a page left without its script never comes up."""
        for attempt in range(tries):
            seen = len(self._log())
            if attempt == 0:
                self.d.get(url)
            else:
                # Going to the same URL again with a #fragment would load nothing.
                self.d.refresh()
            if not any("ERR_NETWORK_CHANGED" in e["message"] for e in self._log()[seen:]):
                return

    def _log(self) -> List[dict]:
        # Chromium hands each entry out once: keep them all for `console`.
        try:
            self.logged.extend(self.d.get_log("browser"))
        except WebDriverException:
            pass
        return self.logged

    def quit(self) -> None:
        self.d.quit()

    # Finding and waiting ------------------------------------------------------
    def wait(self, what: Callable[[], object], message: str, timeout: float = WAIT):
        """Polls `what` until it returns something truthy; fails with `message` and the page's errors."""
        deadline = time.monotonic() + timeout
        last_error: Optional[Exception] = None
        while time.monotonic() < deadline:
            try:
                v = what()
                if v:
                    return v
            except (WebDriverException, StaleElementReferenceException, AssertionError) as e:
                last_error = e
            time.sleep(0.05)
        raise AssertionError(f"timed out: {message} (last error: {last_error}); notices: {self.notices()}; "
                             f"console: {self.console()}")

    def el(self, css: str, timeout: float = WAIT) -> WebElement:
        def visible():
            for e in self.d.find_elements(By.CSS_SELECTOR, css):
                if e.is_displayed():
                    return e
            return None
        return self.wait(visible, f"{css} shown", timeout)

    def all(self, css: str) -> List[WebElement]:
        return self.d.find_elements(By.CSS_SELECTOR, css)

    def text(self, css: str) -> str:
        return self.el(css).text

    def wait_text(self, css: str, pred: Callable[[str], bool], message: str) -> str:
        return self.wait(lambda: (lambda t: t if pred(t) else None)(self.el(css).text), message)

    def click(self, css: str) -> None:
        self.wait(lambda: self.el(css).is_enabled(), f"{css} enabled")
        self.el(css).click()

    def type(self, css: str, text: str, clear: bool = True) -> WebElement:
        e = self.el(css)
        if clear:
            e.clear()
        e.send_keys(text)
        return e

    def js(self, script: str, *args):
        return self.d.execute_script(script, *args)

    def notices(self) -> List[str]:
        try:
            return [n.text for n in self.d.find_elements(By.CSS_SELECTOR, "#notices .notice")]
        except WebDriverException:
            return []

    def console(self) -> List[str]:
        return [e["message"] for e in self._log() if e["level"] in ("SEVERE", "WARNING")]

    def dialog(self) -> WebElement:
        return self.el("dialog[open]")

    def no_dialog(self) -> None:
        self.wait(lambda: not self.all("dialog[open]"), "the dialog closed")

    # Evidence -------------------------------------------------------------------
    def screenshot(self, name: str) -> Path:
        SCREENS.mkdir(parents=True, exist_ok=True)
        path = SCREENS / f"{name}.png"
        self.d.save_screenshot(str(path))
        return path

    def sent(self) -> List[dict]:
        """Every request the page has sent so far: {url, method, headers}."""
        for entry in self.d.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg.get("method") == "Network.requestWillBeSent":
                r = msg["params"]["request"]
                self.requests.append({"url": r["url"], "method": r["method"], "headers": r.get("headers", {})})
        return self.requests

    def download(self, name: str, timeout: float = WAIT) -> Path:
        path = self.downloads / name
        self.wait(lambda: path.exists() and not list(self.downloads.glob("*.crdownload")), f"{name} downloaded", timeout)
        return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One Chromium per test module, its downloads in a folder of its own."""
    b = Browser(tmp_path_factory.mktemp("downloads"))
    yield b
    b.quit()
