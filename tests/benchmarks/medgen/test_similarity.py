"""MedGEN-Bench's image-instruction similarity (medibench.benchmarks.medgen.similarity): cosines
against a direct transformers + numpy computation on the tests' tiny CLIP, the seeded
derangements pinned, the intervals against scipy, and the bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from scipy import stats

from medibench.benchmarks.medgen.similarity import (
    derangement,
    image_instruction_similarity,
    pair_similarities,
    similarity_rows,
)
from medibench.samples import Sample

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

INSTRUCTIONS = (
    "Remove the artifact from this CT slice of the liver.",
    "Enhance the contrast of the brain MRI around the ventricle.",
    "Predict the chest X-ray after the effusion resolves.",
    "Annotate the optic disc on this fundus photograph.",
)


@pytest.fixture(scope="module")
def tiny_clip():
    from tests.prompt_tuning.conftest import _tiny_backbone  # the prompt-tuning tests' CLIP

    return _tiny_backbone("clip")


def _samples(folder, n=4, missing=None):
    rng = np.random.default_rng(3)
    out = []
    for i in range(n):
        path = folder / f"img{i}.png"
        if i != missing:
            Image.fromarray(rng.integers(0, 256, (40, 36, 3), dtype=np.uint8)).save(path)
        out.append(
            Sample(
                sample_id=f"s{i}",
                benchmark="medgen",
                input=str(path),
                instruction=INSTRUCTIONS[i % len(INSTRUCTIONS)],
                task="edit" if i < 2 else "gen",
                perspective="modification",
                metadata={"format": "ImageEditing" if i < 2 else "MultimodalGeneration"},
            )
        )
    return out


def test_matched_and_shuffled_cosines_equal_transformers_and_numpy(tiny_clip, tmp_path):
    from medibench.analysis.features import load_extractor

    samples = _samples(tmp_path)
    result = image_instruction_similarity(
        samples, load_extractor(f"clip:{tiny_clip}"), shuffles=3, seed=5, n_resamples=0
    )
    # the reference: CLIPModel's own feature functions on its processor's and tokenizer's inputs
    model = transformers.CLIPModel.from_pretrained(tiny_clip).eval()
    processor = transformers.AutoImageProcessor.from_pretrained(tiny_clip)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_clip)
    images = [np.asarray(Image.open(s.input).convert("RGB")) for s in samples]
    with torch.no_grad():
        pixels = processor(images=images, return_tensors="pt")["pixel_values"]
        img = model.get_image_features(pixel_values=pixels)
        enc = tokenizer([s.instruction for s in samples], padding=True, return_tensors="pt")
        txt = model.get_text_features(**enc)
    img = getattr(img, "pooler_output", img).double().numpy()
    txt = getattr(txt, "pooler_output", txt).double().numpy()
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    cos = img @ txt.T  # cos[i, j]: image i with instruction j
    ids = [s.sample_id for s in samples]
    for i, row in enumerate(result["samples"]):
        partners = [ids.index(p) for p in row["partners"]]
        assert row["matched"] == pytest.approx(cos[i, i], abs=1e-6)
        assert row["shuffled"] == pytest.approx(np.mean(cos[i, partners]), abs=1e-6)
        assert i not in partners and len(partners) == 3
    overall = result["rows"][0]
    assert overall["field"] == "all" and overall["n"] == 4
    assert overall["matched"] == pytest.approx(np.mean(np.diag(cos)), abs=1e-6)
    assert [(r["field"], r["group"], r["n"]) for r in result["rows"][1:]] == [
        ("metadata.format", "ImageEditing", 2),
        ("metadata.format", "MultimodalGeneration", 2),
        ("task", "edit", 2),
        ("task", "gen", 2),
    ]


def test_derangements_have_no_fixed_point_and_are_seeded():
    assert derangement(5, np.random.default_rng(0)).tolist() == [2, 4, 3, 0, 1]
    for n in (2, 3, 7, 20):
        for seed in range(30):
            assert not np.any(derangement(n, np.random.default_rng(seed)) == np.arange(n))
    emb = np.random.default_rng(1).normal(size=(6, 4))
    _, _, partners = pair_similarities(emb, emb, shuffles=2, seed=7)
    assert partners.tolist() == [[5, 2, 0, 4, 1, 3], [5, 0, 4, 1, 3, 2]]
    again = pair_similarities(emb, emb, shuffles=2, seed=7)[2]
    assert np.array_equal(partners, again)
    blocks = [np.array([0, 2, 4]), np.array([1, 3, 5])]  # shuffled only within each block
    within = pair_similarities(emb, emb, shuffles=4, seed=7, blocks=blocks)[2]
    for block in blocks:
        assert set(within[:, block].ravel()) <= set(block.tolist())
    assert not np.any(within == np.arange(6))


def test_intervals_and_p_value_equal_scipy():
    rng = np.random.default_rng(11)
    matched = rng.normal(0.3, 0.05, 25)
    shuffled = matched - rng.normal(0.05, 0.04, 25)
    rows = similarity_rows(matched, shuffled, {}, n_resamples=500, level=0.9, seed=42)
    (row,) = rows

    def scipy_ci(values):
        res = stats.bootstrap(
            (values,), np.mean, n_resamples=500, confidence_level=0.9, method="percentile",
            rng=np.random.default_rng(42),
        )  # fmt: skip
        return res.confidence_interval.low, res.confidence_interval.high

    assert row.matched_ci == pytest.approx(scipy_ci(matched), abs=1e-12)
    assert row.shuffled_ci == pytest.approx(scipy_ci(shuffled), abs=1e-12)
    assert row.difference_ci == pytest.approx(scipy_ci(matched - shuffled), abs=1e-12)
    assert row.difference == pytest.approx(np.mean(matched - shuffled))
    assert row.pvalue == pytest.approx(stats.wilcoxon(matched, shuffled).pvalue)


def mean_colour(images):
    """An image-only extractor (``module:callable``): no text tower."""
    return np.stack([np.asarray(im, dtype=np.float64).mean(axis=(0, 1)) for im in images])


def test_bad_inputs_name_the_sample_the_group_or_the_extractor(tiny_clip, tmp_path):
    from medibench.analysis.features import load_extractor

    clip = load_extractor(f"clip:{tiny_clip}")
    samples = _samples(tmp_path, missing=2)
    with pytest.raises(ValueError, match=r"sample s2: its input image .*img2.png cannot be read"):
        image_instruction_similarity(samples, clip, n_resamples=0)
    (tmp_path / "ok").mkdir()
    ok = _samples(tmp_path / "ok", n=3)
    with pytest.raises(ValueError, match=r"--within task: group 'gen' has one sample \(s2\)"):
        image_instruction_similarity(ok, clip, within="task", n_resamples=0)
    colour = load_extractor(f"{__name__}:mean_colour")
    with pytest.raises(ValueError, match=f"{__name__}:mean_colour' has no text tower"):
        image_instruction_similarity(ok, colour, n_resamples=0)
    with pytest.raises(ValueError, match="at least 2 samples, got 1"):
        image_instruction_similarity(ok[:1], clip, n_resamples=0)


def test_the_command_refuses_an_extractor_without_a_text_tower(tmp_path):
    from typer.testing import CliRunner

    from medibench.cli import app
    from tests.docs.standins.medgen import build_data

    build_data(tmp_path / "MedGEN_data")
    args = ["medgen", "similarity", "--dataset", f"medgen:{tmp_path}/MedGEN_data/gen.jsonl",
            "--features", f"{__name__}:mean_colour"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "has no text tower" in " ".join(result.output.split())


def test_a_group_of_one_sample_has_no_interval():
    matched = np.array([0.31, 0.28, 0.35])
    shuffled = np.array([0.25, 0.27, 0.30])
    groups = {"task": ["edit", "edit", "gen"]}
    rows = similarity_rows(matched, shuffled, groups, n_resamples=200, seed=1)
    alone = next(r for r in rows if r.group == "gen")
    assert alone.n == 1 and alone.matched == pytest.approx(0.35)
    assert alone.matched_ci == alone.shuffled_ci == alone.difference_ci == (None, None)
    assert alone.pvalue is None
    pair = next(r for r in rows if r.group == "edit")
    low, high = pair.matched_ci
    assert low is not None and high is not None and low < high


def test_the_command_shows_n_1_and_writes_no_zero_width_interval(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from medibench.cli import app

    result = {
        "rows": [
            similarity_rows(np.array([0.4, 0.2]), np.array([0.1, 0.3]), {"task": ["a", "b"]},
                            n_resamples=100, seed=0)[i].__dict__ for i in range(3)
        ]
    }  # fmt: skip
    monkeypatch.setattr(
        "medibench.benchmarks.medgen.similarity.image_instruction_similarity",
        lambda *a, **k: result,
    )
    monkeypatch.setattr("medibench.datasets.load_dataset", lambda *a, **k: [object()])
    monkeypatch.setattr("medibench.analysis.features.load_extractor", lambda *a, **k: object())
    csv_out = tmp_path / "rows.csv"
    args = ["medgen", "similarity", "--dataset", "native:x", "--features", "clip:x"]
    res = CliRunner().invoke(app, [*args, "--csv", str(csv_out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert res.output.count("n=1") == 6  # matched, shuffled, difference of groups a and b
    lines = csv_out.read_text().splitlines()
    head = lines[0].split(",")
    row_a = dict(zip(head, lines[2].split(","), strict=True))
    assert row_a["group"] == "a" and row_a["matched_ci_low"] == row_a["matched_ci_high"] == ""
