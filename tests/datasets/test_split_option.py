"""``--dataset-option split=NAME`` on every loader: the samples of that split, the dataset's kind
(and so its prediction layout and protocols) kept; an unknown split names those present."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from medibench.benchmarks.medebench.dataset import MedEBenchDataset
from medibench.cli import app
from medibench.datasets import DatasetError, load_dataset, read_native
from medibench.datasets._derive import split_dataset
from tests.benchmarks.medebench.conftest import build_medebench


@pytest.fixture(scope="module")
def medebench(tmp_path_factory):
    return build_medebench(tmp_path_factory.mktemp("MedEBench"))


def test_split_on_a_benchmark_loader_keeps_its_kind(medebench, tmp_path):
    every = load_dataset(f"medebench:{medebench}")
    test = load_dataset(f"medebench:{medebench}", split="test")  # MedEBench: all "test"
    assert isinstance(test, MedEBenchDataset) and test.sample_ids() == every.sample_ids()
    assert test.default_protocols == ("medebench@paper", "medebench@1")
    with pytest.raises(DatasetError) as exc:
        load_dataset(f"medebench:{medebench}", split="train")
    assert str(exc.value) == (
        f"dataset 'medebench:{medebench}' has no split 'train' (--dataset-option split=); "
        "splits present: test (5)"
    )


def test_split_of_a_split_folder_and_its_predictions(medebench, tmp_path):
    every = list(load_dataset(f"medebench:{medebench}"))
    split_dataset(every, "medebench:M", tmp_path / "s", fractions={"train": 0.6, "test": 0.4},
                  seed=0)  # fmt: skip
    # default_rng(0).permutation(5) = [2 4 3 0 1] over ids 1..5 sorted: 3, 5, 4 train; 1, 2 test
    train = load_dataset(f"native:{tmp_path / 's'}", split="train")
    assert train.sample_ids() == ["3", "4", "5"]
    heldout = load_dataset(f"native:{tmp_path / 's'}", split="test")
    assert heldout.sample_ids() == ["1", "2"]
    index = heldout.find_predictions(medebench / "generated_images")
    assert sorted(index.files["modelA"]) == ["1", "2"]  # the other samples' files: unknown
    assert {p.name for _, p in index.unknown} >= {"3_0.png", "999_0.png"}
    assert len(read_native(tmp_path / "s")) == 5  # without split=: every sample


def test_the_cli_option_and_its_error(medebench, tmp_path):
    res = CliRunner().invoke(app, ["dataset", "describe", f"medebench:{medebench}",
                                   "--dataset-option", "split=val"])  # fmt: skip
    assert res.exit_code == 2
    assert "has no split 'val' (--dataset-option split=); splits present: test (5)" in res.output


def test_a_loader_that_reads_split_itself_keeps_it():
    from medibench._benchmark import BENCHMARKS
    from medibench.datasets import _takes_split

    assert _takes_split(BENCHMARKS.get("paintbench").loader())  # its Hub split's shards
    assert not _takes_split(BENCHMARKS.get("medebench").loader())
    assert not _takes_split(BENCHMARKS.get("native").loader())


def test_train_reads_one_split(medebench, tmp_path):
    from medibench.train import TrainConfig
    from medibench.train._data import open_training_data

    every = list(load_dataset(f"medebench:{medebench}"))
    spec = f"native:{tmp_path / 's'}"
    split_dataset(every, "medebench:M", tmp_path / "s", fractions={"train": 0.6, "test": 0.4},
                  seed=0)  # fmt: skip
    data, _ = open_training_data(spec, options={"split": "train"}, bins=(64,), multiple=16,
                                 mix={}, seed=0)  # fmt: skip
    assert sorted(item.sample.sample_id for item in data.items) == ["3", "4", "5"]
    config = TrainConfig(dataset=spec, dataset_options={"split": "train"}, model="ip2p:/w",
                         method="full", out=tmp_path / "t")  # fmt: skip
    other = TrainConfig(dataset=spec, model="ip2p:/w", method="full", out=tmp_path / "t")
    assert config.differences(other) == ["dataset_options: {'split': 'train'} != {}"]
