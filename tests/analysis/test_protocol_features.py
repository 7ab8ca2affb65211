"""The benchmarks' feature columns: medebench@paper's FID, medgen@code's LPIPS and similarity."""

from __future__ import annotations

import csv

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")

from medibench.analysis.feature_scores import cached_extractor  # noqa: E402
from medibench.cli import app  # noqa: E402
from medibench.datasets import load_dataset, load_images  # noqa: E402
from medibench.io import read_image  # noqa: E402
from medibench.metrics.features import frechet_distance  # noqa: E402
from tests.benchmarks.medebench.conftest import build_medebench  # noqa: E402

HIST = "tests.analysis.test_features:grey_histogram"


@pytest.mark.filterwarnings("ignore::medibench.metrics.features.FeatureSetWarning")
def test_medebench_paper_summary_gets_its_fid_column(tmp_path):
    root = build_medebench(tmp_path / "MedEBench")
    args = ["analyze", "features", "--dataset", f"medebench:{root}"]
    args += ["--predictions", str(root / "generated_images"), "--features", HIST]
    args += ["--protocol", "medebench@paper", "--csv", str(tmp_path / "s.csv")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "medebench@paper by region" in res.output
    rows = list(csv.DictReader(open(tmp_path / "s.csv")))
    micro = next(r for r in rows if r["by"] == "all" and r["group"] == "micro")
    ds = load_dataset(f"medebench:{root}")
    index = ds.find_predictions(root / "generated_images")
    files = index.files["modelA"]
    pairs = [(s, files[s.sample_id][0]) for s in ds if s.sample_id in files]
    pairs = [(s, p) for s, p in pairs if load_images(s).target is not None]
    ex = cached_extractor(HIST)
    real = ex([load_images(s).target for s, _ in pairs])
    fake = ex([read_image(p) for _, p in pairs])
    assert float(micro["fid"]) == pytest.approx(frechet_distance(real, fake))
    assert micro["cp"] != ""  # the protocol's own columns are there too
    assert HIST in res.output  # the extractor is named


def test_medgen_code_records_lpips_and_embedding_similarity(lpips_dir, dinov2_dir, tmp_path):
    import dataclasses

    import numpy as np
    from PIL import Image

    from medibench.analysis.feature_scores import pair_scores
    from medibench.protocols import load_protocol
    from medibench.runs import score_predictions
    from tests.benchmarks.medgen.conftest import build_medgen

    tree = build_medgen(tmp_path)
    ds = load_dataset(f"medgen:{tree['data']}")
    index = ds.find_predictions(tree["pngs"])
    specs = (f"lpips-alex:{lpips_dir}", f"rad-dino:{dinov2_dir}")
    plain = load_protocol("medgen@code")
    proto = dataclasses.replace(plain, features=specs)
    mine = [r for r in score_predictions(ds, index, [proto], progress=False) if r.status == "ok"]
    unset = [r for r in score_predictions(ds, index, [plain], progress=False) if r.status == "ok"]
    by_id = {s.sample_id: s for s in ds}
    assert mine and all(r.metrics["lpips"] is not None for r in mine)
    for r in mine:
        s = by_id[r.sample_id]
        target = proto.load_images(s).target
        pred = proto.read_prediction(index.files[r.model][r.sample_id][r.k])
        if pred.shape != target.shape:
            size = (target.shape[1], target.shape[0])
            pred = np.asarray(Image.fromarray(pred).resize(size, Image.Resampling.LANCZOS))
        roles = {"lpips": specs[0], "embedding": specs[1]}
        want, _ = pair_scores(target, pred, roles)
        assert r.metrics["lpips"] == pytest.approx(want["lpips"], rel=1e-6)
        assert r.metrics["embedding_similarity"] == pytest.approx(
            want["embedding_similarity"], rel=1e-6
        )
        assert any(n.startswith("lpips by lpips-alex-v0.1 (weights sha256 ") for n in r.notes)
        assert any(n.startswith("embedding_similarity by rad-dino") for n in r.notes)
    assert unset and all(r.metrics["lpips"] is None for r in unset)
    assert all("needs a feature extractor" in r.reasons["lpips"] for r in unset)
    assert all("--features" in r.reasons["embedding_similarity"] for r in unset)


def test_medgen_code_summary_shows_lpips_similarity_and_their_pass_rates(
    lpips_dir, dinov2_dir, tmp_path
):
    from tests.benchmarks.medgen.conftest import build_medgen

    tree = build_medgen(tmp_path)
    args = ["analyze", "features", "--dataset", f"medgen:{tree['data']}"]
    args += ["--predictions", str(tree["pngs"]), "--protocol", "medgen@code", "--by", "task"]
    args += ["--features", f"lpips-alex:{lpips_dir}", "--features", f"rad-dino:{dinov2_dir}"]
    args += ["--csv", str(tmp_path / "s.csv")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(open(tmp_path / "s.csv")))
    micro = next(r for r in rows if r["by"] == "all" and r["group"] == "micro")
    assert float(micro["lpips"]) > 0 and -1 <= float(micro["embedding_similarity"]) <= 1
    assert micro["lpips_pass_rate"] != "" and micro["embedding_pass_rate"] != ""
    assert "medgen@code: lpips by lpips-alex-v0.1" in res.output
