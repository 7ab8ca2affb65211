"""The built-in suite: smaller sizes of the same code (no download, just less time)."""

SUBSTITUTIONS = {
    ("README.md", "--dataset suite --model identity --model classical --out runs/a"): (
        "--dataset suite --dataset-option name=medibench-suite@1-mini --model identity "
        "--model classical --out runs/a",
        "the 66-sample frozen suite instead of the 396-sample one (same code, less time)",
    ),
    ("README.md", "--preset medium --n-per-task 12 --seed 7"): (
        "--preset medium --n-per-task 1 --seed 7",
        "1 item per task instead of 12 (same code, less time)",
    ),
    ("docs/suite.md", "--preset medium --n-per-task 4"): (
        "--preset medium --n-per-task 1",
        "1 item per task instead of 4",
    ),
    ("docs/suite.md", "--out suite1 --suite medibench-suite@1 "): (
        "--out suite1 --suite medibench-suite@1-mini ",
        "the 66-sample frozen suite instead of the 396-sample one",
    ),
}
