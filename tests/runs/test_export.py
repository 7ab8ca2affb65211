import csv
import json
import math

import pytest

from medibench.runs import RunStore
from medibench.runs.export import export_scores
from medibench.samples import Score

SCORES = [
    Score(
        sample_id="a",
        model="m",
        k=0,
        protocol="native",
        protocol_version="1",
        metrics={"psnr": math.inf, "ssim": 0.5},
        notes=("resized",),
    ),
    Score(
        sample_id="b",
        model="m",
        k=0,
        protocol="native",
        protocol_version="1",
        metrics={"psnr": None, "ssim": None},
        status="missing",
        error="no prediction",
    ),
]


def test_jsonl_is_the_score_record_schema(tmp_path):
    with RunStore(tmp_path / "run") as st:
        for s in SCORES:
            st.put_score(s)
        scores = st.scores()
    assert scores == SCORES
    export_scores(scores, tmp_path / "s.jsonl")
    lines = (tmp_path / "s.jsonl").read_text().splitlines()
    assert [Score.from_json(x) for x in lines] == SCORES
    assert json.loads(lines[1])["metrics"] == {"psnr": None, "ssim": None}


def test_csv_and_parquet_are_flat(tmp_path):
    export_scores(SCORES, tmp_path / "s.csv", format="csv")
    rows = list(csv.DictReader(open(tmp_path / "s.csv")))
    assert rows[0]["metric.psnr"] == "inf" and rows[0]["notes"] == "resized"
    assert rows[1]["metric.ssim"] == "" and rows[1]["status"] == "missing"
    pq = pytest.importorskip("pyarrow.parquet")
    export_scores(SCORES, tmp_path / "s.parquet", format="parquet")
    table = pq.read_table(tmp_path / "s.parquet").to_pylist()
    assert table[0]["metric.psnr"] == math.inf and table[1]["metric.ssim"] is None


def test_unknown_format(tmp_path):
    with pytest.raises(ValueError, match="choose one of jsonl, csv, parquet"):
        export_scores(SCORES, tmp_path / "x", format="xlsx")
