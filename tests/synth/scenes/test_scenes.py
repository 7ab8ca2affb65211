"""Scenes: determinism (pinned bytes), the counterfactual contract, labels, lesion placement."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from medibench.synth.scenes import (
    GREY_MODALITIES,
    MIN_SIZE,
    MODALITIES,
    Lesion,
    SceneError,
    _scene,
    lesion_hosts,
    make_scene,
    place_lesion,
    render,
    structures,
    variants,
)

SIZE = 96
# A typical lesion contrast per modality, in its own units (see each module's docstring).
CONTRAST = {
    "ct": -45.0,
    "mri": -0.3,
    "xray": 0.4,
    "dermoscopy": 0.8,
    "endoscopy": 0.9,
    "fundus": 0.9,
    "xray-real": 50.0,
    "ct-real": 60.0,
    "mri-real": 0.3,
    "fundus-real": 0.9,
}
KIND = {
    "dermoscopy": "melanoma",
    "endoscopy": "polyp",
    "fundus": "haemorrhage",
    "fundus-real": "haemorrhage",
    "mri": "mass",
    "mri-real": "mass",
}

# sha256 of render(make_scene(modality, seed=7, size=96)).image; a change here is a version bump.
PINNED = {
    "ct": "0d2bda971c85727eb66ed0f8b2e0d4214040eb3c65a933d4adcf979b8da4ec1e",
    "mri": "9084d7d0c418fcd2d9380c9dd2e6d48cc933a2c971a9e6dfeec660ce8aaa632a",
    "xray": "12999fad4d2289a9b5e46d15a878598390723fbac1984f6453e8549917ac4b3d",
    "dermoscopy": "84d550e8969eee3e8922711356b98754603b72b8c2a4751e09de22d760f4c0fb",
    "endoscopy": "010bab9172c973706893a1ac8edd895e067ab1ad56f2e57ffb56719e7bab0027",
    "fundus": "912d82afe23625463792cf3ec8cf4118bccf6ca46ede75b5059b7fcbb8c949c3",
    "xray-real": "c9e8731dfb403f143dd7cb23a28e9cc7430c5c4a81fe23760b01663b9eb94404",
    "ct-real": "182fbad8b4dbb7e24989891bd765418b630605cae59004c2271248b94352fc56",
    "mri-real": "d83bfe186bf2c10e889d60a866d02f934b52a20fe6d466c89afe60fa954b89ea",
    "fundus-real": "8ad4791956f8e56537a1a4c4fb3239a61c8eae0c819f82effa5562bfa80856ac",
}


def _sha(image: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest()


def _host(modality: str, labels: dict) -> str:
    return next(h for h in lesion_hosts(modality) if h in labels)


def _lesion(scene, rendered, seed=0, radius=5.0, avoid=()):
    host = _host(scene.modality, rendered.labels)
    contrast = (
        850.0 if host.startswith("lung") and scene.modality == "ct" else CONTRAST[scene.modality]
    )
    return place_lesion(
        scene,
        rendered,
        host=host,
        radius=radius,
        avoid=avoid,
        contrast=contrast,
        kind=KIND.get(scene.modality, "mass"),
        rng=np.random.default_rng(seed),
    )


def test_modalities_cover_the_six_procedural_ones():
    assert set(MODALITIES) >= {"ct", "mri", "xray", "dermoscopy", "endoscopy", "fundus"}
    assert GREY_MODALITIES <= set(MODALITIES)


@pytest.mark.parametrize("modality", MODALITIES)
def test_render_is_deterministic_and_pinned(modality):
    scene = make_scene(modality, seed=7, size=SIZE)
    assert scene == make_scene(modality, seed=7, size=SIZE)
    first = render(scene)
    _scene._CACHE.clear()  # the second render recomputes the anatomy
    second = render(scene)
    assert first.image.dtype == np.uint8 and first.image.shape == (SIZE, SIZE, 3)
    assert np.array_equal(first.image, second.image)
    assert _sha(first.image) == PINNED[modality]
    if modality in GREY_MODALITIES:
        assert (first.image[..., 0] == first.image[..., 1]).all()
        assert first.raw is not None and first.raw.dtype == np.float32
        lo, hi = first.display
        grey = np.rint(np.clip((first.raw - lo) / (hi - lo), 0, 1) * 255)
        assert np.abs(grey - first.image[..., 0]).max() <= 1
    else:
        assert first.raw is None and first.display is None


@pytest.mark.parametrize("modality", MODALITIES)
def test_other_seeds_give_other_images(modality):
    if modality in ("xray-real", "ct-real", "fundus-real"):
        pytest.skip("a fixed real background: the seed only picks the variant")
    a = render(make_scene(modality, seed=1, size=SIZE, variant=variants(modality)[0]))
    b = render(make_scene(modality, seed=2, size=SIZE, variant=variants(modality)[0]))
    assert not np.array_equal(a.image, b.image)


@pytest.mark.parametrize("modality", MODALITIES)
def test_labels_are_known_non_empty_masks(modality):
    for variant in variants(modality):
        rendered = render(make_scene(modality, seed=3, size=SIZE, variant=variant))
        assert rendered.labels
        for name, mask in rendered.labels.items():
            assert name in structures(modality)
            assert mask.dtype == bool and mask.shape == (SIZE, SIZE) and mask.any()
        assert any(h in rendered.labels for h in lesion_hosts(modality))


@pytest.mark.parametrize("modality", MODALITIES)
def test_counterfactual_contract(modality):
    scene = make_scene(modality, seed=11, size=SIZE)
    plain = render(scene)
    lesion = _lesion(scene, plain)
    ill = render(scene.with_lesions([lesion]))
    support = ill.labels["lesion:0"]
    assert support.any() and "lesion:0" not in plain.labels
    assert np.array_equal(ill.image[~support], plain.image[~support])
    assert (ill.image[support] != plain.image[support]).any()
    # a moved lesion: identical outside both supports
    moved = _lesion(scene, plain, seed=5)
    other = render(scene.with_lesions([moved]))
    outside = ~(support | other.labels["lesion:0"])
    assert np.array_equal(ill.image[outside], other.image[outside])
    # removing the lesion gives the lesion-free scene exactly
    assert (
        np.array_equal(
            render(ill_scene := scene.with_lesions([lesion]).with_lesions([])).image, plain.image
        )
        and ill_scene == scene
    )


@pytest.mark.parametrize("modality", MODALITIES)
def test_lesion_lies_inside_its_host_and_avoids_others(modality):
    scene = make_scene(modality, seed=13, size=SIZE)
    plain = render(scene)
    first = _lesion(scene, plain, seed=1, radius=3.0)
    second = _lesion(scene, plain, seed=2, radius=3.0, avoid=[first])
    rendered = render(scene.with_lesions([first, second]))
    for i, lesion in enumerate((first, second)):
        assert lesion.host in rendered.labels
        assert not (rendered.labels[f"lesion:{i}"] & ~rendered.labels[lesion.host]).any()
    assert not (rendered.labels["lesion:0"] & rendered.labels["lesion:1"]).any()


@pytest.mark.parametrize("modality", MODALITIES)
def test_lesion_larger_than_the_organ_is_refused(modality):
    scene = make_scene(modality, seed=3, size=SIZE)
    plain = render(scene)
    with pytest.raises(SceneError, match="does not fit"):
        _lesion(scene, plain, radius=SIZE)


def test_no_room_away_from_lesions_to_avoid():
    scene = make_scene("ct", seed=3, size=SIZE, variant="abdomen")
    plain = render(scene)
    crowd = [
        Lesion("mass", (r, c), (30.0, 30.0)) for r in range(0, SIZE, 8) for c in range(0, SIZE, 8)
    ]
    with pytest.raises(SceneError, match="away from"):
        place_lesion(
            scene,
            plain,
            host="liver",
            radius=3,
            contrast=-40,
            kind="mass",
            rng=np.random.default_rng(0),
            avoid=crowd,
        )


def test_bad_names_and_sizes_are_refused():
    with pytest.raises(SceneError, match="unknown modality 'pet'; valid: ct, mri, xray"):
        make_scene("pet", seed=0)
    with pytest.raises(SceneError, match=f"between {MIN_SIZE}"):
        make_scene("ct", seed=0, size=MIN_SIZE - 1)
    with pytest.raises(SceneError, match="unknown variant 'knee' for ct; valid: abdomen, thorax"):
        make_scene("ct", seed=0, variant="knee")
    with pytest.raises(SceneError, match="clutter"):
        make_scene("ct", seed=0, clutter=2.0)
    with pytest.raises(SceneError, match="noise"):
        make_scene("ct", seed=0).with_noise(-1.0)
    scene = make_scene("ct", seed=0, size=MIN_SIZE, variant="thorax")
    plain = render(scene)
    with pytest.raises(SceneError, match="not a lesion host for ct; valid: liver"):
        place_lesion(
            scene,
            plain,
            host="brain",
            radius=3,
            contrast=1,
            kind="mass",
            rng=np.random.default_rng(0),
        )
    with pytest.raises(SceneError, match="has no 'liver'"):
        place_lesion(
            scene,
            plain,
            host="liver",
            radius=3,
            contrast=1,
            kind="mass",
            rng=np.random.default_rng(0),
        )
    with pytest.raises(SceneError, match="positive"):
        place_lesion(
            scene,
            plain,
            host="lung_left",
            radius=0,
            contrast=1,
            kind="mass",
            rng=np.random.default_rng(0),
        )


def test_noise_level_is_a_knob_of_the_same_scene():
    scene = make_scene("ct", seed=4, size=SIZE)
    clean, noisy = render(scene.with_noise(0.0)), render(scene.with_noise(2.0))
    base = render(scene)
    assert np.std(noisy.raw - clean.raw) == pytest.approx(
        2 * np.std(base.raw - clean.raw), rel=1e-3
    )


def test_labels_are_read_only():
    rendered = render(make_scene("xray", seed=0, size=SIZE))
    with pytest.raises(ValueError):
        rendered.labels["heart"][0, 0] = True
