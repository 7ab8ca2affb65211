"""The figures of README.md and docs/ against the scripts that produce them (docs/check_numbers.py,
the command `python docs/numbers.py`)."""

from __future__ import annotations

import json

import pytest

from tests.docs._figures import check_numbers
from tests.docs.standins import figures

numbers = check_numbers()


def test_the_fast_figures_hold():
    checked, problems = numbers.run_checks(slow=False)
    assert problems == []
    assert checked >= 100


def test_the_inventory_table_is_current():
    assert numbers.inventory_current()
    # where a figure moved down a line the table still holds; a figure changed, it does not
    moved = numbers.inventory().replace("| README.md:", "| README.md:1", 1)
    assert numbers._unlined(moved) == numbers._unlined(numbers.inventory())
    changed = numbers.inventory().replace("396", "397", 1)
    assert numbers._unlined(changed) != numbers._unlined(numbers.inventory())


def test_every_timing_the_inventory_lists_names_a_recorded_or_stated_source():
    producers = {c.producer for c in numbers.CHECKS}
    assert any("bench/results/calibration.json" in p for p in producers)
    assert any("bench/results/suite.json" in p for p in producers)
    # every stated figure says why it is not recomputed
    for check in numbers.CHECKS:
        if check.figures is None:
            assert check.stated and check.status != "checked", check.name


def test_the_examples_that_documented_blocks_run_are_slow_checks():
    # they are checked on their blocks' outputs, in the docs-run test, not a second time here
    assert set(figures.CHECKED) <= {c.name for c in numbers.CHECKS if c.slow}


@pytest.mark.slow(seconds=150)  # the model-editing table, on the 2-core machine
@pytest.mark.parametrize(
    "name", [c.name for c in numbers.CHECKS if c.slow and c.name not in figures.CHECKED]
)
def test_the_slow_figures_hold(name):
    # one test per check: the workers take them side by side (the model-editing table alone is
    # about two minutes)
    check = next(c for c in numbers.CHECKS if c.name == name)
    assert numbers.figure_problems(name, check.figures()) == []


@pytest.fixture
def fake_root(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "bench" / "results").mkdir(parents=True)
    monkeypatch.setattr(numbers, "ROOT", tmp_path)
    return tmp_path


def test_a_figure_is_found_across_line_breaks_and_a_changed_one_is_not(fake_root):
    (fake_root / "README.md").write_text("intro\nthe frozen suite (396 samples over\n33 tasks)\n")
    assert numbers.find("README.md", "(396 samples over 33 tasks)") == 2
    assert numbers.find("README.md", "(397 samples over 33 tasks)") is None
    assert numbers.find("missing.md", "396") is None
    # [...]: anything on the same line, never across lines
    assert numbers.find("README.md", "frozen suite [...] over") == 2
    assert numbers.find("README.md", "frozen suite [...] 33 tasks") is None
    assert numbers.nearest("README.md", "the frozen suite (397 samples over") == (
        "the frozen suite (396 samples over"
    )


def _run(cpu: str, load: float, seconds: float) -> dict:
    return {
        "machine": {"cpu": cpu, "cores": 2},
        "load_average": [load, load],
        "figures": {
            "all_metrics_s[calibration@1]": seconds,
            "ece_torchmetrics_ratio": 1.52,
            "mce_torchmetrics_ratio": 1.71,
            "ece_torchmetrics_diff": 1.3e-7,
            "mce_torchmetrics_diff": 1.49e-6,
        },
    }


def test_a_recorded_timing_is_read_back_with_its_machine_and_load(fake_root):
    results = fake_root / "bench" / "results" / "calibration.json"
    runs = [_run("AMD EPYC", 0.4, 0.43), _run("AMD EPYC", 1.2, 0.88)]
    results.write_text(json.dumps({"runs": runs}))
    (figure, _) = numbers.calibration_speed()
    assert figure.text == (
        "recorded (`bench/results/calibration.json`): all metrics in 0.4-0.9 s over two runs at "
        "load average 0-1 on AMD EPYC, 2 cores; ECE/MCE 1.5-1.7x torchmetrics, values within 2e-6"
    )
    # a doc that quotes it passes; a run recorded later that the doc does not cover fails
    (fake_root / "README.md").write_text(f"| speed | {figure.text} |\n")
    assert numbers.find("README.md", numbers.calibration_speed()[0].text) == 1
    runs[1]["figures"]["all_metrics_s[calibration@1]"] = 1.91
    results.write_text(json.dumps({"runs": runs}))
    assert numbers.find("README.md", numbers.calibration_speed()[0].text) is None


def test_no_recorded_run_is_a_problem_not_a_pass(fake_root):
    (figure,) = numbers.suite_speed()
    assert figure.doc == "bench/results/suite.json"
    assert numbers.find(figure.doc, figure.text) is None


@pytest.mark.parametrize(
    ("value", "text"), [(1.49e-6, "2e-6"), (2e-6, "2e-6"), (9.6e-14, "1e-13"), (0.3, "3e-1")]
)
def test_upper_bounds_have_one_significant_digit(value, text):
    assert numbers._exp(value) == text


def test_a_figure_that_differs_across_cpu_code_paths_is_held_to_its_stated_range(monkeypatch):
    monkeypatch.setitem(numbers.PATH_SPREADS, "example ece", (0.4549, 0.4559))
    assert numbers.across_paths("example ece", 0.45494) == "0.4549-0.4559"
    assert numbers.across_paths("example ece", 0.455849) == "0.4549-0.4559"
    # outside the range: the value itself, which the doc's range then fails to match
    assert numbers.across_paths("example ece", 0.45595) == "0.4560"
    assert numbers.across_paths("other", 0.45494) == "0.4549"
