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
    args += ["--protocol", "medebench@paper", "--summary", str(tmp_path / "s.csv")]
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
