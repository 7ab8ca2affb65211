"""MVC-Bench's methods through ``calibration train`` and ``calibration grid``: every loss of its
registry, each of its 8 backbones' tiny stand-ins (six OpenCLIP models made by OpenCLIP, PLIP as
a transformers CLIP, MedCLIP's clear error) and a 2 backbones x 3 losses x 2 seeds grid."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.prompt_tuning import LOSSES, TrainSettings, train
from tests.prompt_tuning.conftest import OPENCLIP_SPECS

runner = CliRunner()


def run(folder_dataset, backbone, out, **kw):
    base = dict(
        dataset=str(folder_dataset),
        backbone=backbone,
        method="coop",
        out=str(out),
        shots=2,
        seed=1,
        epochs=1,
        batch_size=2,
        options={"n_ctx": 2},
        augment=False,
    )
    return train(TrainSettings(**{**base, **kw}))


@pytest.mark.parametrize("loss", [name for name in LOSSES if name != "ce"])
def test_every_loss_trains(loss, folder_dataset, tiny_clip, tmp_path):
    result = run(folder_dataset, f"clip:{tiny_clip}", tmp_path / "run", losses=["ce", loss])
    lines = [json.loads(x) for x in (tmp_path / "run" / "train.jsonl").read_text().splitlines()]
    assert len(lines) == 3  # 6 shots in batches of 2, one epoch
    for line in lines:
        assert line["loss"] == pytest.approx(line["ce"] + line[loss], rel=1e-6)
    assert set(result["accuracy"]) == {"test"}


def test_a_text_feature_loss_with_cocoop_is_refused(folder_dataset, tiny_clip, tmp_path):
    with pytest.raises(
        ValueError,
        match="--loss angular: reads the class text features, which cocoop does not have",
    ):
        run(
            folder_dataset,
            f"clip:{tiny_clip}",
            tmp_path / "run",
            method="cocoop",
            losses=["angular"],
            options={},
        )


@pytest.mark.parametrize("name", sorted(OPENCLIP_SPECS))
def test_each_openclip_backbone_trains(name, folder_dataset, tmp_path):
    result = run(folder_dataset, OPENCLIP_SPECS[name], tmp_path / "run", losses=["mcm"])
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["backbone"]["family"] == "open_clip"
    assert 0.0 <= result["accuracy"]["test"] <= 1.0


def test_plip_is_a_transformers_clip_and_medclip_is_named(folder_dataset, tiny_clip, tmp_path):
    run(folder_dataset, f"clip:{tiny_clip}", tmp_path / "plip")  # PLIP: a CLIPModel folder
    result = runner.invoke(app, [
        "calibration", "train", "--dataset", str(folder_dataset), "--backbone",
        "medclip:models/medclip", "--method", "coop", "--shots", "2", "--out",
        str(tmp_path / "medclip"),
    ])  # fmt: skip
    assert result.exit_code != 0
    assert "pip install medclip" in " ".join(result.output.split())


def test_a_grid_of_two_backbones_three_losses_two_seeds(tmp_path, folder_dataset, tiny_clip):
    lines = [
        "out: out",
        f"dataset: {folder_dataset}",
        "shots: 2",
        f"evals: {{in-domain: {folder_dataset}}}",
        "methods: [coop]",
        "losses: [ce, mdca, eccv-penalty]",
        "seeds: [1, 2]",
        'templates: ["a photo of a {}."]',
        f'backbones: ["clip:{tiny_clip}", "{OPENCLIP_SPECS["vit-b-16"]}"]',
        "epochs: 1",
        "batch_size: 3",
        "options: {coop: {n_ctx: 2}}",
        "augment: false",
        "bins: 3",
    ]
    config = tmp_path / "grid.yaml"
    config.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["calibration", "grid", str(config)])
    assert result.exit_code == 0, result.output
    assert "12 cells (12 trained, 0 done before)" in " ".join(result.output.split())
    cells = list(csv.DictReader((tmp_path / "out" / "tables" / "cells.csv").open()))
    seen = {(c["backbone"], c["loss"], c["seed"]) for c in cells}
    assert len(seen) == 12
