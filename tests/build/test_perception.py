"""Perception triplets: the MieDB blend, seeded colours, templates, and every filter counted."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.build._items import Slice
from medibench.build._perception import perception
from medibench.build._records import BuildContext
from medibench.build._source import ItemSpec, SourceSpec, SplitRule
from medibench.build._templates import PERCEPTION
from medibench.metrics import overlay_to_mask


def _source(names, **kw):
    return SourceSpec(
        path=None, name="t", modality="MRI", licence="x", split=SplitRule("item", 0.2),
        items=(ItemSpec("it", image=__file__),), labels=dict(enumerate(names, start=1)), **kw,
    )  # fmt: skip


def _slice(image, structures, key="it-s000"):
    rgb = np.repeat(image[:, :, None], 3, axis=2) if image.ndim == 2 else image
    gray = image.ndim == 2
    return Slice(key, ItemSpec("it", image=__file__), 0, rgb, gray, structures, image.shape[:2], 64)


def _square(y, x, n, shape=(64, 64)):
    m = np.zeros(shape, bool)
    m[y : y + n, x : x + n] = True
    return m


def test_targets_are_the_miedb_blend_and_the_mask_comes_back_exactly():
    image = np.random.default_rng(0).integers(0, 256, (64, 64), dtype=np.uint8)
    a, b = _square(4, 4, 20), _square(30, 30, 16)
    out = perception(_source(["a", "b"]), _slice(image, {"a": a, "b": b}), BuildContext(0))
    singles = [t for t in out.triplets if t.task != "segment-multiclass"]
    assert [t.task for t in out.triplets] == ["segment-a", "segment-b", "segment-multiclass"]
    for t, mask in zip(singles, (a, b), strict=True):
        (colour,) = t.overlay_color
        rgb = np.repeat(image[:, :, None].astype(np.float64), 3, axis=2)
        expected = rgb.copy()
        expected[mask] = 0.4 * rgb[mask] + 0.6 * np.array({"red": (255, 0, 0), "green":
                         (0, 255, 0), "blue": (0, 0, 255)}[colour])  # fmt: skip
        np.testing.assert_array_equal(t.target, np.rint(expected).astype(np.uint8))
        np.testing.assert_array_equal(t.mask, mask)
        np.testing.assert_array_equal(overlay_to_mask(t.target, image, colour), mask)
        assert t.metadata["alpha"] == 0.6
        assert t.description.startswith(f"Blend pure {colour} at alpha 0.6 over the {t.name}")
        assert colour in t.instruction and t.name in t.instruction.replace(" ", "-")
        assert len(t.paraphrases) == len(PERCEPTION) - 1 and t.instruction not in t.paraphrases
    multi = out.triplets[-1]
    assert len(set(multi.overlay_color)) == 2 and multi.metadata["structures"] == ["a", "b"]
    np.testing.assert_array_equal(overlay_to_mask(multi.target, image, list(multi.overlay_color)),
                                  a | b)  # fmt: skip


def test_colours_are_seeded_by_the_sample_identity_and_the_build_seed():
    image = np.full((64, 64), 90, np.uint8)
    sl = {"a": _square(0, 0, 20)}
    draws = [perception(_source(["a"]), _slice(image, sl, key=f"k{i}"), BuildContext(s))
             for i in range(12) for s in (0, 0)]  # fmt: skip
    colours = [d.triplets[0].overlay_color for d in draws]
    assert colours[0::2] == colours[1::2]  # same identity and seed, same draw
    assert len(set(colours)) == 3  # all three colours occur over twelve identities
    other = [perception(_source(["a"]), _slice(image, sl, key=f"k{i}"), BuildContext(5))
             for i in range(12)]  # fmt: skip
    assert [o.triplets[0].instruction for o in other] != [d.triplets[0].instruction
                                                         for d in draws[0::2]]  # fmt: skip


def test_too_small_and_too_large_are_counted():
    image = np.full((64, 64), 100, np.uint8)
    tiny = _square(0, 0, 2)  # 4 / 4096 < 0.01
    huge = np.ones((64, 64), bool)
    huge[0, 0] = False  # 0.9998 > 0.9
    ok = _square(10, 10, 20)
    out = perception(
        _source(["tiny", "huge", "ok"]),
        _slice(image, {"tiny": tiny, "huge": huge, "ok": ok}),
        BuildContext(0),
    )
    assert dict(out.filters) == {"too_small": 1, "too_large": 1}
    assert [t.task for t in out.triplets] == ["segment-ok"]


def test_duplicates_within_an_item_are_counted():
    image = np.full((64, 64), 100, np.uint8)
    ctx = BuildContext(0)
    mask = {"a": _square(10, 10, 20)}
    first = perception(_source(["a"]), _slice(image, mask, key="it-s000"), ctx)
    again = perception(_source(["a"]), _slice(image, mask, key="it-s001"), ctx)
    assert len(first.triplets) == 1 and not again.triplets
    assert dict(again.filters) == {"duplicate": 1}


def test_an_overlay_the_image_already_has_is_ill_conditioned():
    # the structure is pure red, green and blue stripes: whichever colour is drawn, a third of
    # its pixels already have it (|O - A| = 0 < 10)
    image = np.zeros((64, 64, 3), np.uint8)
    for c in range(3):
        image[:, c::3, c] = 255
    sl = Slice("it-s000", ItemSpec("it", image=__file__), 0, image, False,
               {"a": _square(10, 10, 30)}, (64, 64), 64)  # fmt: skip
    out = perception(_source(["a"]), sl, BuildContext(0))
    assert not out.triplets and dict(out.filters) == {"overlay_ill_conditioned": 1}
    gray = _slice(np.full((64, 64), 120, np.uint8), {"a": _square(10, 10, 30)})
    assert len(perception(_source(["a"]), gray, BuildContext(0)).triplets) == 1


def test_the_report_audits_rgb_sources_from_the_files(tmp_path):
    import json

    import cv2

    from medibench.build import build, write_report
    from medibench.io import read_image, read_mask, write_image
    from medibench.metrics import dice
    from medibench.synth._sources import retina_image

    fundus = cv2.resize(retina_image(), (256, 256), interpolation=cv2.INTER_AREA)
    yy, xx = np.mgrid[:256, :256]
    for i, (cy, cx) in enumerate([(128, 90), (100, 150), (160, 170)]):
        label = (((yy - cy) ** 2 + (xx - cx) ** 2) < 30**2).astype(np.uint8)
        write_image(tmp_path / f"f{i}.png", fundus)
        write_image(tmp_path / f"l{i}.png", label)
    items = "".join(f"  - {{image: f{i}.png, label: l{i}.png, patient: p{i}}}\n" for i in range(3))
    (tmp_path / "SOURCE.yaml").write_text(
        "name: fundus\nmodality: fundus\nlicence: CC0\nitems:\n" + items
        + "labels: {1: disc}\nbins: [256]\nsplit: {by: patient, test: 0.3}\n")  # fmt: skip
    build("perception", tmp_path / "SOURCE.yaml", tmp_path / "out", exports=())
    quality = json.loads((write_report(tmp_path / "out") / "quality.json").read_text())
    rows = [json.loads(x) for x in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    expected = []
    for s in rows:
        image = read_image(tmp_path / "out" / s["input"])
        got = overlay_to_mask(read_image(tmp_path / "out" / s["target"]), image, s["overlay_color"])
        expected.append(dice(got, read_mask(tmp_path / "out" / s["mask"])))
    d = quality["overlay_dice"]
    assert d["n_rgb"] == len(rows) == 3 and d["n_grayscale"] == 0 and d["grayscale_mean"] is None
    assert d["rgb_mean"] == pytest.approx(np.mean(expected)) and d["rgb_mean"] > 0.99
