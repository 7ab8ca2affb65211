"""The HTML report driven in headless Chromium (selenium): loads cleanly, sorts, filters, shows
a sample's images, every link resolves. CI installs Debian's chromium and chromium-driver."""

import time
from pathlib import Path

import numpy as np
import pytest

from medibench.report import build_report
from tests.browser.conftest import NEEDS_CHROMIUM, open_page
from tests.report.helpers import make_run
from tests.report.test_build import page_links

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    run = make_run(root / "run", n=9)
    return build_report(run, root / "report", n_resamples=100)


@pytest.fixture
def page(driver, index):
    return open_page(driver, index)


def _by(driver):
    from selenium.webdriver.common.by import By

    return By


def test_page_loads_without_console_errors(page):
    time.sleep(0.3)  # let lazy images settle
    errors = [e for e in page.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    assert page.title.startswith("medibench report")


def test_sorting_a_column_reorders_rows(page):
    By = _by(page)
    table = page.find_element(By.ID, "lb-table-native-1")
    page.find_element(By.CSS_SELECTOR, "select[data-filter=by]").send_keys("task")
    headers = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    col = headers.index("ssim")

    def column():
        cells = table.find_elements(By.CSS_SELECTOR, f"tbody tr td:nth-child({col + 1})")
        return [float(c.get_attribute("data-v")) for c in cells if c.is_displayed()]

    before = column()
    header = table.find_elements(By.CSS_SELECTOR, "thead th")[col]
    header.click()
    ascending = column()
    assert ascending == sorted(before) and ascending != before
    header.click()
    assert column() == sorted(before, reverse=True)
    assert header.get_attribute("aria-sort") == "descending"


def test_filter_hides_rows(page):
    By = _by(page)
    table = page.find_element(By.ID, "lb-table-native-1")
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    shown = [r for r in rows if r.is_displayed()]
    assert len(shown) == 2  # the overall (micro) rows by default
    page.find_element(By.CSS_SELECTOR, "select[data-filter=by]").send_keys("every row")
    assert sum(r.is_displayed() for r in rows) == len(rows)
    page.find_element(By.CSS_SELECTOR, "input[data-filter=text]").send_keys("identity")
    visible = [r for r in rows if r.is_displayed()]
    assert 0 < len(visible) < len(rows) and all("identity" in r.text for r in visible)
    # The sample browser's filters hide cards too.
    page.find_element(By.ID, "f-region").send_keys("chest")
    cards = page.find_elements(By.CSS_SELECTOR, "#sample-list .card")
    assert len(cards) == 3 and page.find_element(By.ID, "sample-count").text.startswith("3 of 9")


def test_sample_browser_shows_the_images_of_a_chosen_sample(page):
    By = _by(page)
    card = page.find_element(By.CSS_SELECTOR, '#sample-list .card[data-id="s04"]')
    page.execute_script("arguments[0].scrollIntoView({block: 'center'})", card)
    card.click()
    detail = page.find_element(By.ID, "sample-detail")
    assert detail.is_displayed() and detail.get_attribute("data-id") == "s04"
    imgs = detail.find_elements(By.TAG_NAME, "img")
    assert len(imgs) == 7  # input, ROI, target, 2 x (output, difference map)
    deadline = time.time() + 10
    while not all(
        page.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", i)
        for i in imgs
    ):
        assert time.time() < deadline, "images did not load"
        time.sleep(0.05)
    from io import BytesIO

    from PIL import Image

    shot = np.asarray(
        Image.open(
            BytesIO(detail.find_element(By.CSS_SELECTOR, ".pics").screenshot_as_png)
        ).convert("L"),
        dtype=np.float64,
    )
    assert shot.std() > 20  # images, not a blank panel
    text = detail.text
    assert "identity" in text and "classical" in text and "ssim" in text


def test_links_resolve(page, index):
    By = _by(page)
    hrefs = [a.get_attribute("href") for a in page.find_elements(By.CSS_SELECTOR, "a[href]")]
    srcs = [i.get_attribute("src") for i in page.find_elements(By.CSS_SELECTOR, "[src]")]
    local = [u for u in hrefs + srcs if u.startswith("file://")]
    assert local
    for url in local:
        path = Path(url.removeprefix("file://").split("#")[0])
        assert path == index or path.is_file(), url
    assert [h for h in page_links(index) if not (index.parent / h).is_file()] == []
