"""Issue 10, item 6: an ``output_image`` of ``"Edit Error: ..."`` (what MedGEN-Bench's official
agent writes when an edit fails) is a missing output with that text as the reason, never a file
that cannot be read."""

from __future__ import annotations

import json

import pytest

from medibench.benchmarks.medgen.dataset import read_medgen
from medibench.benchmarks.medgen.protocols import MedGenCodeProtocol
from medibench.runs import score_predictions

TEXT = "Edit Error: the image model refused the request (content policy)"


@pytest.fixture
def failed(medgen_tree, tmp_path):
    ds = read_medgen(medgen_tree["data"])
    sample = ds.get("medgen-ImageEditing-style-transfer-000001")
    raw_id = sample.metadata["medgen_sample_id"]
    jsonl = tmp_path / "qwen3-vl_flux_edit.jsonl"
    jsonl.write_text(json.dumps({"sample_id": raw_id, "output_image": TEXT}) + "\n")
    return ds, sample, ds.find_predictions(tmp_path)


def test_edit_error_is_indexed_as_a_failed_output_not_a_path(failed):
    ds, sample, index = failed
    assert index.models == ["qwen3-vl_flux"]
    assert index.files["qwen3-vl_flux"] == {}
    assert index.unknown == []
    assert index.reason("qwen3-vl_flux", sample.sample_id, 0) == (
        f"the model's edit failed: {TEXT}"
    )


def test_edit_error_is_scored_missing_not_as_a_read_error(failed):
    ds, sample, index = failed
    records = score_predictions(ds, index, [MedGenCodeProtocol()], k=1, progress=False)
    record = next(r for r in records if r.sample_id == sample.sample_id)
    assert record.status == "missing"
    assert "file not found" not in (record.error or "")
    assert all(v is None for v in record.metrics.values())


def test_edit_error_text_is_the_missing_reason(failed):
    ds, sample, index = failed
    records = score_predictions(ds, index, [MedGenCodeProtocol()], k=1, progress=False)
    record = next(r for r in records if r.sample_id == sample.sample_id)
    assert record.error == f"no prediction: the model's edit failed: {TEXT}"
