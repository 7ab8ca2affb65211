"""Feature metrics in score summaries: roles, set-level FID/KID, per-pair LPIPS and similarity."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")

from medibench.analysis.feature_scores import (  # noqa: E402
    cached_extractor,
    feature_roles,
    pair_scores,
    set_scores,
)
from medibench.cli import app  # noqa: E402
from medibench.io import read_image, write_image  # noqa: E402
from medibench.metrics.features import cosine_similarity, frechet_distance, kid  # noqa: E402
from tests.runs.conftest import make_native  # noqa: E402

HIST = "tests.analysis.test_features:grey_histogram"


def _inverted_outputs(tmp_path, n=6):
    """A native dataset of ``n`` samples and model ``m``'s outputs (each target inverted)."""
    data = make_native(tmp_path / "data", n=n)
    for i in range(n):
        out = read_image(data / "img" / f"s00{i}.png")
        write_image(tmp_path / "preds" / "m" / f"s00{i}_0.png", 255 - out)
    return data


def _fid_of_outputs(data, tmp_path):
    """FID of the histogram features of the targets and of model ``m``'s outputs."""
    from medibench.datasets import load_dataset, load_images

    ex = cached_extractor(HIST)
    samples = list(load_dataset(f"native:{data}"))
    real = ex([load_images(s).target for s in samples])
    fake = ex([read_image(tmp_path / "preds" / "m" / f"{s.sample_id}_0.png") for s in samples])
    return frechet_distance(real, fake)


def test_roles_from_the_extractor_names():
    roles = feature_roles(["inception:/w/pt.pth", "rad-dino:/w/rd", "lpips-alex:/w/lp"])
    assert roles == {
        "fid": "inception:/w/pt.pth",
        "embedding": "rad-dino:/w/rd",
        "lpips": "lpips-alex:/w/lp",
    }
    assert feature_roles([HIST]) == {"fid": HIST}
    with pytest.raises(ValueError, match="two embedding extractors"):
        feature_roles(["clip:/a", "dinov2:/b"])


def test_set_scores_are_fid_and_kid_of_the_extracted_features():
    rng = np.random.default_rng(0)
    real = [rng.integers(0, 256, (16, 16, 3), dtype=np.uint8) for _ in range(30)]
    fake = [np.clip(r.astype(int) + 40, 0, 255).astype(np.uint8) for r in real]
    (row,) = set_scores({"all": (real, fake)}, HIST, kid_subset_size=10, kid_subsets=5)
    ex = cached_extractor(HIST)
    a, b = ex(real), ex(fake)
    assert row["fid"] == pytest.approx(frechet_distance(a, b))
    assert row["kid"] == pytest.approx(kid(a, b, subset_size=10, subsets=5).mean)
    assert row["extractor"]["name"] == HIST and row["n_targets"] == 30
    (small,) = set_scores({"r": (real[:5], fake[:5])}, HIST, kid_subset_size=10, kid_subsets=2)
    assert any("5 rows for 8 dimensions" in n for n in small["notes"])
    assert any("capped at 5" in n for n in small["notes"])
    (one,) = set_scores({"r": (real[:1], fake[:1])}, HIST)
    assert one["fid"] is None and "at least 2" in one["notes"][0]


def test_pair_scores_record_their_extractors(lpips_dir, tmp_path):
    rng = np.random.default_rng(1)
    t, p = (rng.integers(0, 256, (40, 40, 3), dtype=np.uint8) for _ in range(2))
    roles = {"lpips": f"lpips-alex:{lpips_dir}", "embedding": HIST}
    values, notes = pair_scores(t, p, roles)
    lp = cached_extractor(f"lpips-alex:{lpips_dir}", size=256, resize="pil-lanczos")
    assert values["lpips"] == pytest.approx(float(lp([t], [p])[0]))
    h = cached_extractor(HIST)([t, p])
    assert values["embedding_similarity"] == pytest.approx(
        float(cosine_similarity(h[:1], h[1:])[0])
    )
    assert notes[0].startswith("lpips by lpips-alex-v0.1 (weights sha256 ")
    assert "resize pil-lanczos, size [256, 256]" in notes[0]


def test_cli_prints_and_writes_the_feature_summary(lpips_dir, tmp_path):
    data = _inverted_outputs(tmp_path)
    args = [
        "analyze",
        "features",
        "--dataset",
        f"native:{data}",
        "--predictions",
        str(tmp_path / "preds"),
    ]
    args += ["--features", HIST, "--features", f"lpips-alex:{lpips_dir}", "--by", "task"]
    args += ["--csv", str(tmp_path / "f.csv"), "--resamples", "50"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "feature metrics: m" in res.output and "lpips-alex-v0.1" in res.output
    rows = list(csv.DictReader(open(tmp_path / "f.csv")))
    assert [r["group"] for r in rows] == ["", "all"]
    allrow = rows[-1]
    assert int(allrow["n"]) == 6 and float(allrow["fid"]) > 0 and float(allrow["lpips"]) > 0
    assert float(allrow["lpips_ci_low"]) <= float(allrow["lpips"]) <= float(allrow["lpips_ci_high"])
    assert HIST in allrow["extractors"]


def test_cli_names_missing_weights(tmp_path):
    data = make_native(tmp_path / "data", n=2)
    write_image(tmp_path / "preds" / "m" / "s000_0.png", np.zeros((32, 32, 3), np.uint8))
    args = [
        "analyze",
        "features",
        "--dataset",
        f"native:{data}",
        "--predictions",
        str(tmp_path / "preds"),
    ]
    res = CliRunner().invoke(app, [*args, "--features", f"inception:{tmp_path}/nope"])
    assert res.exit_code == 2
    assert "Inception-v3 FID weights not found" in res.output and "nope" in res.output


@pytest.mark.filterwarnings("ignore::medibench.metrics.features.FeatureSetWarning")
def test_cli_puts_fid_into_a_protocols_summary(tmp_path):
    data = _inverted_outputs(tmp_path)
    args = [
        "analyze",
        "features",
        "--dataset",
        f"native:{data}",
        "--predictions",
        str(tmp_path / "preds"),
    ]
    args += [
        "--features",
        HIST,
        "--protocol",
        "native@1",
        "--by",
        "task",
        "--csv",
        str(tmp_path / "s.csv"),
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "native@1 by task" in res.output and "fid" in res.output
    rows = list(csv.DictReader(open(tmp_path / "s.csv")))
    micro = next(r for r in rows if r["by"] == "all" and r["group"] == "micro")
    assert float(micro["fid"]) == pytest.approx(_fid_of_outputs(data, tmp_path))
    assert micro["protocol"] == "native" and float(micro["ssim"]) < 1


@pytest.mark.filterwarnings("ignore::medibench.metrics.features.FeatureSetWarning")
def test_score_features_puts_fid_into_the_summary(tmp_path):
    """``medibench score --features``: the same FID in the score summary as analyze features."""
    data = _inverted_outputs(tmp_path)
    args = ["score", "--dataset", f"native:{data}", "--predictions", str(tmp_path / "preds")]
    args += ["--out", str(tmp_path / "r.jsonl"), "--features", HIST, "--by", "task"]
    res = CliRunner().invoke(app, [*args, "--csv", str(tmp_path / "s.csv"), "--no-progress"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(open(tmp_path / "s.csv")))
    micro = next(r for r in rows if r["by"] == "all" and r["group"] == "micro")
    assert float(micro["fid"]) == pytest.approx(_fid_of_outputs(data, tmp_path))
    by_task = [r for r in rows if r["by"] == "task"]
    assert by_task and all(r["fid"] not in ("", None) for r in by_task)
    bad = CliRunner().invoke(app, [*args[:-2], "--features", "clip:/a", "--features", "dinov2:/b"])
    assert bad.exit_code == 2 and "two embedding extractors" in bad.output


@pytest.mark.filterwarnings("ignore::medibench.metrics.features.FeatureSetWarning")
def test_cli_leaves_out_text_answers_with_a_note(tmp_path):
    """A compositional model's folder: ``.txt`` answers beside (and instead of) its images."""
    from tests.benchmarks.medgen.conftest import build_medgen

    tree = build_medgen(tmp_path)
    preds = tree["pngs"] / "modelB"
    (preds / "medgen-ImageEditing-style-transfer-000001_0.txt").write_text("The answer.")
    text_only = preds / "medgen:ImageEditing:anatomical-annotation:000003_0.txt"
    text_only.write_text("No image.")
    args = ["analyze", "features", "--dataset", f"medgen:{tree['data']}"]
    args += ["--predictions", str(tree["pngs"]), "--features", HIST, "--resamples", "0"]
    res = CliRunner().invoke(app, [*args, "--csv", str(tmp_path / "f.csv")])
    assert res.exit_code == 0, res.output
    assert "modelB: 1 output(s) not an image" in res.output and text_only.name in res.output
    allrow = list(csv.DictReader(open(tmp_path / "f.csv")))[-1]
    assert allrow["group"] == "all" and int(allrow["n"]) == 2  # the PNG beside the answer counts
    assert int(allrow["n_no_image"]) == 1 and float(allrow["fid"]) > 0
