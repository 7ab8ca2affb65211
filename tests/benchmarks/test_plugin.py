"""A benchmark installed from outside the repository, through the ``medibench.benchmarks`` entry
point: the worked example of docs/benchmarks.md, copied out of the page, pip-installed into a
temporary folder and run through the ``medibench`` command in a fresh process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from medibench.io import write_image
from medibench.metrics import psnr

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
MEDIBENCH = Path(sys.executable).parent / "medibench"

# "`path`:" on its own line, then a fenced block: one file of the example package.
_FILE_BLOCK = re.compile(r"^`([\w./-]+)`:\n\n```\w*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def example_files() -> dict[str, str]:
    return dict(_FILE_BLOCK.findall(DOC.read_text()))


def _pip_install(package: Path, target: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--target", str(target), str(package)],
        check=True,
        capture_output=True,
        text=True,
    )


def _write_package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with toy-pkg installed (its dist-info carries the entry point)."""
    tmp = tmp_path_factory.mktemp("plugin")
    package = _write_package(tmp / "toy-pkg", example_files())
    target = tmp / "site"
    _pip_install(package, target)
    return target


def _medibench(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "200"}
    return subprocess.run(
        [str(MEDIBENCH), *args], env=env, capture_output=True, text=True, timeout=120
    )


def _toy_data(root: Path) -> tuple[Path, Path, dict[str, float]]:
    """Two samples; model ``copy`` outputs the target, model ``noisy`` the target plus noise.
    Returns the data folder, the predictions folder and the expected PSNR of ``noisy``."""
    rng = np.random.default_rng(0)
    data, preds = root / "toy", root / "outputs"
    rows = ["id,instruction,input,target"]
    expected = {}
    for sid in ("a", "b"):
        inp = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
        tgt = (255 - inp).astype(np.uint8)
        write_image(data / f"{sid}_in.png", inp)
        write_image(data / f"{sid}_tgt.png", tgt)
        rows.append(f"{sid},invert the image,{sid}_in.png,{sid}_tgt.png")
        write_image(preds / "copy" / f"{sid}_0.png", tgt)
        noisy = np.clip(tgt.astype(int) + rng.integers(-20, 21, tgt.shape), 0, 255)
        write_image(preds / "noisy" / f"{sid}_0.png", noisy.astype(np.uint8))
        expected[sid] = psnr(tgt, noisy.astype(np.uint8), data_range=255)
    (data / "toy.csv").write_text("\n".join(rows) + "\n")
    return data, preds, expected


def test_the_doc_holds_the_three_files_of_the_package() -> None:
    assert set(example_files()) == {
        "pyproject.toml",
        "toy_pkg/__init__.py",
        "toy_pkg/dataset.py",
        "toy_pkg/protocol.py",
    }


@pytest.mark.slow
def test_an_installed_benchmark_is_listed_and_scored(site: Path, tmp_path: Path) -> None:
    listed = _medibench(site, "datasets")
    assert listed.returncode == 0, listed.stderr
    assert "toybench" in listed.stdout and "toy.csv" in listed.stdout
    protos = _medibench(site, "protocols")
    assert protos.returncode == 0, protos.stderr
    assert "toybench@1" in protos.stdout

    data, preds, expected = _toy_data(tmp_path)
    for spec in (f"toybench:{data}", str(data)):  # named, and detected from toy.csv
        out = tmp_path / "scores.jsonl"
        res = _medibench(
            site, "score", "--dataset", spec, "--predictions", str(preds), "--out", str(out),
            "--no-progress",
        )
        assert res.returncode == 0, res.stdout + res.stderr
        records = [json.loads(line) for line in out.read_text().splitlines()]
        assert {r["protocol"] + "@" + r["protocol_version"] for r in records} == {"toybench@1"}
        by = {(r["model"], r["sample_id"]): r for r in records}
        assert len(by) == 4
        for sid in ("a", "b"):
            assert by["copy", sid]["metrics"]["psnr"] == "inf"
            assert by["copy", sid]["metrics"]["ssim"] == pytest.approx(1.0, abs=1e-6)
            assert by["noisy", sid]["metrics"]["psnr"] == pytest.approx(expected[sid], abs=1e-9)
            assert by["noisy", sid]["metrics"]["ssim"] < 0.99


@pytest.mark.slow
def test_a_broken_plugin_is_a_warning_naming_it(tmp_path: Path) -> None:
    files = {
        "pyproject.toml": example_files()["pyproject.toml"]
        .replace('"toy-pkg"', '"broken-pkg"')
        .replace('toybench = "toy_pkg:BENCHMARK"', 'brokenbench = "broken_pkg:BENCHMARK"'),
        "broken_pkg/__init__.py": "import a_module_that_is_not_installed\n",
    }
    site = tmp_path / "site"
    _pip_install(_write_package(tmp_path / "broken-pkg", files), site)
    res = _medibench(site, "datasets")
    assert res.returncode == 0, res.stderr
    assert "miedb" in res.stdout and "brokenbench" not in res.stdout
    assert "brokenbench" in res.stderr and "a_module_that_is_not_installed" in res.stderr
    res = _medibench(site, "protocols")
    assert res.returncode == 0 and "miedb@paper" in res.stdout
