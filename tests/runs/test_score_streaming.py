"""``medibench score`` holds a bounded number of live samples, output paths and score records,
whatever the dataset's size (issue 41: 100,000 samples in bounded memory; ``bench/scale.py``
measures the memory itself).

Before it streamed, the command rebuilt every sample at once to check ``--by-bins`` (even without
it), its index of the outputs held a ``Path`` and a dict per output, and the score records were
held pickled in memory, one ``bytes`` each, until the summaries were made.
"""

from __future__ import annotations

import gc
import json
import shutil
from pathlib import PurePath

from typer.testing import CliRunner

import medibench.cli.score as score_cli
from medibench._packed import PackedFile
from medibench.cli import app
from medibench.datasets import load_dataset
from medibench.samples import Prediction, Sample, Score
from tests.runs.conftest import make_native

N = 24


def _live(kind: type) -> int:
    return sum(isinstance(o, kind) for o in gc.get_objects())


def _outputs(data, folder):
    """Each sample's target as model ``copy``'s output 0 (a perfect edit)."""
    (folder / "copy").mkdir(parents=True)
    for i in range(N):
        shutil.copy(data / "img" / f"s{i:03d}_t.png", folder / "copy" / f"s{i:03d}_0.png")
    return folder


def test_an_index_of_outputs_holds_no_path_per_output(tmp_path):
    data = make_native(tmp_path / "data", n=N, size=16)
    ds = load_dataset(f"native:{data}")
    gc.collect()
    before = _live(PurePath)
    index = ds.find_predictions(_outputs(data, tmp_path / "out"))
    gc.collect()
    assert _live(PurePath) - before <= 2  # the folders', not one per output
    assert index.models == ["copy"] and len(index.files["copy"]) == N
    assert index.files["copy"]["s007"] == {0: tmp_path / "out" / "copy" / "s007_0.png"}
    assert dict(index.files["copy"]).keys() == {f"s{i:03d}" for i in range(N)}
    index.add_failed("copy", "s007", 0, "refused")
    assert "s007" not in index.files["copy"] and index.reason("copy", "s007", 0) == "refused"
    index.add("copy", "s007", 1, tmp_path / "elsewhere" / "s007_1.png")
    assert index.files["copy"]["s007"] == {1: tmp_path / "elsewhere" / "s007_1.png"}


def test_score_holds_a_bounded_number_of_samples_and_records(tmp_path, monkeypatch):
    data = make_native(tmp_path / "data", n=N, size=16)
    predictions = _outputs(data, tmp_path / "out")
    seen: list[tuple[int, int, int]] = []
    held: list[object] = []
    check_bins, write_records = score_cli._check_bins, score_cli._write_records

    gc.collect()
    before = (_live(Sample), _live(Prediction), _live(Score))  # other tests' may still be alive

    def probe() -> None:
        gc.collect()
        kinds = (Sample, Prediction, Score)
        seen.append(tuple(_live(k) - b for k, b in zip(kinds, before, strict=True)))

    def checking(specs, samples):
        probe()  # the samples to check, given: none rebuilt yet
        return check_bins(specs, samples)

    def writing(records, *args, **kwargs):
        held.append(records)
        probe()  # every record scored
        return write_records(records, *args, **kwargs)

    monkeypatch.setattr(score_cli, "_check_bins", checking)
    monkeypatch.setattr(score_cli, "_write_records", writing)
    out = tmp_path / "scores.jsonl"
    args = ["score", "--dataset", f"native:{data}", "--predictions", str(predictions),
            "--out", str(out), "--no-progress"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert len(seen) == 2 and max(max(counts) for counts in seen) <= 2
    # The records wait in a temporary file, not in memory, until written and summarised.
    assert type(held[0]) is PackedFile and len(held[0]) == N
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["sample_id"], r["status"]) for r in records] == [
        (f"s{i:03d}", "ok") for i in range(N)
    ]
    # Each output is its target: infinite PSNR (written as the string "inf"), SSIM 1.
    assert {(r["metrics"]["psnr"], r["metrics"]["ssim"]) for r in records} == {("inf", 1.0)}
