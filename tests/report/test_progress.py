"""`medibench report` shows progress on its long steps (tables, pictures, plots)."""

import io

from rich.console import Console

from medibench.report import build_report


def test_build_report_shows_a_bar_per_long_step(tiny_run, tmp_path):
    buf = io.StringIO()
    build_report(
        tiny_run,
        tmp_path / "report",
        n_resamples=50,
        workers=1,
        progress=True,
        console=Console(file=buf, width=120),
    )
    lines = {line.split(" ━")[0]: line for line in buf.getvalue().splitlines()}
    assert " 1/1 " in lines["report tables"]  # one protocol (native@1)
    assert " 9/9 " in lines["report pictures"]  # one per sample
    n_plots = int(lines["report plots"].split()[-2].split("/")[1])
    assert n_plots > 0 and f" {n_plots}/{n_plots} " in lines["report plots"]
    assert len(list((tmp_path / "report" / "plots").rglob("*.png"))) == n_plots


def test_no_progress_by_default_for_library_calls(tiny_run, tmp_path, capsys):
    build_report(tiny_run, tmp_path / "report", n_resamples=50, workers=1, plots=False)
    assert "report tables" not in capsys.readouterr().err
