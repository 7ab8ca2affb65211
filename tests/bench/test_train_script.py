"""bench/train.py's ``--script``: diffusers' real ``train_instruct_pix2pix.py`` run as a child with
medibench's settings, each step timed by its ``Steps`` progress bar. The script needs torchvision,
which this machine does not have, so a stand-in with the script's command line and progress bar
checks the plumbing; the triplets' Parquet copy is read back by ``datasets`` as the script
reads it."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

BENCH = Path(__file__).resolve().parents[2] / "bench" / "train.py"

STAND_IN = """
import argparse, sys, time
from tqdm.auto import tqdm
parser = argparse.ArgumentParser()
for name in ("pretrained_model_name_or_path", "dataset_name", "resolution", "train_batch_size",
             "max_train_steps", "learning_rate", "conditioning_dropout_prob", "lr_scheduler",
             "lr_warmup_steps", "seed", "mixed_precision", "checkpointing_steps", "output_dir"):
    parser.add_argument("--" + name, required=True)
args = parser.parse_args()
if args.train_batch_size != "4" or args.lr_scheduler != "constant":
    sys.exit("wrong settings")
bar = tqdm(range(int(args.max_train_steps)), desc="Steps")
other = tqdm(range(3), desc="Loading")
for _ in range(3):
    other.update(1)
for _ in range(int(args.max_train_steps)):
    time.sleep(0.01)
    bar.update(1)
"""


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_train", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _args(steps=5):
    return argparse.Namespace(steps=steps, batch_size=4, resolution=32, method="full")


def test_each_step_is_timed_by_the_scripts_progress_bar(bench, tmp_path):
    script = tmp_path / "train_instruct_pix2pix.py"
    script.write_text(STAND_IN)
    times = bench.script_steps(script, tmp_path / "w", tmp_path / "d", tmp_path / "out", _args())
    assert len(times) == 4  # five stamps of "Steps" only, not the loading bar's
    assert all(0.01 <= t < 5 for t in times)


def test_a_script_that_fails_is_reported_with_its_output(bench, tmp_path):
    script = tmp_path / "train_instruct_pix2pix.py"
    script.write_text("from torchvision_missing_here import transforms\n")
    with pytest.raises(RuntimeError, match="exited with 1:(.|\\n)*No module named"):
        bench.script_steps(script, tmp_path / "w", tmp_path / "d", tmp_path / "out", _args())


def test_the_parquet_copy_has_the_scripts_default_columns(bench, tmp_path):
    datasets = pytest.importorskip("datasets")
    from medibench.datasets import load_dataset
    from tests.train.conftest import make_triplets

    data = make_triplets(tmp_path / "data", n=3, size=16)
    samples = list(load_dataset(f"native:{data}"))
    folder = bench.script_dataset(samples, tmp_path / "parquet")
    train = datasets.load_dataset(str(folder), split="train", cache_dir=str(tmp_path / "cache"))
    assert train.column_names == ["input_image", "edit_prompt", "edited_image"]
    from medibench.datasets import load_images

    first = load_images(samples[0])
    assert np.array_equal(np.asarray(train[0]["input_image"]), first.input)
    assert np.array_equal(np.asarray(train[0]["edited_image"]), first.target)
    assert train[0]["edit_prompt"] == samples[0].instruction
