"""The MedEBench adapter: metadata -> Samples, problems, prediction layout, bad input."""

import json
import shutil

import pytest

from medibench.benchmarks.medebench.dataset import (
    MedEBenchDataset,
    detect,
    infer_modality,
    normalize_region,
    read_medebench,
    rephrasing_looks_truncated,
    task_perspective,
)
from medibench.datasets import DatasetError, load_dataset
from medibench.protocols import load_protocol
from medibench.runs import score_predictions
from medibench.samples import Perspective

from .conftest import _record, write_metadata


@pytest.fixture(scope="module")
def ds(medebench_root):
    return read_medebench(medebench_root)


def test_reads_every_sample_with_absolute_paths_and_fields(ds, medebench_root):
    assert isinstance(ds, MedEBenchDataset)
    assert ds.sample_ids() == ["1", "2", "3", "4", "5"]
    s = ds.get("1")
    root = medebench_root.resolve()
    assert s.benchmark == "medebench"
    assert s.input == str(root / "editing/previous/1.png")
    assert s.target == str(root / "editing/changed/1.png")
    assert s.mask == str(root / "editing/previous_mask/1.png")
    assert s.instruction == "Remove the wisdom teeth, keeping the rest of the image unchanged."
    assert s.paraphrases == (
        "Take out the wisdom teeth while leaving the rest of the image as it is",
    )
    assert s.description.startswith("The image modality is a panoramic dental X-ray")
    assert (s.region, s.task, s.modality) == ("Teeth", "Remove wisdom teeth.", "X-ray")
    assert s.perspective == Perspective.modification
    assert s.source == {
        "dataset": "MedEBench",
        "licence": "CC BY-NC 4.0",
        "url": "https://example.org/1.jpg",
    }
    assert s.metadata["id"] == 1 and s.metadata["organ"] == "Teeth"
    assert s.metadata["rephrased_truncated"] is False
    assert ds.default_protocols == ("medebench@paper", "medebench@1")
    assert ds.expected_k == 1


def test_region_is_normalised_and_the_original_kept(ds):
    s = ds.get("3")
    assert s.region == "GI Tract"
    assert s.metadata["organ"] == "Gastrointestinal Tract"
    assert [ds.get(i).modality for i in "2345"] == ["fundus", "photo", "photo", "X-ray"]


def test_rephrasing_flags(ds):
    # Truncated by the official script's 30-token budget: kept as a paraphrase, flagged.
    assert ds.get("3").paraphrases == ("Get rid of the mole on the",)
    assert ds.get("3").metadata["rephrased_truncated"] is True
    assert ds.get("5").metadata["rephrased_truncated"] is True  # "Conduct lipos"
    # The script's fallback copies the prompt: not a paraphrase.
    s2 = ds.get("2")
    assert s2.paraphrases == () and s2.metadata["rephrased_is_prompt"] is True
    assert s2.metadata["rephrased_truncated"] is False


def test_sample_without_mask_file_is_kept_and_reported(ds):
    s = ds.get("4")
    assert s.mask is None and s.target is not None
    assert ds.problems == [
        f"{ds.root / 'editing/editing_metadata.json'} samples[3] (id 4): mask "
        "'editing/previous_mask/4.png' not found; left out (scored where it can be)"
    ]


def test_editing_folder_registry_and_detect(medebench_root):
    via_editing = read_medebench(medebench_root / "editing")
    assert via_editing.root == medebench_root.resolve()
    assert via_editing.sample_ids() == ["1", "2", "3", "4", "5"]
    via_registry = load_dataset(f"medebench:{medebench_root}")
    assert isinstance(via_registry, MedEBenchDataset) and len(via_registry) == 5
    assert detect(medebench_root) and detect(medebench_root / "editing")
    assert not detect(medebench_root / "generated_images")


def test_find_predictions_official_layout(ds, medebench_root):
    index = ds.find_predictions(medebench_root / "generated_images")
    assert index.models == ["modelA", "modelB"]
    files = index.files["modelA"]
    assert sorted(files) == ["1", "2", "3", "4", "5"]
    assert files["1"][0].name == "1_0.png" and sorted(files["1"]) == [0, 1]
    assert sorted(index.files["modelB"]) == ["1", "2"]
    assert [(m, p.name) for m, p in index.unknown] == [("modelA", "999_0.png")]
    # the repository root finds generated_images/ itself; --model picks folders
    assert ds.find_predictions(medebench_root).files == index.files
    only_b = ds.find_predictions(medebench_root / "generated_images", models=["modelB"])
    assert only_b.models == ["modelB"]


def test_only_the_first_output_is_scored(ds, medebench_root):
    # The scorer takes k = 0 .. expected_k - 1: 1_1.png is indexed but not scored.
    index = ds.find_predictions(medebench_root / "generated_images")
    records = score_predictions(
        ds, index, [load_protocol("medebench@paper")], k=ds.expected_k, progress=False
    )
    assert {r.k for r in records} == {0}
    by_key = {(r.model, r.sample_id): r for r in records}
    assert len(records) == 10  # 5 samples x 2 models
    assert by_key["modelB", "3"].status == "missing"
    assert by_key["modelA", "1"].status == "ok" and by_key["modelA", "1"].metrics["cp"] > 0


# --- bad input -------------------------------------------------------------------------------


@pytest.fixture
def copy_root(medebench_root, tmp_path):
    root = tmp_path / "MedEBench"
    shutil.copytree(medebench_root / "editing", root / "editing")
    return root


def _base_records(root):
    return json.loads((root / "editing/editing_metadata.json").read_text())["samples"]


@pytest.mark.parametrize(
    "content, got",
    [
        ([{"id": 1}], "got list"),
        ({"items": []}, "got an object without it"),
        ({"samples": {"1": {}}}, "got an object without it"),
    ],
)
def test_metadata_not_an_object_with_a_samples_list(copy_root, content, got):
    path = write_metadata(copy_root, content)
    with pytest.raises(DatasetError) as err:
        read_medebench(copy_root)
    assert str(err.value) == (
        f'{path.resolve()}: expected an object {{"samples": [...]}} with a list of samples, {got}'
    )


def test_metadata_not_json_and_missing_folder(copy_root, tmp_path):
    path = write_metadata(copy_root, '{"samples": [')
    with pytest.raises(DatasetError, match=r"editing_metadata\.json: not valid JSON"):
        read_medebench(copy_root)
    assert str(path.resolve()) in str(pytest.raises(DatasetError, read_medebench, copy_root).value)
    with pytest.raises(DatasetError, match="has no editing/editing_metadata.json"):
        read_medebench(tmp_path)
    with pytest.raises(DatasetError, match="does not exist"):
        read_medebench(tmp_path / "nope")
    with pytest.raises(DatasetError, match="needs its folder"):
        read_medebench("")


def test_bad_samples_are_skipped_and_reported(copy_root):
    good = _base_records(copy_root)
    no_task = {k: v for k, v in good[0].items() if k != "Task"}
    no_input = dict(good[1], previous_image="editing/previous/404.png")
    escaping = dict(good[2], previous_mask="../../etc/passwd")
    absolute = dict(good[4], changed_image="/etc/passwd")
    unknown_organ = dict(good[3], Organ="Kidney")
    bad_id = dict(good[3], id=[4])
    duplicate = dict(good[3])
    not_a_dict = "sample"
    path = write_metadata(
        copy_root,
        {
            "samples": [
                no_task,
                no_input,
                escaping,
                unknown_organ,
                absolute,
                bad_id,
                duplicate,
                not_a_dict,
            ]
        },
    )
    ds = read_medebench(copy_root)
    assert ds.sample_ids() == ["4"]  # the unknown organ is kept as given
    assert ds.get("4").region == "Kidney"
    meta = str(path.resolve())
    root = copy_root.resolve()
    assert ds.problems == [
        f"{meta} samples[0] (id 1): missing required field(s) Task; skipped",
        f"{meta} samples[1] (id 2): input image 'editing/previous/404.png' not found; skipped",
        f"{meta} samples[2] (id 3), field 'previous_mask': path '../../etc/passwd' escapes the "
        f"dataset folder {root} (via '..'); sample refused",
        f"{meta} samples[3] (id 4): mask 'editing/previous_mask/4.png' not found; left out "
        "(scored where it can be)",
        f"{meta} samples[3] (id 4): unknown Organ 'Kidney' (not one of the 13 regions); kept as is",
        f"{meta} samples[4] (id 5), field 'changed_image': path '/etc/passwd' is absolute; image "
        f"paths must be relative to the dataset folder {root}; sample refused",
        f"{meta} samples[5]: field(s) id (not an integer or string) of the wrong type; skipped",
        f"{meta} samples[6] (id 4): mask 'editing/previous_mask/4.png' not found; left out "
        "(scored where it can be)",
        f"{meta} samples[6]: duplicate id '4' (first at samples[3]); skipped",
        f"{meta} samples[7]: not an object (str); skipped",
    ]


def test_missing_ground_truth_and_mask_field_keep_the_sample(copy_root):
    rec = _record(1, "Teeth", "Remove wisdom teeth.", "Remove them.", "Take them out", "X-ray.")
    rec["changed_image"] = "editing/changed/77.png"
    del rec["previous_mask"]
    write_metadata(copy_root, {"samples": [rec]})
    ds = read_medebench(copy_root)
    s = ds.get("1")
    assert s.target is None and s.mask is None
    assert ds.problems[0].endswith(
        "(id 1): ground-truth image 'editing/changed/77.png' not found; left out (scored where it "
        "can be)"
    )
    assert ds.problems[1].endswith(
        "(id 1): no previous_mask; mask left out (scored where it can be)"
    )


# --- the documented heuristics ------------------------------------------------------------------


@pytest.mark.parametrize(
    "organ, region",
    [
        ("Teeth", "Teeth"),
        ("teeth ", "Teeth"),
        ("Eye", "Eyes"),
        ("GI Tract", "GI Tract"),
        ("Gastrointestinal Tract", "GI Tract"),
        ("Spine & Bones", "Spine"),
        ("Bones", "Spine"),
        ("Foot", "Feet"),
        ("Ear", "Ears"),
        ("Kidney", None),
    ],
)
def test_normalize_region(organ, region):
    assert normalize_region(organ) == region


@pytest.mark.parametrize(
    "rephrased, prompt, flagged",
    [
        ("Conduct a", "Simulate hair transplant to make the hair thicker.", True),
        ("Renew the", "Reconstruct the nose skin to make it clean.", True),
        ("Model", "Simulate hair transplant to make the hair thicker.", True),
        ("Adjust the nose to", "Reconstruct nose to make the nose look normal.", True),
        ("Undertake lip", "Perform liposuction to remove excess fat.", True),
        ("Place a tooth where one is absent", "Add a tooth in the missing area.", False),
        ("Fix the cavities", "Repair the cavities.", False),
        ("Erase the black", "Remove the black dental stains.", False),  # a documented miss
    ],
)
def test_rephrasing_truncation_heuristic(rephrased, prompt, flagged):
    assert rephrasing_looks_truncated(rephrased, prompt) is flagged


@pytest.mark.parametrize(
    "task, perspective",
    [
        ("Remove moles, nevi, or black marks.", Perspective.modification),
        ("Remove dark circles under the eyes.", Perspective.modification),
        ("Implant or add missing teeth.", Perspective.modification),
        ("Highlight the lesion.", Perspective.perception),
        ("Segment the tumour.", Perspective.perception),
        ("Enhance image contrast.", Perspective.transformation),
        ("Denoise the scan.", Perspective.transformation),
    ],
)
def test_task_perspective(task, perspective):
    assert task_perspective(task)[0] == perspective


def test_infer_modality():
    assert infer_modality("The image modality is a panoramic dental X-ray; ...") == "X-ray"
    assert infer_modality("In the dental diagram image, the tooth was removed.") == "illustration"
    assert infer_modality("Dental intraoral photography was used to fill the cavities.") == "photo"
    assert infer_modality("An axial CT slice.") == "CT"
    assert infer_modality("The teeth were cleaned.") == ""
    assert infer_modality(None) == ""
