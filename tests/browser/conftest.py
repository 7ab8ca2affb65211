"""Headless Chromium (selenium) for the report's browser tests. CI installs Debian's chromium
and chromium-driver; without them these tests are skipped with the command that installs them."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
DRIVER = Path("/usr/bin/chromedriver")

NEEDS_CHROMIUM = pytest.mark.skipif(
    not (CHROMIUM.exists() and DRIVER.exists()),
    reason="needs Debian's chromium and chromium-driver (/usr/bin/chromium, "
    "/usr/bin/chromedriver): apt-get install chromium chromium-driver",
)


def start_chromium(width: int, height: int):
    """A headless Chromium window of ``width`` x ``height`` CSS pixels, and its profile folder."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="medibench-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    # No network here: without these flags Chromium stalls on update and sync attempts.
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(str(DRIVER)), options=opts)
    d.set_window_size(width, height)
    return d, profile


@pytest.fixture(scope="module")
def driver(request):
    """One headless Chromium window for a test module, of the module's ``WINDOW`` (width,
    height) in CSS pixels (default 1400 x 1000), closed after its last test."""
    width, height = getattr(request.module, "WINDOW", (1400, 1000))
    d, profile = start_chromium(width, height)
    yield d
    stop_chromium(d, profile)


def stop_chromium(driver, profile: str) -> None:
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def open_page(driver, index: Path):
    """Load ``index`` and wait until the page's script says it is ready."""
    driver.get(index.resolve().as_uri())
    deadline = time.time() + 10
    while driver.execute_script("return document.documentElement.dataset.ready") != "1":
        assert time.time() < deadline, "the page never became ready"
        time.sleep(0.05)
    return driver
