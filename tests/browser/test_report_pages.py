"""The sample browser of a report of more samples than one page, in headless Chromium: a later
page and a deep link to a sample on it load that page's data file from disk (file://) and show
the sample as the run stored it."""

import shutil
import time

import pytest

from medibench.report import build_report
from medibench.report._browser import PAGE_SIZE
from medibench.runs import RunStore
from tests.browser.conftest import NEEDS_CHROMIUM, open_page
from tests.report.helpers import browser_data, make_run, page_files

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages")
    run = make_run(root / "run", n=PAGE_SIZE + 12, models=("identity",))
    return build_report(run, root / "report", n_resamples=20, plots=False, workers=1)


@pytest.fixture(scope="module")
def stored(index):
    """The run's instruction of each sample."""
    with RunStore.open_existing(index.parent.parent / "run") as store:
        return {s.sample_id: s.instruction for s in store.samples()}


def _wait(page, script: str, what: str):
    deadline = time.time() + 10
    while not page.execute_script(script):
        assert time.time() < deadline, what
        time.sleep(0.05)


def _detail(page, sid: str) -> tuple[str, str, int]:
    _wait(
        page,
        "var d = document.getElementById('sample-detail');"
        f"return !d.hidden && d.getAttribute('data-id') === {sid!r};",
        f"the detail of {sid} never showed",
    )
    box = page.find_element("id", "sample-detail")
    scores = box.find_elements("css selector", "table.scores[data-protocol] td")
    return (box.find_element("tag name", "h3").text,
            box.find_element("css selector", "p.instr").text, len(scores))  # fmt: skip


def test_the_report_writes_its_pages_beside_the_page(index):
    assert [p.name for p in page_files(index)] == ["page-0001.js", "page-0002.js"]
    head = browser_data(index)
    assert len(head["first"]["samples"]) == PAGE_SIZE and head["pages"] == 2


def test_page_2_shows_the_samples_of_the_second_data_file(driver, index, stored):
    page = open_page(driver, index)
    assert page.execute_script("return Object.keys(window.medibenchPages)") == ["1"]
    page.find_element("id", "page-next").click()
    _wait(page, "return document.getElementById('sample-list').dataset.page === '2'", "page 2")
    cards = page.find_elements("css selector", "#sample-list .card")
    data = browser_data(index)
    on_page_2 = [data["index"]["ids"][i] for i in data["index"]["order"][PAGE_SIZE:]]
    assert [c.get_attribute("data-id") for c in cards] == on_page_2
    assert page.find_element("id", "page-info").text == "page 2 of 2"
    sid = on_page_2[-1]
    page.execute_script(f"document.querySelector('.card[data-id=\"{sid}\"]').click()")
    title, instruction, cells = _detail(page, sid)
    assert (title, instruction) == (sid, stored[sid]) and cells > 0
    errors = [e for e in page.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []


def test_a_deep_link_to_a_sample_on_a_later_page_shows_it(driver, index, stored):
    data = browser_data(index)
    sid = data["index"]["ids"][data["index"]["order"][PAGE_SIZE + 3]]
    driver.get("about:blank")  # a new load of the page, not a move to its fragment
    driver.get(index.resolve().as_uri() + f"#sample={sid}")
    title, instruction, cells = _detail(driver, sid)
    assert (title, instruction) == (sid, stored[sid]) and cells > 0
    assert driver.find_element("id", "page-info").text == "page 1 of 2"


@pytest.mark.parametrize(
    ("damage", "why"),
    [("missing", "it could not be read"), ("cut short", "it holds no page 2")],
)
def test_a_missing_or_damaged_page_file_is_named(driver, index, tmp_path, damage, why):
    copy = tmp_path / "report"
    shutil.copytree(index.parent, copy)
    page_2 = copy / "samples" / "page-0002.js"
    if damage == "missing":
        page_2.unlink()
    else:
        page_2.write_text(page_2.read_text()[:100])
    page = open_page(driver, copy / "index.html")
    page.find_element("id", "page-next").click()
    _wait(page, "return /page-0002/.test(document.getElementById('sample-count').textContent)",
          "the damaged page was never named")  # fmt: skip
    assert page.find_element("id", "sample-count").text == (
        f"The sample data samples/page-0002.js beside this page is missing or damaged ({why}): "
        "build the report again."
    )


def test_a_search_loads_every_page_and_finds_a_sample_on_a_later_one(driver, index):
    data = browser_data(index)
    sid = data["index"]["ids"][data["index"]["order"][-1]]
    page = open_page(driver, index)
    page.find_element("id", "f-text").send_keys(sid)
    done = (
        "return document.getElementById('sample-count').textContent.indexOf(' of ') > 0"
        " && !document.getElementById('sample-list').hasAttribute('aria-busy')"
    )
    _wait(page, done, "the search never ended")
    cards = page.find_elements("css selector", "#sample-list .card")
    assert [c.get_attribute("data-id") for c in cards] == [sid]
    assert sorted(page.execute_script("return Object.keys(window.medibenchPages)")) == ["1", "2"]
