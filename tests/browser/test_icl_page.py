"""The report of an in-context learning run in headless Chromium: a sample's detail lists the
demonstrations each output was shown, and the comparisons put each K against K = 0 first."""

import pytest

from medibench.report import build_report
from medibench.runs import RunConfig, RunStore, run
from medibench.runs._demos import read_demonstrations
from tests.browser.conftest import NEEDS_CHROMIUM, open_page
from tests.runs.icl_data import TEMPTING, write_dataset

pytestmark = [pytest.mark.slow, NEEDS_CHROMIUM]


def test_sample_detail_lists_the_demonstrations(tmp_path, driver):
    from selenium.webdriver.common.by import By

    data = write_dataset(tmp_path / "data", TEMPTING)
    out = tmp_path / "run"
    cfg = RunConfig(
        dataset=f"native:{data}",
        models=("tests.runs.icl_data:make_mean",),
        out=out,
        icl_k=(0, 2),
        protocols=("native@1",),
    )
    run(cfg, progress=False).close()
    with RunStore(out) as store:
        ids = read_demonstrations(store)[("mean-of-examples@icl-2", "a0", 0)]["demo_ids"]
    index = build_report(out, n_resamples=100, plots=False, workers=1)
    page = open_page(driver, index)
    card = page.find_element(By.CSS_SELECTOR, '#sample-list .card[data-id="a0"]')
    page.execute_script("arguments[0].scrollIntoView({block: 'center'})", card)
    card.click()
    detail = page.find_element(By.ID, "sample-detail")
    lines = [p.text for p in detail.find_elements(By.CSS_SELECTOR, "p.demos")]
    assert lines == [f"mean-of-examples@icl-2: in-context demonstrations {', '.join(ids)}"]
    first = page.find_element(By.CSS_SELECTOR, "table.comparisons tbody tr")
    assert "mean-of-examples@icl-2" in first.text.split("mean-of-examples@icl-0")[0]
    errors = [e for e in page.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert errors == []
