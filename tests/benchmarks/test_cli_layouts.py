"""`medibench score` on each official layout, as the README shows it: every model in the
predictions folder, the benchmark's default protocols (paper and corrected), records stamped
with protocol and version, judged columns reported as not judged (never 0)."""

import json

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.samples import Score
from tests.benchmarks.medebench.conftest import build_medebench
from tests.benchmarks.medgen.conftest import build_medgen
from tests.benchmarks.miedb.conftest import build_layout
from tests.benchmarks.paintbench.conftest import build_paintbench

runner = CliRunner()


def _layouts(tmp_path):
    mede = build_medebench(tmp_path / "MedEBench")
    mie = build_layout(tmp_path / "MieDB").root
    gen = build_medgen(tmp_path / "medgen")
    paint = build_paintbench(tmp_path / "paint")
    return {
        "medebench": (f"medebench:{mede}", mede / "generated_images"),
        "miedb": (f"miedb:{mie}", mie / "eval_results"),
        "medgen": (f"medgen:{gen['data']}", gen["jsonl"].parent),
        "paintbench": (f"paintbench:{paint['bench']}", paint["outputs"]),
    }


EXPECTED = {
    "medebench": {("medebench", "paper"), ("medebench", "1")},
    "miedb": {("miedb", "paper"), ("miedb", "1")},
    "medgen": {("medgen", "code"), ("medgen", "1")},
    "paintbench": {("paintbench", "1")},
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_score_each_official_layout(kind, tmp_path):
    spec, predictions = _layouts(tmp_path)[kind]
    out = tmp_path / f"{kind}.jsonl"
    summary = tmp_path / f"{kind}.csv"
    res = runner.invoke(
        app,
        [
            "score",
            "--dataset",
            spec,
            "--predictions",
            str(predictions),
            "--out",
            str(out),
            "--summary",
            str(summary),
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    lines = out.read_text().splitlines()
    assert lines, "no score records"
    records = [Score.from_json(x) for x in lines]
    assert {(r.protocol, r.protocol_version) for r in records} == EXPECTED[kind]
    assert all({"protocol", "protocol_version"} <= set(json.loads(x)) for x in lines)
    assert any(r.status == "ok" for r in records)
    assert "score records" in res.output and "overall" in res.output
    # judged metrics are present as null with a reason until a judge fills them
    for r in records:
        for name, value in r.metrics.items():
            if value is None and r.status == "ok":
                assert r.error and f"{name}:" in r.error, (name, r.error)
