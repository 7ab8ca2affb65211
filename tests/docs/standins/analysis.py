"""Analysis (README "Look inside models", docs/analysis.md): tiny random-weight models under
the documented weight names (InstructPix2Pix, pytorch-fid's Inception file, LPIPS AlexNet
files, a Rad-DINO folder), and for docs/analysis.md, which downloads nothing itself, MedEBench
and MedGEN-Bench in their official layouts with model outputs (the benchmark tests' builders).
README.md gets its benchmarks from its download block (block 3)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.docs.standins import ALL, weights

_FAST = "--model-option steps=2 --model-option resolution=64"
_WHY = "the tiny InstructPix2Pix at 2 steps and 64 px instead of 100 and 512 (same code, less time)"

# README block 8's `analyze attention` line needs none of its own: it holds the text of apis.py's
# substitution for block 5 (`--model ip2p:... --out runs/medebench`), which gives it the same
# 2 steps at 64 px (a second one would repeat the options).
SUBSTITUTIONS = {
    ("docs/analysis.md", "--out runs/ip2p"): (f"--out runs/ip2p {_FAST}", _WHY),
}


@contextmanager
def standins(
    file: str, work: Path, env: dict[str, str], cache: Path, blocks: frozenset[int] = ALL
) -> Iterator[None]:
    own = file == "docs/analysis.md" and bool(blocks & {1, 2})  # 3, 4: correlate.py's
    if own or (file == "README.md" and 8 in blocks):
        build_weights(env)
    if own:
        build_benchmarks(work)
    yield


def build_weights(env: dict[str, str]) -> None:
    """The four models the blocks name (torch is imported only for the files that need them)."""
    from tests.analysis.conftest import build_dinov2_dir, build_inception_file, build_lpips_dir
    from tests.models.test_diffusers import build_tiny_ip2p

    weights.tiny(env, "instruct-pix2pix", build_tiny_ip2p)
    weights.tiny(env, "pt_inception-2015-12-05-6726825d.pth", build_inception_file)  # a file
    weights.tiny(env, "lpips", build_lpips_dir, sources=("medibench.analysis._nets",))
    weights.tiny(env, "rad-dino", build_dinov2_dir)


def build_benchmarks(work: Path) -> None:
    """``MedEBench/`` (the GitHub tree, outputs in ``generated_images/``), ``MedGEN-Bench/`` (the
    evaluation folder, ``edit.jsonl`` and its images) and ``medgen_outputs/`` (medibench's
    ``<sample_id>_<k>.png`` per model) in ``work``."""
    from tests.benchmarks.medebench.conftest import build_medebench
    from tests.benchmarks.medgen.conftest import build_medgen

    build_medebench(work / "MedEBench")
    # MedGEN_data links its images as ../MedGEN_raw: built beside the work folder, linked in
    medgen = build_medgen(work.parent / "medgen-standin")
    os.symlink(medgen["data"], work / "MedGEN-Bench")
    os.symlink(medgen["pngs"], work / "medgen_outputs")
