"""Transformation triplets: the suite's degradations, parameters and seeds stored and enough to
redo each input; the operators that MONAI also has agree with MONAI on the same parameters."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.build import OPERATORS, BuildError, build, item_slices, read_source
from medibench.build._perception import transformation
from medibench.build._records import BuildContext
from medibench.synth import degrade


def _slices(path, n=2):
    spec = read_source(path)
    return spec, list(item_slices(spec, spec.items[0]))[:n]


def test_mri_slices_get_the_mri_and_generic_operators(demo_sources):
    spec, (sl, _) = _slices(demo_sources["mni152"])
    out = transformation(spec, sl, BuildContext(0))
    assert [t.task for t in out.triplets] == [
        "denoise-gaussian", "denoise-rician", "deblur", "super-resolution-2x",
        "super-resolution-4x", "mr-motion-correction", "bias-field-correction",
        "enhance-contrast",
    ]  # fmt: skip
    for t in out.triplets:
        assert t.target is sl.image and t.mask is None
        assert np.array_equal(t.input[..., 0], t.input[..., 1])  # a grey slice stays grey
        assert t.metadata["operator"].startswith("medibench.synth.degrade.")
        function = t.metadata["operator"].rsplit(".", 1)[1]
        assert t.description.startswith(f"Undo {function}(")


def test_stored_parameters_and_seed_redo_every_input(demo_sources):
    for name in ("mni152", "liver"):
        spec, (sl, _) = _slices(demo_sources[name])
        for t in transformation(spec, sl, BuildContext(7)).triplets:
            op = OPERATORS[t.task]
            rng = np.random.Generator(np.random.PCG64(t.metadata["seed"]))
            assert op.draw(rng, sl) == t.metadata["params"]
            again, target = op.apply(sl, t.metadata["params"], rng, spec.window)
            np.testing.assert_array_equal(again, t.input)
            np.testing.assert_array_equal(target, t.target)


def test_gaussian_noise_by_hand_from_the_stored_seed(demo_sources):
    spec, (sl, _) = _slices(demo_sources["mni152"])
    (t,) = [t for t in transformation(spec, sl, BuildContext(0)).triplets
            if t.task == "denoise-gaussian"]  # fmt: skip
    rng = np.random.Generator(np.random.PCG64(t.metadata["seed"]))
    sigma = float(rng.uniform(8.0, 20.0))
    assert sigma == t.metadata["params"]["sigma"]
    noisy = np.clip(np.rint(sl.image[..., 0] + rng.normal(0.0, sigma, sl.image.shape[:2])), 0, 255)
    np.testing.assert_array_equal(t.input[..., 0], noisy.astype(np.uint8))


def test_ct_gets_the_hu_operators_displayed_in_the_source_window(demo_sources):
    spec, (sl,) = _slices(demo_sources["liver"], 1)
    by_task = {t.task: t for t in transformation(spec, sl, BuildContext(0)).triplets}
    assert {"low-dose-ct", "ring-artefact-removal", "streak-artefact-removal",
            "window-lung", "window-bone", "denoise-poisson"} <= set(by_task)  # fmt: skip
    assert "denoise-rician" not in by_task
    low = by_task["low-dose-ct"]
    clean = degrade.apply_window(sl.raw, (40.0, 400.0))
    np.testing.assert_array_equal(low.target[..., 0], clean)
    assert low.metadata["window"] == [40.0, 400.0]
    lung = by_task["window-lung"]
    np.testing.assert_array_equal(lung.target[..., 0], degrade.apply_window(sl.raw, "lung"))
    shown = lung.metadata["params"]["input_window"]
    np.testing.assert_array_equal(lung.input[..., 0], degrade.apply_window(sl.raw, shown))


def test_unknown_operator_names_are_refused_with_the_known_ones(tmp_path, demo_sources):
    text = (
        demo_sources["mni152"].read_text().replace("axis: 2\n", "axis: 2\noperators: [sharpen]\n")
    )
    (tmp_path / "t1.nii.gz").symlink_to(demo_sources["mni152"].parent / "t1.nii.gz")
    (tmp_path / "tissue.nii.gz").symlink_to(demo_sources["mni152"].parent / "tissue.nii.gz")
    (tmp_path / "SOURCE.yaml").write_text(text)
    with pytest.raises(BuildError, match=r"unknown operator\(s\) \['sharpen'\]; known operators: "
                       "denoise-gaussian, denoise-poisson"):  # fmt: skip
        build("transformation", tmp_path / "SOURCE.yaml", tmp_path / "out")


# --- MONAI (dev extra) ----------------------------------------------------------------------


@pytest.mark.slow  # importing MONAI takes seconds
def test_blur_matches_monai_gaussian_smooth_with_the_sampled_kernel():
    monai = pytest.importorskip("monai.transforms")
    torch = pytest.importorskip("torch")
    image = np.random.default_rng(0).integers(0, 256, (64, 64), dtype=np.uint8)
    for sigma in (0.8, 1.5, 2.3):
        ours = degrade.gaussian_blur(image, sigma)
        theirs = monai.GaussianSmooth(sigma=sigma, approx="sampled")(
            torch.tensor(image[None].astype(np.float64))).numpy()[0]  # fmt: skip
        r = int(4 * sigma + 0.5)  # MONAI pads with zeros, scipy reflects: compare the interior
        inner = (slice(r, -r), slice(r, -r))
        np.testing.assert_allclose(
            ndimage_blur(image, sigma)[inner], theirs[inner], atol=0.02)  # fmt: skip
        assert np.abs(ours[inner].astype(int) - np.rint(theirs[inner])).max() <= 1
        assert (ours[inner] == np.rint(theirs[inner])).mean() > 0.99


def ndimage_blur(image, sigma):
    from scipy import ndimage

    return ndimage.gaussian_filter(image.astype(np.float64), sigma, mode="reflect")


@pytest.mark.slow
def test_windowing_matches_monai_scale_intensity_range():
    monai = pytest.importorskip("monai.transforms")
    raw = np.random.default_rng(1).uniform(-1200, 1500, (64, 64)).astype(np.float32)
    for name, (level, width) in degrade.CT_WINDOWS.items():
        lo, hi = level - width / 2, level + width / 2
        theirs = monai.ScaleIntensityRange(a_min=lo, a_max=hi, b_min=0, b_max=255, clip=True)(
            raw[None])  # fmt: skip
        ours = degrade.apply_window(raw, name)
        diff = np.abs(ours.astype(int) - np.rint(np.asarray(theirs)[0]))
        assert diff.max() <= 1 and (diff == 0).mean() > 0.999, name


@pytest.mark.slow
def test_rician_and_gaussian_noise_have_monais_distribution():
    monai = pytest.importorskip("monai.transforms")
    image = np.full((256, 256), 40, np.uint8)
    rng = np.random.default_rng(2)
    for sigma in (5.0, 15.0):
        tol = 4 * sigma * np.sqrt(2 / image.size)  # four standard errors of a difference of means
        ours = degrade.add_rician_noise(image, sigma, rng).astype(np.float64)
        rician = monai.RandRicianNoise(prob=1.0, mean=0.0, std=sigma, relative=False,
                                       sample_std=False)  # fmt: skip
        rician.set_random_state(0)
        theirs = np.rint(np.asarray(rician(image[None].astype(np.float32)))[0])
        assert abs(ours.mean() - theirs.mean()) < tol and abs(ours.std() - theirs.std()) < tol
        gauss = monai.RandGaussianNoise(prob=1.0, mean=0.0, std=sigma, sample_std=False)
        gauss.set_random_state(0)
        theirs = np.clip(np.rint(np.asarray(gauss(image[None].astype(np.float32)))[0]), 0, 255)
        ours = degrade.add_gaussian_noise(image, sigma, rng).astype(np.float64)
        assert abs(ours.mean() - theirs.mean()) < tol and abs(ours.std() - theirs.std()) < tol
