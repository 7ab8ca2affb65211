"""``medibench calibration train`` end to end on a tiny CLIP: outputs that ``calibration
score`` reads, the record of every choice, same seed same predictions, resume after a kill."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.calibration import load_predictions
from medibench.cli import app
from medibench.prompt_tuning import TrainSettings, train
from tests.prompt_tuning.conftest import write_folder_dataset

runner = CliRunner()


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    return write_folder_dataset(tmp_path_factory.mktemp("shift") / "s", per_class=3, seed=9)


def settings(folder_dataset, tiny_clip, shifted, out, **kw):
    base = dict(
        dataset=str(folder_dataset),
        backbone=f"clip:{tiny_clip}",
        method="coop",
        out=str(out),
        shots=2,
        seed=1,
        epochs=3,
        batch_size=2,
        options={"n_ctx": 4},
        evals={"in": str(folder_dataset), "shifted": str(shifted)},
    )
    return TrainSettings(**{**base, **kw})


def cli(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def test_train_command_writes_what_score_reads(folder_dataset, tiny_clip, shifted, tmp_path):
    out = tmp_path / "run"
    base = ["calibration", "train", "--dataset", folder_dataset, "--backbone", f"clip:{tiny_clip}"]
    result = cli(
        *base, "--method", "kgcoop", "--shots", 2, "--seed", 1, "--loss", "ce",
        "--loss", "mcm:alpha=0.1,beta=0.01,include_ce=false", "--template", "a photo of a {}.",
        "--epochs", 2, "--lr", 0.01, "--batch-size", 3, "--out", out,
        "--eval", f"in={folder_dataset}", "--eval", f"shifted={shifted}", "--set", "w=4",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert config["options"]["w"] == 4 and config["options"]["lr"] == 0.01
    assert config["options"]["batch_size"] == 3 and config["options"]["momentum"] == 0.9
    assert config["losses"] == [
        {"name": "ce", "weight": 1.0},
        {"name": "mcm", "weight": 1.0, "alpha": 0.1, "beta": 0.01, "include_ce": False},
    ]
    assert len(config["backbone"]["sha256"]) == 64
    shots = json.loads((out / "shots.json").read_text())
    assert [len(v) for v in shots["ids"].values()] == [2, 2, 2]
    lines = [json.loads(x) for x in (out / "train.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2, 3, 4]  # 6 shots / batch 3, 2 epochs
    assert [x["lr"] for x in lines] == [1e-5, 1e-5, 0.005, 0.005]  # warm-up, then cosine
    for x in lines:
        assert set(x) == {"step", "epoch", "lr", "loss", "ce", "mcm", "kgcoop"}
        assert x["loss"] == pytest.approx(x["ce"] + x["mcm"] + x["kgcoop"], rel=1e-5)
    pred = load_predictions(out / "predictions" / "shifted.npz")
    assert pred.n == 9 and pred.logits.shape == (9, 3)
    assert list(pred.groups["ids"][:2]) == ["benign/benign_00.png", "benign/benign_01.png"]
    scored = cli("calibration", "score", out / "predictions.npz", "--by", "domain", "--bins", 3,
                 "--resamples", 0, "--json", tmp_path / "s.json")  # fmt: skip
    assert scored.exit_code == 0, scored.output
    scores = json.loads((tmp_path / "s.json").read_text())
    assert set(scores["groups"]) == {"in", "shifted"}
    assert scores["groups"]["shifted"]["accuracy"] == pytest.approx(
        float((pred.logits.argmax(1) == pred.labels).mean())
    )
    paper = cli("calibration", "score", out / "predictions" / "in.npz", "--protocol",
                "mvcbench@paper", "--bins", 5, "--resamples", 0)  # fmt: skip
    assert paper.exit_code == 0, paper.output
    again = cli(*base, "--method", "kgcoop", "--shots", 2, "--out", out)
    assert again.exit_code == 2 and "holds a finished run with other settings" in again.output


def test_same_seed_same_predictions_other_seed_other_shots(
    folder_dataset, tiny_clip, shifted, tmp_path
):
    a = train(settings(folder_dataset, tiny_clip, shifted, tmp_path / "a"))
    b = train(settings(folder_dataset, tiny_clip, shifted, tmp_path / "b"))
    c = train(settings(folder_dataset, tiny_clip, shifted, tmp_path / "c", seed=2))
    pa, pb, pc = (np.load(tmp_path / k / "predictions.npz")["logits"] for k in "abc")
    assert np.array_equal(pa, pb) and a["accuracy"] == b["accuracy"]
    assert not np.array_equal(pa, pc)
    ids = [json.loads((tmp_path / k / "shots.json").read_text())["ids"] for k in "abc"]
    assert ids[0] == ids[1] != ids[2]
    assert c["accuracy"].keys() == {"in", "shifted"}


def test_resume_after_a_kill_gives_the_same_run(
    folder_dataset, tiny_clip, shifted, tmp_path, monkeypatch
):
    full = tmp_path / "full"
    train(settings(folder_dataset, tiny_clip, shifted, full, method="promptsrc"))
    from medibench.prompt_tuning import _deep, _train

    killed = tmp_path / "killed"
    original = _deep.PromptSRC.end_epoch

    def die_in_second_epoch(self, epoch, epochs):
        if epoch == 1:
            raise KeyboardInterrupt
        original(self, epoch, epochs)

    monkeypatch.setattr(_deep.PromptSRC, "end_epoch", die_in_second_epoch)
    monkeypatch.setattr(_train, "CHECKPOINT_SECONDS", 0.0)  # a checkpoint after every epoch
    with pytest.raises(KeyboardInterrupt):
        train(settings(folder_dataset, tiny_clip, shifted, killed, method="promptsrc"))
    assert not (killed / "done.json").exists()
    assert len((killed / "train.jsonl").read_text().splitlines()) == 3  # epoch 1 kept
    monkeypatch.setattr(_deep.PromptSRC, "end_epoch", original)
    train(settings(folder_dataset, tiny_clip, shifted, killed, method="promptsrc"))
    assert (killed / "train.jsonl").read_text() == (full / "train.jsonl").read_text()
    assert np.array_equal(
        np.load(killed / "predictions.npz")["logits"], np.load(full / "predictions.npz")["logits"]
    )


def test_bad_requests(folder_dataset, tiny_clip, shifted, tmp_path):
    with pytest.raises(ValueError, match="fewer than --shots 9"):
        train(settings(folder_dataset, tiny_clip, shifted, tmp_path / "x", shots=9))
    with pytest.raises(ValueError, match="--set depth: not an option of coop"):
        train(settings(folder_dataset, tiny_clip, shifted, tmp_path / "y", options={"depth": 3}))
    with pytest.raises(ValueError, match="unknown method 'clipadapter'"):
        train(settings(folder_dataset, tiny_clip, shifted, tmp_path / "z", method="clipadapter"))
    result = cli("calibration", "train", "--dataset", folder_dataset, "--backbone",
                 f"clip:{tiny_clip}", "--method", "coop", "--out", tmp_path / "w",
                 "--eval", "nameless")  # fmt: skip
    assert result.exit_code == 2 and "--eval 'nameless': expected KEY=VALUE" in result.output


def test_module_callable_backbone(folder_dataset, tiny_clip, shifted, tmp_path, monkeypatch):
    """A ``module:callable`` returning the two towers, a tokenizer and a logit scale."""
    (tmp_path / "my_towers.py").write_text(
        "import transformers\n"
        "from medibench.prompt_tuning._towers import HFImageTower, HFTextTower\n"
        "def make():\n"
        f"    path = {str(tiny_clip)!r}\n"
        "    model = transformers.CLIPModel.from_pretrained(path)\n"
        "    processor = transformers.AutoImageProcessor.from_pretrained(path)\n"
        "    tokenizer = transformers.AutoTokenizer.from_pretrained(path)\n"
        "    return (HFImageTower(model, 'clip', processor), HFTextTower(model, 'clip'),\n"
        "            tokenizer, 50.0)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "callable"
    zero_shot = {"method": "zero-shot", "options": {}}
    train(settings(folder_dataset, tiny_clip, shifted, out, backbone="my_towers:make", **zero_shot))
    config = json.loads((out / "config.json").read_text())
    assert config["backbone"]["logit_scale"] == pytest.approx(50.0)
    assert config["backbone"]["family"] == "callable"
    # zero-shot through clip:PATH: the same cosines, scaled by the model's own logit_scale
    ref = tmp_path / "ref"
    train(settings(folder_dataset, tiny_clip, shifted, ref, **zero_shot))
    scale = json.loads((ref / "config.json").read_text())["backbone"]["logit_scale"]
    got = np.load(out / "predictions.npz")["logits"]
    want = np.load(ref / "predictions.npz")["logits"]
    assert np.allclose(got / 50.0, want / scale, atol=1e-5)
    with pytest.raises(ValueError, match="must return \\(image_tower, text_tower, tokenizer"):
        (tmp_path / "bad_towers.py").write_text("def make():\n    return 1\n")
        train(
            settings(folder_dataset, tiny_clip, shifted, tmp_path / "b", backbone="bad_towers:make")
        )


def test_device_is_checked_and_recorded(folder_dataset, tiny_clip, shifted, tmp_path):
    import torch

    with pytest.raises(ValueError, match="--device 'gpu0'"):
        train(settings(folder_dataset, tiny_clip, shifted, tmp_path / "a", device="gpu0"))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="--device cuda: this torch has no CUDA device"):
            train(settings(folder_dataset, tiny_clip, shifted, tmp_path / "b", device="cuda"))
    out = tmp_path / "c"
    train(settings(folder_dataset, tiny_clip, shifted, out, epochs=1, device="cpu"))
    config = json.loads((out / "config.json").read_text())
    assert config["device"] == "cpu" and "device" not in config["settings"]
