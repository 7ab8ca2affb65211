"""Overlay blending and recovery (MieDB-100k): hand pixels and round trips on real images."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.metrics import blend_overlay, overlay_ill_conditioned, overlay_to_mask
from medibench.samples import OVERLAY_COLORS


def _disk_mask(shape, centre, radius):
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    return (yy - centre[0]) ** 2 + (xx - centre[1]) ** 2 <= radius**2


def test_hand_computed_pixels():
    base = np.array([[[101, 50, 0], [10, 20, 30]]], np.uint8)
    mask = np.array([[True, False]])
    out = blend_overlay(base, mask, "red")
    # 0.4 * 101 + 0.6 * 255 = 193.4 -> 193; 0.4 * 50 = 20; 0.4 * 0 = 0
    assert out[0, 0].tolist() == [193, 20, 0]
    assert out[0, 1].tolist() == [10, 20, 30]
    # Ties round half to even (np.rint): 0.5 * 1 + 0.5 * 0 = 0.5 -> 0; 0.5 * 3 = 1.5 -> 2.
    tie = blend_overlay(
        np.array([[[1, 3, 5]]], np.uint8), np.ones((1, 1), bool), (0, 0, 0), alpha=0.5
    )
    assert tie[0, 0].tolist() == [0, 2, 2]
    # alpha projection by hand: B - A = (92, -30, 0), O - A = (154, -50, 0)
    # <B - A, O - A> / |O - A|^2 = (14168 + 1500) / (23716 + 2500) = 0.5977 > 0.5
    assert overlay_to_mask(out, base, "red").tolist() == [[True, False]]
    assert overlay_to_mask(out, base, "red", threshold=0.6).tolist() == [[False, False]]


def test_gray_base_and_colour_tuples():
    base = np.full((3, 3), 100, np.uint8)
    mask = np.eye(3, dtype=bool)
    out = blend_overlay(base, mask, (0, 0, 255))
    assert out.shape == (3, 3, 3) and out.dtype == np.uint8
    assert out[1, 1].tolist() == [40, 40, 193] and out[0, 1].tolist() == [100, 100, 100]
    np.testing.assert_array_equal(overlay_to_mask(out, base, "blue"), mask)


@pytest.mark.parametrize("colour", sorted(OVERLAY_COLORS))
def test_round_trip_on_real_images(retina_rgb, camera_pair, colour):
    for base in (retina_rgb, camera_pair[0][:128, :128]):
        mask = _disk_mask(base.shape[:2], (60, 70), 30)
        blended = blend_overlay(base, mask, colour)
        recovered = overlay_to_mask(blended, base, colour)
        # Exact wherever the projection is well conditioned; elsewhere it may miss.
        trusted = ~overlay_ill_conditioned(base, colour)
        np.testing.assert_array_equal(recovered[trusted], mask[trusted])
        assert not recovered[~mask].any()  # B == A outside: never a false positive


def test_retina_red_is_fully_recoverable_here(retina_rgb):
    # This fundus image has no pixel within 10 of pure red: the whole mask comes back.
    mask = _disk_mask(retina_rgb.shape[:2], (80, 80), 50)
    assert not overlay_ill_conditioned(retina_rgb, "red").any()
    back = overlay_to_mask(blend_overlay(retina_rgb, mask, "red"), retina_rgb, "red")
    np.testing.assert_array_equal(back, mask)


def test_pixels_already_of_the_overlay_colour_are_lost_and_flagged():
    base = np.zeros((2, 2, 3), np.uint8)
    base[0, 0] = (255, 0, 0)  # already pure red: blend leaves it unchanged
    base[0, 1] = (250, 3, 2)  # |O - A| ~ 6.2: rounding can flip it
    mask = np.ones((2, 2), bool)
    back = overlay_to_mask(blend_overlay(base, mask, "red"), base, "red")
    assert not back[0, 0] and back[1, 0] and back[1, 1]
    flags = overlay_ill_conditioned(base, "red")
    assert flags.tolist() == [[True, True], [False, False]]
    assert overlay_ill_conditioned(base, "red", min_norm=0).sum() == 0


def test_multiclass_union(retina_rgb):
    masks = [_disk_mask((160, 160), (40, 40), 20), _disk_mask((160, 160), (110, 110), 25)]
    blended = blend_overlay(retina_rgb, masks, ["green", "blue"])
    union = overlay_to_mask(blended, retina_rgb, ["red", "green", "blue"])
    np.testing.assert_array_equal(union, masks[0] | masks[1])
    only_green = overlay_to_mask(blended, retina_rgb, "green")
    np.testing.assert_array_equal(only_green, masks[0])


def test_overlapping_masks_later_wins():
    base = np.zeros((1, 1, 3), np.uint8)
    m = np.ones((1, 1), bool)
    out = blend_overlay(base, [m, m], ["red", "blue"])
    assert out[0, 0].tolist() == [0, 0, 153]


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda b, m: blend_overlay(b, m, "purple"), "unknown colour name 'purple'"),
        (lambda b, m: blend_overlay(b, m, (300, 0, 0)), "tuple in 0-255"),
        (lambda b, m: blend_overlay(b.astype(float), m, "red"), "uint8"),
        (lambda b, m: blend_overlay(b, m[:2], "red"), r"mask shape \(2, 4\)"),
        (lambda b, m: blend_overlay(b, [m, m], ["red"]), "2 masks but 1 colours"),
        (lambda b, m: blend_overlay(b, [m], "red"), "list of colours"),
        (lambda b, m: blend_overlay(b, m, ["red", "blue"]), "one mask takes one colour"),
        (lambda b, m: blend_overlay(b, np.arange(16).reshape(4, 4), "red"), "not binary"),
        (lambda b, m: blend_overlay(b, m, "red", alpha=1.5), "alpha"),
        (lambda b, m: blend_overlay(b[..., :2], m, "red"), "RGB"),
        (lambda b, m: overlay_to_mask(b[:3], b, "red"), "same spatial shape"),
        (lambda b, m: overlay_to_mask(b, b, []), "non-empty list"),
        (lambda b, m: overlay_ill_conditioned(b, "red", min_norm=-1), "min_norm"),
    ],
)
def test_errors(call, message):
    base = np.zeros((4, 4, 3), np.uint8)
    mask = np.zeros((4, 4), bool)
    with pytest.raises(ValueError, match=message):
        call(base, mask)
