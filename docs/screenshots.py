"""Screenshots of the HTML report at 1440 x 900, for docs/ (headless Debian Chromium).

    python docs/screenshots.py --demo demo_run      # after `make demo`
    python docs/screenshots.py --demo demo_run --all

``--demo RUN`` shoots the demo report (leaderboard, then a sample opened). ``--all`` also builds
three small runs in a temporary folder from the test suite's own stand-ins (a MedGEN-Bench VQA
run answered by a fixed text model, a calibration-only run, a model-editing run on the tiny
LLaVA; run it from the repository root, torch installed) and shoots each. Files written:
``docs/report.png``, ``docs/report-sample.png``, ``docs/report-medgen.png``,
``docs/report-calibration.png``, ``docs/report-edit.png``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent
WIDTH, HEIGHT = 1440, 900


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo", type=Path, help="the demo run folder (make demo)")
    ap.add_argument("--all", action="store_true", help="also MedGEN, calibration and edit runs")
    ap.add_argument("--out", type=Path, default=DOCS)
    args = ap.parse_args(argv)
    args.out = args.out.resolve()
    args.demo = args.demo.resolve() if args.demo else None
    sys.path.insert(0, str(DOCS.parent))  # the tests' stand-ins
    from tests.browser.conftest import open_page, start_chromium, stop_chromium

    from medibench.report import build_report

    driver, profile = start_chromium(WIDTH, HEIGHT)
    try:
        if args.demo:
            index = build_report(args.demo, args.demo / "report", progress=True)
            _shoot(driver, open_page, index, args.out / "report.png", "leaderboards")
            _shoot(driver, open_page, index, args.out / "report-sample.png", "samples", True)
        if args.all:
            with tempfile.TemporaryDirectory() as tmp:
                # Relative paths inside the temporary folder: the pages name files, not /tmp.
                os.chdir(tmp)
                root = Path(".")
                index = build_report(_medgen_run(root), root / "mg-report", n_resamples=200)
                _shoot(driver, open_page, index, args.out / "report-medgen.png", "samples", True)
                index = build_report(_calibration_run(root), root / "cal-report")
                _shoot(driver, open_page, index, args.out / "report-calibration.png", None)
                index = build_report(_edit_run(root), root / "edit-report", plots=False)
                _shoot(driver, open_page, index, args.out / "report-edit.png", None)
    finally:
        stop_chromium(driver, profile)
    return 0


def _shoot(driver, open_page, index: Path, png: Path, anchor: str | None, sample=False) -> None:
    page = open_page(driver, index)
    if sample:
        page.execute_script("document.querySelector('#sample-list .card').click()")
    elif anchor:
        page.execute_script(f"document.getElementById('{anchor}').scrollIntoView()")
    time.sleep(0.8)  # lazy thumbnails
    page.save_screenshot(str(png))
    print(f"{png}")


def _medgen_run(root: Path) -> Path:
    from tests.benchmarks.medgen.answer_data import build_folder

    from medibench.runs import RunConfig, run

    folder = build_folder(root / "medgen")
    config = RunConfig(
        dataset=f"medgen:{folder / 'vqa.jsonl'}",
        models=("tests.benchmarks.medgen.test_answers:make_fixed",),
        model_options=("text=B. Pneumonia, a right lower lobe opacity",),
        out=root / "medgen-run",
    )
    run(config, progress=False).close()
    return root / "medgen-run"


def _calibration_run(root: Path) -> Path:
    from tests.calibration.conftest import make_logits
    from typer.testing import CliRunner

    from medibench.calibration import as_predictions, save_predictions
    from medibench.cli import app

    z, y = make_logits(600, 3, seed=4, temper=0.5)
    groups = {"domain": ["in-domain", "shifted"] * 300}
    pred = save_predictions(as_predictions(y, logits=z, groups=groups), root / "test.npz")
    args = ["calibration", "score", str(pred), "--by", "domain", "--out", str(root / "cal")]
    res = CliRunner().invoke(app, args)
    if res.exit_code:
        raise SystemExit(res.output)
    return root / "cal"


def _edit_run(root: Path) -> Path:
    from typer.testing import CliRunner

    from medibench.cli import app
    from medibench.knowledge_edit._build import TEXT_TEMPLATES
    from medibench.knowledge_edit._synthetic import synthetic_taskset
    from medibench.knowledge_edit.tiny_llava import build_tiny_llava, vocabulary

    cli = CliRunner()
    tasks = root / "tasks"
    requests = synthetic_taskset(tasks, 6, seed=0).requests
    texts = [t for r in requests for p in r.probes for t in (p.question, p.answer)]
    model = build_tiny_llava(root / "tiny-llava", vocabulary([*texts, *TEXT_TEMPLATES]))
    for editor in ("ft", "lora"):
        args = ["edit", "run", "--tasks", str(tasks), "--model", str(model), "--editor", editor,
                "--out", str(root / "edit"), "--max-new-tokens", "4"]  # fmt: skip
        res = cli.invoke(app, args)
        if res.exit_code:
            raise SystemExit(res.output)
    return root / "edit"


if __name__ == "__main__":
    raise SystemExit(main())
