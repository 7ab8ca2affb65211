"""insert_lesion: the mask is exactly what changed, the change has the asked sign and size."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from medibench.synth import body_mask, choose_lesion_center, insert_lesion, item_rng, item_seed


def _changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    diff = a != b
    return diff.any(axis=2) if diff.ndim == 3 else diff


def test_mask_is_exactly_the_change_on_a_flat_image() -> None:
    image = np.full((64, 64), 100, np.uint8)
    out, mask = insert_lesion(
        image, center=(30, 34), radius=8, contrast=60, rng=np.random.default_rng(1), texture=0.0
    )
    assert mask.dtype == bool and mask.shape == (64, 64)
    assert np.array_equal(mask, _changed(out, image))
    assert int(out[30, 34]) == 160  # full contrast at the core (no texture)
    assert (out[mask] > 100).all() and (out[~mask] == 100).all()
    # The lesion is an ellipse with semi-axes 8 and 8*U(0.7, 1): its area lies between.
    assert np.pi * 8 * 5.6 * 0.75 < mask.sum() < np.pi * 8 * 8


def test_darker_lesion_and_circle_support() -> None:
    image = np.full((50, 50), 150, np.uint8)
    out, mask = insert_lesion(
        image,
        center=(25, 25),
        radius=(10, 10),
        contrast=-80,
        rng=np.random.default_rng(2),
        shape="circle",
        edge_softness=0.5,
    )
    rows, cols = np.mgrid[:50, :50]
    inside_circle = np.hypot(rows - 25, cols - 25) < 10
    assert (mask <= inside_circle).all()  # never outside the support
    assert (out[mask] < 150).all() and int(out[25, 25]) < 150 - 80 * 0.5
    assert np.array_equal(mask, _changed(out, image))


def test_saturated_pixels_stay_unchanged_and_inside_the_mask() -> None:
    image = np.full((64, 64), 120, np.uint8)
    image[28:36, 28:36] = 255  # already white: a bright lesion cannot change it
    out, mask = insert_lesion(
        image,
        center=(32, 32),
        radius=(12, 12),
        contrast=50,
        rng=np.random.default_rng(3),
        shape="circle",
    )
    changed = _changed(out, image)
    assert not changed[28:36, 28:36].any()
    assert mask[28:36, 28:36].all()  # the enclosed unchanged hole belongs to the lesion
    assert np.array_equal(mask, ndimage.binary_fill_holes(changed))
    assert (out[~mask] == image[~mask]).all()


def test_rgb_tint_and_textured_lobulated_lesion() -> None:
    image = np.full((40, 40, 3), (200, 120, 80), np.uint8)
    out, mask = insert_lesion(
        image,
        center=(20, 20),
        radius=9,
        contrast=-60,
        rng=np.random.default_rng(4),
        shape="lobulated",
        tint=(0.3, 1.0, 1.0),
        texture=0.2,
    )
    assert np.array_equal(mask, _changed(out, image))
    core = out[20, 20].astype(int) - image[20, 20].astype(int)
    assert core[0] > core[1] and core[1] < -30  # red darkens least: a reddish dark spot
    assert (out[~mask] == image[~mask]).all()


def test_same_rng_same_lesion_other_rng_other_lesion() -> None:
    image = (np.arange(80 * 80).reshape(80, 80) % 200).astype(np.uint8)
    kwargs = dict(center=(40, 40), radius=10, contrast=40, shape="lobulated")
    a = insert_lesion(image, rng=item_rng("t", 1), **kwargs)
    b = insert_lesion(image, rng=item_rng("t", 1), **kwargs)
    c = insert_lesion(image, rng=item_rng("t", 2), **kwargs)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_bad_arguments() -> None:
    image = np.full((20, 20), 100, np.uint8)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="changed no pixel"):
        insert_lesion(image, center=(10, 10), radius=5, contrast=0.2, rng=rng)
    with pytest.raises(ValueError, match="outside the 20x20 image"):
        insert_lesion(image, center=(100, 100), radius=5, contrast=50, rng=rng)
    with pytest.raises(ValueError, match="uint8"):
        insert_lesion(image.astype(float), center=(10, 10), radius=5, contrast=50, rng=rng)
    with pytest.raises(ValueError, match="tint applies to RGB"):
        insert_lesion(image, center=(10, 10), radius=5, contrast=50, rng=rng, tint=(1, 1, 1))


def test_body_mask_and_center_choice() -> None:
    image = np.zeros((60, 60), np.uint8)
    image[10:50, 5:45] = 180
    image[25:30, 20:25] = 0  # a dark hole inside the body is filled
    image[2:4, 55:58] = 200  # a small bright speck is not the body
    body = body_mask(image)
    expected = np.zeros((60, 60), bool)
    expected[10:50, 5:45] = True
    assert np.array_equal(body, expected)
    rng = np.random.default_rng(5)
    for _ in range(20):
        r, c = choose_lesion_center(body, 6, rng, margin=2)
        assert 10 + 7 <= r <= 49 - 7 and 5 + 7 <= c <= 44 - 7
    with pytest.raises(ValueError, match="no room for a lesion of radius 30"):
        choose_lesion_center(body, 30, rng)


def test_item_seed_is_the_sha256_prefix() -> None:
    import hashlib

    digest = hashlib.sha256(b"starter|denoise|3|0").digest()
    assert item_seed("starter", "denoise", 3, 0) == int.from_bytes(digest[:8], "big")
    assert item_rng("a", 1).integers(1 << 30) == item_rng("a", 1).integers(1 << 30)
