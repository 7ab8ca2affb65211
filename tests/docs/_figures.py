"""The records of docs/check_numbers.py (a figure a doc must hold, a check and what produces it),
and the figures the docs state that no script recomputes yet, each with why."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Figure:
    """A passage a doc must hold: ``text`` (whitespace-insensitive) in ``doc``."""

    doc: str
    text: str
    what: str


@dataclass(frozen=True)
class Check:
    """Figures and what produces them. ``figures`` recomputes them (``None``: stated figures,
    listed in ``stated``, that no script recomputes; ``status`` says why)."""

    name: str
    producer: str
    noise: str
    figures: Callable[[], list[Figure]] | None = None
    slow: bool = False
    stated: tuple[Figure, ...] = ()
    status: str = "checked"
    listed: tuple[Figure, ...] = field(default=())


def _stated(producer: str, noise: str, status: str, *figures: tuple[str, str, str]) -> Check:
    return Check(
        f"stated: {producer}",
        producer,
        noise,
        None,
        status=status,
        stated=tuple(Figure(*f) for f in figures),
    )


UNRECORDED = "stated; no recorded run yet (the script prints it; `--record` not wired)"
#: Figures no script recomputes (yet): the text is checked to be as inventoried here.
STATED: tuple[Check, ...] = (
    _stated(
        "`.ci/run` on fresh clones (its `COLUMNS=80 make test`: xdist, 3 workers on 2 cores, "
        "`--dist loadgroup`, the Ray tests in one group, the docs' commands forked from "
        "tests/docs/_zygote.py, the tiny models built cold) on a 2-core Intel Xeon (Sapphire "
        "Rapids): 3,541 tests passed in 835 s of pytest on 658dcc3 (1,054 s with the install; "
        "cores 88% busy, 1,852 CPU-s) and 862 s on e8ff710 (1,105 s; 88%, 1,933 CPU-s); with "
        "the test cache warm: 720 s on 658dcc3 (cores 98% busy; 780 s with 2 workers) and 808 s "
        "on bed7baf (`make test`, a slower hour); 3,548 tests: 951 s of pytest on 8af1699 from a "
        "fresh clone (1,216 s with the install; cores 88% busy, 2,127 CPU-s; a fixed Python loop "
        "took 2.94 s before the run and 4.14 s after it) and 819 s warm on 1247fa6 (98.6% busy, "
        "1,616 CPU-s); 3,549 tests: 961 s warm on c706566 (98.9% busy, 1,903 CPU-s: the same "
        "work took 18% more CPU than an hour before). The runs from 8af1699 to 4491b9b ran every "
        "docs command fresh: their docs zygote never started (nilearn, added to its imports, "
        "loads pandas and pyarrow, whose jemalloc starts a thread; the zygote refused to fork "
        "with it). 3,553 tests, the zygote mended: 588 s of pytest on 156edd5 from a fresh clone "
        "(796 s with the install; cores 85% busy, 1,347 CPU-s; a fixed Python loop 2.78 s before "
        "and 2.63 s after) and 632 s warm on 156edd5 (98% busy, 1,243 CPU-s); 3,554 tests: 667 s "
        "warm on e24efd7 (98% busy, 1,306 CPU-s; the loop 2.84 s before, 2.67 s after) and, from "
        "a fresh clone of a2c7c85 (the same code) in a slowing hour, 724 s of pytest (955 s with "
        "the install; 87% busy, 1,662 CPU-s; the loop 2.95 s before, 4.93 s after) and 718 s warm "
        "on a664486 (98.6% busy, 1,416 CPU-s; the loop 5.28 s after); warm on ec7dfa5: 748 s in "
        "a slow hour (1,473 CPU-s; the loop 4.99 s before, 4.05 s after) and 581 s (1,143 CPU-s, "
        "with a plugin recording each test's CPU; the loop 4.05 s before, 2.89 s after); from a "
        "fresh clone of a28ce44 after `make demo` (green, 157 s with its install), in a slow "
        "hour: 838 s of pytest (1,061 s for `.ci/run` with the install; 88% busy, 1,865 CPU-s; "
        "the loop 5.16 s before, 4.46 s after). On a "
        "2-core AMD EPYC: 671 s of pytest on 7f183df (3,515 tests, 2 workers, `--dist "
        "worksteal`; warm: 528-661 s)",
        "-",
        "stated; in README block 1 (shell), updated by the lead",
        (
            "README.md",
            "(3,554 tests; on 2 cores after the install 9.8-14.0 min on an Intel Xeon from a "
            "fresh clone and 9.7-12.5 min with the test cache warm, the machine's speed halving "
            "in its slow hours; 13.3-17.7 min for CI's whole `.ci/run` with the install; "
            "11.2 min on an AMD EPYC, measured before the suite's last speed-ups)",
            "test count and time",
        ),
    ),
    _stated(
        "a timed `make demo`",
        "'about'",
        UNRECORDED,
        ("README.md", "about 40 s on 2 cores once installed", "demo time"),
    ),
    _stated(
        "`python bench/metrics.py`",
        "ranges over five runs",
        UNRECORDED,
        ("README.md", "SSIM float32 RGB 2.48-3.09 ms at 512", "SSIM time"),
        ("README.md", "27.9-31.8x scikit-image's Gaussian SSIM", "SSIM ratio"),
    ),
    _stated(
        "`python bench/score_official.py`",
        "ranges over the runs named",
        UNRECORDED,
        ("README.md", "9.35-10.49x with `medibench score --workers 1`", "scoring ratio"),
        ("README.md", "max diff 8.9e-14", "values vs the official loop"),
    ),
    _stated(
        "`python bench/runner.py`",
        "range over seven runs",
        UNRECORDED,
        ("README.md", "145.1-151.7/s in seven idle runs", "API throughput"),
    ),
    _stated(
        "`python bench/judge.py`",
        "ranges over three runs",
        UNRECORDED,
        ("README.md", "116.0-120.7/s over 50 waves", "judge throughput"),
        (
            "docs/judges.md",
            "concurrency 64 reached 70.5/s on the same machine",
            "before the group commit (earlier code: not re-measurable)",
        ),
    ),
    _stated(
        "`python bench/sources.py`",
        "one run",
        UNRECORDED,
        ("README.md", "0.95x on the first read", "Parquet load ratio"),
    ),
    _stated(
        "`python bench/build.py`",
        "one run, load stated",
        UNRECORDED,
        ("README.md", "perception 258/s, transformation 266/s", "build throughput"),
    ),
    _stated(
        "`python bench/calibration.py` (before `--record`)",
        "range over four runs",
        "stated; earlier idle runs, not recorded",
        ("README.md", "0.4-0.9 s over four idle runs", "calibration metrics time"),
        ("docs/calibration.md", "in 0.4-0.9 s over four idle runs", "calibration metrics time"),
        ("docs/calibration.md", "ECE and MCE 1.5-1.7x faster than torchmetrics'", "ratio"),
    ),
    _stated(
        "`python bench/suite.py` (before `--record`)",
        "one run",
        "stated; not recorded",
        ("README.md", "84/s at 256, 28/s at 512 in an earlier run", "suite samples/s"),
    ),
    _stated(
        "`python bench/features.py`",
        "runs and loads stated",
        UNRECORDED,
        ("README.md", "FID 1.85 s (the reference 45.8 s)", "FID time"),
    ),
    _stated(
        "`python bench/edit_table.py --check`",
        "one run each",
        UNRECORDED,
        ("README.md", "(Sapphire Rapids; 2 min 18 s with another table computing", "its time"),
    ),
    _stated(
        "`python bench/edit_table.py --paths` (the table on ATen's default, avx2, avx512 paths)",
        "the largest difference over the three",
        "stated; three runs of the table (6 min), measured on an Intel Xeon (Sapphire Rapids)",
        ("README.md", "gives cells up to 0.583 away from these on", "SIMD paths' spread"),
        ("README.md", "(up to 0.334 in the ft, lora and GRACE rows", "their rows' spread"),
        ("README.md", "single-edit reliability is 0.833 on avx512", "MEND's on avx512"),
    ),
    _stated(
        "`python bench/knowledge_edit.py`",
        "one run",
        UNRECORDED,
        ("README.md", "5.2% of model time", "harness overhead"),
    ),
    _stated(
        "`python bench/report.py`",
        "runs stated",
        UNRECORDED,
        (
            "README.md",
            "| 12.0 and 11.9 s; 0.30 and 0.27 s (two runs",
            "report build, time to interactive",
        ),
    ),
    _stated(
        "`python bench/scale.py --record` (10,000, 30,000 and 100,000 samples) and "
        "`python bench/scale.py --quick --record` (2,000 and 20,000)",
        "one run each",
        "stated; the runs are recorded in `bench/results/scale.json` (not yet compared by "
        "`docs/numbers.py`)",
        (
            "README.md",
            "`run` identity 306, 315 and 418 MB (x1.37 from 10,000 to 100,000;",
            "peak RSS of run identity, 10k, 30k and 100k",
        ),
        (
            "README.md",
            "`run` classical 314, 325 and 428 MB (x1.36;",
            "peak RSS of run classical, 10k, 30k and 100k",
        ),
        (
            "README.md",
            "`score` 292, 326 and 420 MB (x1.44;",
            "peak RSS of score, 10k, 30k and 100k",
        ),
        (
            "README.md",
            "`report` 222, 229 and 305 MB (x1.37;",
            "peak RSS of report, 10k, 30k and 100k",
        ),
        (
            "README.md",
            "`index.html` 1,056, 3,059 and 10,068 KB",
            "the report page's size, 10k, 30k and 100k",
        ),
        (
            "README.md",
            "interactive after 0.28, 0.27 and 0.52 s in headless Chromium",
            "the report page's time to interactive, 10k, 30k and 100k",
        ),
        (
            "README.md",
            "`report` 203 and 229 MB (x1.13)",
            "peak RSS of report, 2k and 20k",
        ),
    ),
    _stated(
        "the runs of earlier stops (`python bench/scale.py --quick --record`; "
        "`--sizes 10000,100000 --steps run-identity,score --record`)",
        "one run each",
        "stated; recorded in `bench/results/scale.json`",
        (
            "README.md",
            "`report` 215 and 398 MB at 2,000 and 20,000 (x1.85)",
            "peak RSS of report before it streamed, 2k and 20k",
        ),
        (
            "README.md",
            "`score` 313 and 590 MB (x1.89) at 10,000 and 100,000",
            "peak RSS of score before it streamed, 10k and 100k",
        ),
    ),
    _stated(
        "`python bench/paintbench.py --paintbench PATH` (needs PaintBench's code)",
        "runs stated",
        "stated; needs PaintBench's repository, not on this machine",
        ("README.md", "3.51x and 3.78x on 1,008 problems", "speed ratio"),
        (
            "README.md",
            "on 813 generated problems (every level within 3.3e-16)",
            "values vs the official code",
        ),
    ),
    _stated(
        "`python bench/train.py`",
        "two rounds",
        UNRECORDED,
        ("README.md", "1.04x (203 vs 211 ms per step", "training step time"),
    ),
    _stated(
        "`python bench/prompt_tuning.py`",
        "two runs",
        UNRECORDED,
        (
            "docs/calibration.md",
            "20.2 against 21.2 steps/s (0.95x) and 25.7 against 24.1",
            "CoOp steps/s vs plain PyTorch",
        ),
    ),
    _stated(
        "`python bench/gpu_generate.py` (CPU smoke)",
        "five runs",
        UNRECORDED,
        (
            "docs/models.md",
            "a run of 8 images spent 35-58 ms in five runs",
            "medibench's time besides the pipeline",
        ),
    ),
    _stated(
        "`bash bench/gpu_wheels.sh`",
        "'about'",
        "stated; a download size",
        ("docs/models.md", "pydantic and what they need; 23 MB", "wheels"),
    ),
    _stated(
        "tests/build/test_transformation.py (asserts > 0.99, > 0.999)",
        "the bound",
        "checked by that test",
        ("docs/build.md", "(interior within one grey level, 99% identical)", "vs MONAI"),
        ("docs/build.md", "(within one level, 99.9% identical)", "vs MONAI"),
    ),
    _stated(
        "the reference-agreement tests (tests/metrics/test_ssim.py, test_color.py, "
        "test_features.py; tests/calibration/test_metrics.py) with these tolerances",
        "the tolerance stated",
        "checked by those tests",
        ("README.md", "`skimage.metrics.structural_similarity(..., full=True)` to 1e-6", "SSIM"),
        ("README.md", "the fast OpenCV path (within 1e-5)", "SSIM float32"),
        ("README.md", 'within 1e-9 with `constants="skimage"`', "Lab"),
        ("README.md", "PaintBench's constants differ by < 0.005", "Lab"),
        ("docs/analysis.md", "exactly the stated mean and covariance (rel. 1e-9)", "FID"),
        ("docs/analysis.md", "sqrt((n_a - 1)(n_b - 1))`, rel. 1e-12", "FID, N < D"),
        ("docs/calibration.md", "stops at 2^-10, so within 3e-3", "smooth ECE vs relplot"),
        ("docs/calibration.md", "smooth-ECE integral (within 1e-4)", "smooth ECE"),
    ),
    _stated(
        "tests/judges/test_agreement.py (Shrout & Fleiss 1979, Table 2)",
        "2 decimals",
        "checked by that test",
        ("docs/judges.md", "Shrout & Fleiss's worked example (0.29)", "ICC(2,1)"),
    ),
)


def check_numbers():
    """docs/check_numbers.py (the code of ``python docs/numbers.py``), loaded once as the module
    ``docs_numbers`` (docs/ is no package)."""
    import importlib.util
    import sys
    from pathlib import Path

    if "docs_numbers" not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "docs" / "check_numbers.py"
        spec = importlib.util.spec_from_file_location("docs_numbers", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["docs_numbers"] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["docs_numbers"]
