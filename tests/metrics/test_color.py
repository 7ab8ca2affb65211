"""CIE Lab, DeltaE76 and PaintBench's IoU: references, hand-computed cases, resizing, errors."""

from __future__ import annotations

import numpy as np
import pytest
from skimage.color import rgb2lab

from medibench.metrics import delta_e76, paint_iou, resize_cover, rgb_to_lab


def _all_levels() -> np.ndarray:
    """Every (R, G) pair with a few B levels, as an (N, 1, 3) image."""
    r, g, b = np.meshgrid(np.arange(256), np.arange(256), [0, 1, 10, 128, 254, 255], indexing="ij")
    return np.stack([r, g, b], -1).reshape(-1, 1, 3).astype(np.uint8)


def test_lab_matches_skimage():
    img = _all_levels()
    np.testing.assert_allclose(rgb_to_lab(img, constants="skimage"), rgb2lab(img), atol=1e-9)
    # PaintBench's constants (7-digit matrix, exact CIE epsilon) differ by < 0.005.
    np.testing.assert_allclose(rgb_to_lab(img), rgb2lab(img), atol=5e-3)


def test_hand_computed_lab_and_delta_e():
    black = np.zeros((1, 1, 3), np.uint8)
    white = np.full((1, 1, 3), 255, np.uint8)
    red = np.array([[[255, 0, 0]]], np.uint8)
    assert delta_e76(black, white)[0, 0] == pytest.approx(100.0, abs=1e-3)
    np.testing.assert_allclose(rgb_to_lab(white)[0, 0], [100, 0, 0], atol=1e-3)
    # Textbook sRGB red: L* 53.24, a* 80.09, b* 67.20.
    np.testing.assert_allclose(rgb_to_lab(red)[0, 0], [53.24, 80.09, 67.20], atol=0.01)
    de = delta_e76(red, black)[0, 0]
    assert de == pytest.approx(np.linalg.norm(rgb_to_lab(red)[0, 0]))
    assert delta_e76(white, white)[0, 0] == 0.0


def test_delta_e_errors():
    with pytest.raises(ValueError, match="uint8"):
        delta_e76(np.zeros((2, 2, 3)), np.zeros((2, 2, 3)))
    with pytest.raises(ValueError, match="3 colour channels"):
        delta_e76(np.zeros((2, 2), np.uint8), np.zeros((2, 2), np.uint8))
    with pytest.raises(ValueError, match=r"a.shape=\(2, 2, 3\) and b.shape=\(2, 3, 3\)"):
        delta_e76(np.zeros((2, 2, 3), np.uint8), np.zeros((2, 3, 3), np.uint8))
    with pytest.raises(ValueError, match="constants must be"):
        rgb_to_lab(np.zeros((1, 3), np.uint8), constants="cie2000")  # type: ignore[arg-type]


def _problem():
    inp = np.zeros((2, 2, 3), np.uint8)
    ans = inp.copy()
    ans[0, 0] = (255, 255, 255)  # edit: 1 pixel, preservation: 3
    return inp, ans


def test_paint_iou_hand_computed():
    inp, ans = _problem()
    assert paint_iou(ans, ans, inp) == 1.0
    assert paint_iou(inp, ans, inp) == 0.0  # nothing painted
    out = ans.copy()
    out[1, 1] = (3, 3, 3)  # a preserved pixel spoiled by dE = L*(3,3,3) = 0.9...
    de = delta_e76(out, ans)[1, 1]
    assert 0.5 < de < 1.0
    # t = 0: 1 / (1 + 1) = 0.5; t >= 1: 1 / 1 = 1 -> mean = (0.5 + 10) / 11
    assert paint_iou(out, ans, inp) == pytest.approx(10.5 / 11)
    out2 = ans.copy()
    out2[0, 0] = (250, 250, 250)  # edit painted with dE ~ 2.0
    t_ok = int(np.ceil(delta_e76(out2, ans)[0, 0]))
    assert paint_iou(out2, ans, inp) == pytest.approx((11 - t_ok) / 11)
    assert paint_iou(out2, ans, inp, thresholds=[0.5, 10]) == pytest.approx(0.5)


def test_paint_iou_nothing_to_edit():
    inp = np.full((3, 3, 3), 7, np.uint8)
    assert paint_iou(inp, inp, inp) == 1.0  # 0 / 0 at every threshold: defined as 1
    spoiled = inp.copy()
    spoiled[0, 0] = 200
    assert paint_iou(spoiled, inp, inp) == 0.0  # 0 / 1


def test_resize_cover_and_size_mismatch():
    inp, ans = _problem()
    big = np.repeat(np.repeat(ans, 2, axis=0), 2, axis=1)  # (4, 4): exact 2x upscale
    with pytest.raises(ValueError, match=r"output.shape=\(4, 4, 3\) differs.*resize='cover'"):
        paint_iou(big, ans, inp)
    assert paint_iou(big, ans, inp, resize="cover") == 1.0
    # (2, 8) -> scale max(4/2, 4/8) = 2 -> (4, 16), columns doubled -> centre crop cols 6:10
    wide = np.arange(8, dtype=np.uint8).reshape(1, 8, 1).repeat(2, axis=0).repeat(3, axis=2)
    out = resize_cover(wide, (4, 4))
    assert out.shape == (4, 4, 3)
    assert out[0, :, 0].tolist() == [3, 3, 4, 4]
    assert resize_cover(ans, (2, 2)).tolist() == ans.tolist()


def test_paint_iou_errors():
    inp, ans = _problem()
    with pytest.raises(ValueError, match=r"answer.shape=\(2, 2, 3\) and input.shape"):
        paint_iou(ans, ans, inp[:1])
    with pytest.raises(ValueError, match="non-empty"):
        paint_iou(ans, ans, inp, thresholds=[])
    with pytest.raises(ValueError, match="output must be an sRGB uint8"):
        paint_iou(ans.astype(float), ans, inp)


def test_float32_lab_follows_paintbench_order_step_by_step():
    # Issue 10 item 7: PaintBench converts in float32; every step here is float32, in its order.
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (17, 23, 3), dtype=np.uint8)
    rgb = img.astype(np.float32) / 255.0
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    m = np.array(
        [[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750],
         [0.0193339, 0.1191920, 0.9503041]], dtype=np.float32,
    )  # fmt: skip
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883], dtype=np.float32)
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), (29 / 6) ** 2 / 3 * xyz + 4 / 29)
    want = np.stack(
        [116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], -1
    )
    got = rgb_to_lab(img, dtype=np.float32)
    assert got.dtype == np.float32 and np.array_equal(got, want)
    assert np.abs(got - rgb_to_lab(img)).max() < 1e-3
    # A flat colour pair whose dE is 2 - 1e-5 in float32 and 2 + 1e-5 in float64.
    a = np.array([[[52, 219, 239]]], np.uint8)
    b = np.array([[[53, 215, 237]]], np.uint8)
    assert delta_e76(a, b, dtype=np.float32)[0, 0] <= 2 < delta_e76(a, b)[0, 0]
    with pytest.raises(ValueError, match="dtype must be"):
        rgb_to_lab(img, dtype=np.float16)
