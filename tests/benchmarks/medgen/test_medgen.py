"""MedGEN-Bench: the adapter, the output layouts and ``medgen@code`` against the official code.

The reference below is MedGEN-Bench-eval's ``util/metrics.py::FR_IQA`` written out: PIL RGB,
LANCZOS resize to the ground truth, numpy PSNR capped at 100, PIL "L" + skimage SSIM.
"""

import json
import math

import numpy as np
import pytest
from PIL import Image
from skimage.metrics import structural_similarity

from medibench.benchmarks.medgen.dataset import PERSPECTIVES, detect, normalize_task, read_medgen
from medibench.benchmarks.medgen.protocols import MedGenCodeProtocol
from medibench.datasets import DatasetError, load_dataset
from medibench.io import ImageReadError
from medibench.protocols import load_protocol
from medibench.runs import score_predictions
from medibench.samples import Perspective

MODEL = "qwen3-vl_gpt-image-1"


def official(out_path, gt_path, *, float32=False):
    """FR_IQA('psnr') and FR_IQA('ssim') of the official code, per sample."""
    e = Image.open(out_path).convert("RGB")
    r = Image.open(gt_path).convert("RGB")
    if e.size != r.size:
        e = e.resize(r.size, Image.Resampling.LANCZOS)
    dtype = np.float32 if float32 else np.float64
    mse = np.mean((np.asarray(r, dtype) - np.asarray(e, dtype)) ** 2)
    p = 100.0 if mse == 0 else float(20 * np.log10(255.0 / np.sqrt(mse)))
    s = structural_similarity(np.array(r.convert("L")), np.array(e.convert("L")), data_range=255)
    return p, float(s)


@pytest.fixture(scope="module")
def ds(medgen_tree):
    return read_medgen(medgen_tree["data"])


@pytest.fixture(scope="module")
def scores(ds, medgen_tree):
    index = ds.find_predictions(medgen_tree["jsonl"].parent)
    records = score_predictions(ds, index, [MedGenCodeProtocol()], k=1, progress=False)
    return {r.sample_id: r for r in records}, index


# --- adapter ---------------------------------------------------------------------------------


def test_samples_fields_and_perspectives(ds, medgen_tree):
    assert ds.sample_ids() == [
        "medgen-ImageEditing-style-transfer-000001",
        "medgen-ImageEditing-artifact-removal-000002",
        "medgen-ImageEditing-anatomical-annotation-000003",
        "medgen-ImageEditing-organic-removal-000004",
        "medgen-ImageEditing-dye-transfer-000005",
        "medgen-ImageEditing-teleportation-000006",
    ]
    s1, _, s3, s4, s5, s6 = ds
    assert s1.task == "style-transfer" and s1.perspective == Perspective.transformation
    assert s1.metadata["medgen_sample_id"] == "medgen:ImageEditing:style-transfer:000001"
    assert s1.description == "The expected result of style-transfer."
    assert s1.input.endswith("source/ImageEditing/style-transfer/in_1.png")
    assert s1.target.endswith("source/ImageEditing/style-transfer/gt_1.png")
    assert s1.mask is None and s1.modality == "CT"
    assert s3.perspective == Perspective.perception
    assert s3.description == "finding: optic disc\nlocation: centre"
    assert s3.metadata["answer"] == {"finding": "optic disc", "location": "centre"}
    assert s4.perspective == Perspective.modification and s4.modality == "X-ray"
    assert s4.input.endswith("in_4a.png")
    assert s4.metadata["extra_input_images"][0].endswith("in_4b.png")
    assert s5.task == "style-transfer" and s5.metadata["paper_task"] == "dye-transfer"
    assert s6.task == "teleportation" and s6.perspective == Perspective.modification
    assert s6.metadata["unknown_task"] is True
    assert set(PERSPECTIVES) >= {s.task for s in ds if s.sample_id != s6.sample_id}


def test_problems_are_reported_not_fatal(ds):
    text = "\n".join(ds.problems)
    assert len(ds.problems) == 5, text
    assert "unknown task 'teleportation'" in text and "kept as a modification sample" in text
    assert "line 7 (sample 'medgen:ImageEditing:style-transfer:000007')" in text
    assert "missing or empty field(s) ground_truth_image; skipped" in text
    assert "category 'VQA' is not ImageEdit; skipped" in text
    assert "ground_truth_image 'source/ImageEditing/style-transfer/gt_9.png' does not exist" in text
    assert "line 10" in text and "same id as line 1; skipped" in text


def test_other_records_kept(ds):
    assert [r["sample_id"] for r in ds.other_records["vqa"]] == ["q1"]
    assert [r["paper_task"] for r in ds.other_records["gen"]] == [
        "report-generation",
        "disease-prediction",
    ]


def test_registry_detect_and_defaults(medgen_tree, tmp_path):
    ds = load_dataset(f"medgen:{medgen_tree['data']}")
    assert len(ds) == 6 and ds.default_protocols == ("medgen@code", "medgen@1")
    assert ds.expected_k == 1
    assert detect(medgen_tree["data"]) and not detect(tmp_path)
    assert normalize_task("Image_Edit", "Resolution_Edit") == "resolution-editing"
    assert normalize_task("organ-removal") == "organic-removal"


def test_malformed_line_names_file_and_line(tmp_path):
    (tmp_path / "edit.jsonl").write_text('{"sample_id": "a"}\n{"sample_id": "b",\n')
    with pytest.raises(DatasetError, match=r"edit.jsonl line 2: not valid JSON"):
        read_medgen(tmp_path)
    (tmp_path / "edit.jsonl").write_text('["not", "an", "object"]\n')
    with pytest.raises(DatasetError, match=r"line 1: expected a JSON object, got list"):
        read_medgen(tmp_path)


def test_no_folder_or_no_edit_file(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        read_medgen(tmp_path / "nope")
    with pytest.raises(DatasetError, match="has no edit.jsonl"):
        read_medgen(tmp_path)


def test_paths_leaving_the_folder_are_refused(tmp_path):
    (tmp_path / "edit.jsonl").write_text(
        json.dumps(
            {
                "category": "ImageEdit",
                "paper_task": "style-transfer",
                "instruction": "x",
                "sample_id": "a:1",
                "input_image": "../secret.png",
                "ground_truth_image": "/etc/passwd",
            }
        )
        + "\n"
    )
    # The only record is refused, so the dataset is empty: an error naming the file (issue 10).
    with pytest.raises(DatasetError) as err:
        read_medgen(tmp_path)
    assert "input_image '../secret.png' leaves the dataset folder" in str(err.value)
    assert str(err.value).startswith(f"{tmp_path / 'edit.jsonl'}: the dataset has no samples")


# --- output layouts --------------------------------------------------------------------------


def test_official_jsonl_layout(scores, ds, medgen_tree):
    _, index = scores
    assert index.models == [MODEL]
    files = index.files[MODEL]
    ids = ds.sample_ids()
    assert sorted(files) == sorted([ids[0], ids[1], ids[2], ids[4], ids[5]])  # line 4: error
    assert files[ids[0]][0] == medgen_tree["repo"] / "output_image" / "out_1.png"
    assert [p.name for _, p in index.unknown] == ["out_1.png"]  # the record with an unknown id


def test_png_layout_accepts_both_id_forms(ds, medgen_tree):
    index = ds.find_predictions(medgen_tree["pngs"])
    assert index.models == ["modelB"]
    assert sorted(index.files["modelB"]) == sorted(ds.sample_ids()[:2])
    assert [p.name for _, p in index.unknown] == ["nobody_0.png"]
    with pytest.raises(FileNotFoundError, match="no outputs for model"):
        ds.find_predictions(medgen_tree["pngs"], models=["modelC"])


def test_single_jsonl_renamed(ds, medgen_tree, tmp_path):
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / "x_edit.jsonl").write_text(medgen_tree["jsonl"].read_text())
    assert ds.find_predictions(folder).models == ["x"]
    assert ds.find_predictions(folder, model="mine").models == ["mine"]


# --- protocol parity -------------------------------------------------------------------------


@pytest.mark.parametrize("line", [1, 2, 3, 6])
def test_parity_with_official_code(scores, ds, medgen_tree, line):
    by_id, index = scores
    sid = ds.sample_ids()[line - 1]
    out = index.files[MODEL][sid][0]
    ref_psnr, ref_ssim = official(out, ds.get(sid).target)
    rec = by_id[sid]
    assert rec.status == "ok", rec.error
    assert rec.metrics["psnr"] == pytest.approx(ref_psnr, abs=1e-9)
    assert rec.metrics["ssim"] == pytest.approx(ref_ssim, abs=1e-9)
    # The code's own float32 MSE agrees to its precision.
    assert rec.metrics["psnr"] == pytest.approx(
        official(out, ds.get(sid).target, float32=True)[0], abs=1e-4
    )
    assert rec.metrics["psnr_pass"] == (1.0 if ref_psnr >= 28 else 0.0)
    assert rec.metrics["ssim_pass"] == (1.0 if ref_ssim >= 0.7 else 0.0)
    assert rec.metrics["lpips"] is None and rec.metrics["embedding_similarity"] is None
    assert "needs a feature extractor" in rec.error
    assert rec.metrics["overall"] is None and "not judged" in rec.error


def test_identical_output_is_capped_at_100(scores, ds):
    rec = scores[0][ds.sample_ids()[0]]
    assert rec.metrics["psnr"] == 100.0 and rec.metrics["ssim"] == pytest.approx(1.0)
    assert rec.metrics["psnr_pass"] == 1.0 and rec.metrics["ssim_pass"] == 1.0
    assert any("PSNR reported as 100" in n for n in rec.notes)


def test_other_size_is_resized_with_lanczos_and_noted(scores, ds):
    rec = scores[0][ds.sample_ids()[1]]
    sample = ds.get(ds.sample_ids()[1])
    assert rec.notes == (
        f"format=ImageEditing task={sample.task} subtask={sample.metadata['subtask']}",
        "prediction resized from 84x72 to 56x48 (PIL LANCZOS), as the code does",
    )


def test_missing_and_unreadable_outputs(scores, ds):
    by_id, _ = scores
    missing = by_id[ds.sample_ids()[3]]
    assert missing.status == "missing" and set(missing.metrics.values()) == {None}
    lost = by_id[ds.sample_ids()[4]]
    assert lost.status == "error" and "lost_5.png: file not found" in lost.error


def test_corrupt_output_names_the_file(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    with pytest.raises(ImageReadError, match="bad.png: PIL could not decode it"):
        MedGenCodeProtocol().read_prediction(bad)


def test_declared_protocol():
    p = load_protocol("medgen@code")
    assert (p.name, p.version) == ("medgen", "code")
    assert load_protocol("medgen").version == "1"  # the bare name: the corrected protocol
    assert set(p.judged_metrics) < set(p.metric_names)
    assert p.aggregation.group_by == ("task",) and p.aggregation.missing == "skip"
    assert ("ssim_pass_rate", "ssim", 0.7) in p.aggregation.pass_rates
    assert "lpips" in p.aggregation.lower_is_better


def test_tiny_image_ssim_is_missing_not_zero(ds):
    s = ds.get(ds.sample_ids()[0])
    tiny = np.zeros((5, 5, 3), np.uint8)
    from medibench.datasets import SampleImages

    res = MedGenCodeProtocol().score(s, SampleImages(tiny, tiny.copy(), None), tiny)
    assert res.metrics["psnr"] == 100.0
    assert res.metrics["ssim"] is None and "win_size" in res.reasons["ssim"]
    assert not math.isnan(res.metrics["psnr_pass"])
