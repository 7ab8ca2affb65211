"""PaintBench: the adapter, the output layout and ``paintbench@1`` against PaintBench's eval.py.

The reference below is eval.py's computation written out in numpy: PIL RGB decoding, the
NEAREST cover resize and centre crop, its float32 sRGB -> XYZ (D65) -> Lab conversion, and the
per-threshold counts for t = 0..10.
"""

import math

import numpy as np
import pytest
from PIL import Image

from medibench.benchmarks.paintbench.dataset import detect, read_paintbench
from medibench.benchmarks.paintbench.protocols import PaintBenchProtocol
from medibench.datasets import DatasetError, SampleImages, load_dataset
from medibench.protocols import load_protocol
from medibench.runs import score_predictions
from medibench.samples import Perspective


def lab32(img):
    rgb = img.astype(np.float32) / 255.0
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    m = np.array(
        [
            [0.4124564, 0.3575761, 0.1804375],
            [0.2126729, 0.7151522, 0.0721750],
            [0.0193339, 0.1191920, 0.9503041],
        ],
        dtype=np.float32,
    )
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883], dtype=np.float32)
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), (29 / 6) ** 2 / 3 * xyz + 4 / 29)
    return np.stack(
        [116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], -1
    ).astype(np.float32)


def official(input_path, answer_path, output_path):
    """Mean IoU, edit accuracy and preservation accuracy of one problem, as eval.py."""
    a_img = Image.open(answer_path).convert("RGB")
    i, a = np.array(Image.open(input_path).convert("RGB")), np.array(a_img)
    out = Image.open(output_path).convert("RGB")
    if out.size != a_img.size:
        (wa, ha), (wo, ho) = a_img.size, out.size
        s = max(wa / wo, ha / ho)
        nw, nh = math.ceil(wo * s), math.ceil(ho * s)
        out = out.resize((nw, nh), Image.NEAREST)
        x, y = (nw - wa) // 2, (nh - ha) // 2
        out = out.crop((x, y, x + wa, y + ha))
    o = np.array(out)
    changed = np.any(i != a, axis=-1)
    de = np.sqrt(((lab32(o) - lab32(a)) ** 2).sum(axis=-1))
    n_edit, n_pres = int(changed.sum()), int((~changed).sum())
    ious, eds, prs = [], [], []
    for t in range(11):
        ok = de <= t
        ec, pc = int((changed & ok).sum()), int((~changed & ok).sum())
        denom = n_edit + n_pres - pc
        ious.append(ec / denom if denom else 1.0)
        eds.append(ec / n_edit if n_edit else 1.0)
        prs.append(pc / n_pres if n_pres else 1.0)
    return sum(ious) / 11, sum(eds) / 11, sum(prs) / 11


@pytest.fixture(scope="module")
def ds(paint_tree):
    return read_paintbench(paint_tree["bench"])


@pytest.fixture(scope="module")
def scored(ds, paint_tree):
    index = ds.find_predictions(paint_tree["outputs"])
    records = score_predictions(ds, index, [PaintBenchProtocol()], k=1, progress=False)
    return {r.sample_id: r for r in records}, index


# --- adapter ---------------------------------------------------------------------------------


def test_samples(ds, paint_tree):
    # preservation-000 was left out before issue 10 item 7 (the diagnostic task is now scored).
    assert ds.sample_ids() == [
        "counting-000",
        "preservation-000",
        "recolor-000",
        "recolor-001",
        "removal-000",
        "translation-000",
        "translation-001",
        "translation-002",
    ]
    s = ds.get("recolor-000")
    assert s.task == "recolor" and s.perspective == Perspective.modification
    assert s.instruction == "Do the recolor edit." and s.mask is None
    assert s.input.endswith("recolor/000_input.png") and s.target.endswith("000_answer.png")
    assert s.metadata["category"] == "color_change" and s.metadata["problem_id"] == 0
    assert s.metadata["visual_condition"] == "baseline" and s.metadata["bg_color"] == [10, 20, 30]
    t2 = ds.get("translation-002")
    assert t2.instruction == "Move the block."
    assert t2.metadata["category"] == "geometric_transformation"  # from PaintBench's table
    assert ds.get("translation-001").metadata["category"] == "astrology"
    assert ds.name == "PaintBench" and ds.default_protocols == ("paintbench@1",)


def test_problems_reported(ds):
    text = "\n".join(ds.problems)
    assert len(ds.problems) == 5, text  # 6 before issue 10 item 7: preservation was skipped
    assert "problem 002 has no 002_answer.png; skipped" in text
    assert "removal/001.json: not valid JSON" in text
    assert (
        "removal/002.json: expected a JSON object, got list; problem 'removal-002' skipped" in text
    )
    assert "unknown category 'astrology'" in text and "problem 'translation-001' kept" in text
    assert "task 'mystery' has no category" in text
    assert "preservation" not in text


def test_diagnostic_kept_on_request_and_benchmarks_root(paint_tree):
    ds = read_paintbench(paint_tree["bench"].parent, include_diagnostic=True)
    assert ds.root == paint_tree["bench"].resolve()
    assert ds.get("preservation-000").metadata["category"] == "diagnostic"
    skipped = read_paintbench(paint_tree["bench"], include_diagnostic=False)
    assert "preservation-000" not in skipped
    assert "diagnostic 'preservation' task was left out" in "\n".join(skipped.problems)
    assert (
        load_dataset(f"paintbench:{paint_tree['bench']}").sample_ids()
        == read_paintbench(paint_tree["bench"]).sample_ids()
    )


def test_not_a_paintbench_folder(tmp_path):
    assert not detect(tmp_path)
    with pytest.raises(DatasetError, match="not a PaintBench folder"):
        read_paintbench(tmp_path)
    with pytest.raises(DatasetError, match="does not exist"):
        read_paintbench(tmp_path / "nope")


def test_wrong_field_type_is_reported(tmp_path):
    folder = tmp_path / "recolor"
    folder.mkdir()
    img = np.zeros((8, 8, 3), np.uint8)
    Image.fromarray(img).save(folder / "000_input.png")
    Image.fromarray(img).save(folder / "000_answer.png")
    (folder / "000.json").write_text('{"instruction": ["not", "text"]}')
    ds = read_paintbench(tmp_path)
    assert len(ds) == 0 and "field(s) instruction must be strings" in ds.problems[0]


# --- output layout ---------------------------------------------------------------------------


def test_official_output_layout(scored, paint_tree):
    _, index = scored
    assert index.models == ["modelA"]  # modelB has no PaintBench folder, as eval.py skips it
    files = index.files["modelA"]
    assert sorted(files) == [
        "counting-000",
        "recolor-000",
        "recolor-001",
        "removal-000",
        "translation-000",
        "translation-001",
    ]
    assert files["recolor-000"] == {
        0: paint_tree["outputs"] / "modelA/PaintBench/recolor/0000_output.png"
    }
    assert sorted(p.name for _, p in index.unknown) == [
        "0000_output.png",
        "001_output.png",
        "0099_output.png",
    ]


def test_layout_variants(ds, paint_tree):
    one_model = ds.find_predictions(paint_tree["outputs"] / "modelA")
    assert one_model.models == ["modelA"] and len(one_model.files["modelA"]) == 6
    bench_dir = ds.find_predictions(paint_tree["outputs"] / "modelA" / "PaintBench")
    assert bench_dir.models == ["modelA"]
    assert ds.find_predictions(paint_tree["outputs"] / "modelA", model="x").models == ["x"]
    with pytest.raises(FileNotFoundError, match="no 'PaintBench' outputs for model"):
        ds.find_predictions(paint_tree["outputs"], models=["modelB"])


# --- protocol parity -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sid", ["recolor-000", "recolor-001", "removal-000", "translation-000", "translation-001"]
)
def test_parity_with_official_eval(scored, ds, sid):
    by_id, index = scored
    rec = by_id[sid]
    assert rec.status == "ok", rec.error
    s = ds.get(sid)
    iou, edit_acc, pres_acc = official(s.input, s.target, index.files["modelA"][sid][0])
    assert rec.metrics["iou"] == pytest.approx(iou, abs=1e-6)
    assert rec.metrics["edit_accuracy"] == pytest.approx(edit_acc, abs=1e-6)
    assert rec.metrics["preservation_accuracy"] == pytest.approx(pres_acc, abs=1e-6)


def test_known_values(scored):
    by_id, _ = scored
    # The per-threshold cie76_<t> values are new (issue 10 item 7); the three means unchanged.
    main = {
        k: by_id["recolor-000"].metrics[k]
        for k in ("iou", "edit_accuracy", "preservation_accuracy")
    }
    assert main == {
        "iou": 1.0,
        "edit_accuracy": 1.0,
        "preservation_accuracy": 1.0,
    }
    assert [by_id["recolor-000"].metrics[f"cie76_{t}"] for t in range(11)] == [1.0] * 11
    unchanged = by_id["recolor-001"].metrics
    assert unchanged["iou"] == 0.0 and unchanged["preservation_accuracy"] == 1.0
    assert 0 < by_id["removal-000"].metrics["iou"] < 1


def test_other_size_is_cover_resized_and_noted(scored):
    rec = scored[0]["translation-000"]
    assert rec.notes == (
        "output resized from 128x96 to cover 64x48 (nearest) and centre-cropped, "
        "as PaintBench does",
    )
    assert rec.metrics["iou"] == 1.0


def test_parity_non_integer_resize(scored, ds):
    by_id, index = scored
    s = ds.get("counting-000")
    iou, edit_acc, pres_acc = official(s.input, s.target, index.files["modelA"]["counting-000"][0])
    assert by_id["counting-000"].metrics["iou"] == pytest.approx(iou, abs=1e-6)
    assert by_id["counting-000"].metrics["edit_accuracy"] == pytest.approx(edit_acc, abs=1e-6)


def test_missing_output_and_declared_aggregation(scored):
    rec = scored[0]["translation-002"]
    assert rec.status == "missing" and set(rec.metrics.values()) == {None}
    p = load_protocol("paintbench")
    assert (p.name, p.version) == ("paintbench", "1")
    assert p.aggregation.missing == "zero"
    assert p.aggregation.macro_over == ("metadata.category", "task")
    assert p.aggregation.group_by == (
        "metadata.category", "task", "metadata.task_mode", "metadata.visual_condition")  # fmt: skip
    assert p.aggregation.macro_within == (("metadata.visual_condition", ("task",)),)


def test_bad_images(ds, tmp_path):
    s = ds.get("recolor-000")
    p = PaintBenchProtocol()
    img = np.zeros((4, 4, 3), np.uint8)
    res = p.score(s, SampleImages(img, np.zeros((4, 5, 3), np.uint8), None), img)
    assert res.metrics["iou"] is None and "differ in size" in res.reasons["iou"]
    res = p.score(s, SampleImages(img, None, None), img)
    assert res.reasons["edit_accuracy"] == "the problem has no answer image"
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not a png")
    with pytest.raises(ValueError, match="bad.png"):
        p.read_prediction(bad)


def _problems(root, metas):
    """``root/recolor/NNN`` problems (8x8 black input, a red answer) with these JSON objects."""
    import json

    folder = root / "recolor"
    folder.mkdir(parents=True)
    for i, meta in enumerate(metas):
        img = np.zeros((8, 8, 3), np.uint8)
        Image.fromarray(img).save(folder / f"{i:03d}_input.png")
        img[2:5, 2:5] = (255, 0, 0)
        Image.fromarray(img).save(folder / f"{i:03d}_answer.png")
        (folder / f"{i:03d}.json").write_text(json.dumps(meta))


def test_a_null_mode_is_the_generators_default(tmp_path):
    """Older generate_benchmark.py versions wrote a single-mode task's mode as null; newer ones
    write "default" (its ``_NO_MODE_LABEL``) for the same problems."""
    meta = {"instruction": "Recolour the square red.", "category": "color_change"}
    _problems(tmp_path / "old", [{**meta, "mode": None}, {**meta, "mode": None}])
    _problems(tmp_path / "new", [{**meta, "mode": "default"}, {**meta, "mode": "default"}])
    old, new = read_paintbench(tmp_path / "old"), read_paintbench(tmp_path / "new")
    assert old.problems == [] and len(old) == 2
    assert [s.metadata for s in old] == [s.metadata for s in new]
    assert {s.metadata["mode"] for s in old} == {"default"}
    assert all("task_mode" not in s.metadata for s in old)  # one mode: no mode rows


def test_a_dataset_whose_problems_were_all_skipped_says_why(tmp_path):
    from typer.testing import CliRunner

    from medibench.cli import app

    _problems(tmp_path / "bench", [{"instruction": ["not", "text"]}])
    (tmp_path / "preds").mkdir()
    res = CliRunner().invoke(app, ["score", "--dataset", f"paintbench:{tmp_path / 'bench'}",
                                   "--predictions", str(tmp_path / "preds"), "--out",
                                   str(tmp_path / "r.jsonl")])  # fmt: skip
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "has no samples" in said
    assert "(1 skipped:" in said and "field(s) instruction must be strings" in said
