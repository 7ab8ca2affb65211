"""Transformation tasks: restore a degraded image, or re-display a CT in a named window.

The target is a render of the scene; the input is that render degraded by a function of
:mod:`medibench.synth.degrade` (raw-unit degradations act on ``Rendered.raw`` and are mapped back
with the scene's display range). No mask: the whole image is the region of interest.

Where the degradation destroys fine detail (denoising, deblurring, super-resolution) the target is
the noise-free render (``scene.with_noise(0)``): acquisition noise cannot be predicted, so it is
not asked for. Elsewhere (low-dose CT, artefacts, bias field, windowing, contrast) the target keeps
the scene's own noise: low-dose CT asks for the full-dose image, the others for the image without
the artefact. Degradation strengths scale with the difficulty's ``severity``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from medibench.synth import degrade
from medibench.synth.scenes import GREY_MODALITIES, Lesion, Rendered, Scene, render
from medibench.synth.tasks._base import TaskContext, TaskItem, task
from medibench.synth.tasks._common import (
    ALL_MODALITIES,
    modality_text,
    new_lesion,
    new_scene,
    region,
    rgb,
    scene_meta,
)

_CT = tuple(m for m in ALL_MODALITIES if m.startswith("ct"))
_MR = tuple(m for m in ALL_MODALITIES if m.startswith("mri"))
_PHOTON = tuple(m for m in ALL_MODALITIES if not m.startswith("mri"))
_CT_NOISE_HU = 12.0  # full-dose CT noise of the scenes at noise 1 (scenes/ct.py)


@task("denoise-gaussian", "transformation", ALL_MODALITIES,
      "remove additive Gaussian noise")  # fmt: skip
def denoise_gaussian(ctx: TaskContext) -> TaskItem:
    sigma = float(ctx.rng.uniform(10.0, 18.0)) * ctx.difficulty.severity
    return _restore(
        ctx, lambda img, rng: degrade.add_gaussian_noise(img, sigma, rng), clean=True,
        texts=["Denoise this image.", "Remove the noise from this {phrase}.",
               "Suppress the Gaussian noise while keeping edges and anatomy intact.",
               "Make this {phrase} less noisy."],
        description=f"Remove additive Gaussian noise (standard deviation {sigma:.1f} grey "
        "levels, independent per pixel) and restore the clean image; anatomy, edges and "
        "contrast stay as they are.", meta={"noise_sigma": sigma},
    )  # fmt: skip


@task("denoise-poisson", "transformation", _PHOTON,
      "remove photon (shot) noise of a low photon count")  # fmt: skip
def denoise_poisson(ctx: TaskContext) -> TaskItem:
    peak = float(ctx.rng.uniform(40.0, 80.0)) / ctx.difficulty.severity**2
    return _restore(
        ctx, lambda img, rng: degrade.add_poisson_noise(img, peak, rng), clean=True,
        texts=["Denoise this image.", "Remove the quantum (photon) noise from this {phrase}.",
               "Reduce the shot noise of this low-count acquisition.",
               "Clean up the grainy photon noise without blurring the anatomy."],
        description=f"Remove Poisson photon noise (about {peak:.0f} photons at white: the noise "
        "grows with the square root of the brightness) and restore the clean image.",
        meta={"photons_at_white": peak},
    )  # fmt: skip


@task("denoise-rician", "transformation", _MR,
      "remove Rician (MR magnitude) noise")  # fmt: skip
def denoise_rician(ctx: TaskContext) -> TaskItem:
    sigma = float(ctx.rng.uniform(8.0, 15.0)) * ctx.difficulty.severity
    return _restore(
        ctx, lambda img, rng: degrade.add_rician_noise(img, sigma, rng), clean=True,
        texts=["Denoise this image.", "Remove the Rician noise from this MR magnitude image.",
               "Reduce the MR noise, including the noise floor in the dark background.",
               "Make this {phrase} less noisy without losing grey-white contrast."],
        description=f"Remove Rician noise (magnitude of complex Gaussian noise, sigma {sigma:.1f}"
        " grey levels, which also lifts the dark background) and restore the clean image.",
        meta={"noise_sigma": sigma},
    )  # fmt: skip


@task("low-dose-ct", "transformation", _CT,
      "restore the full-dose CT from a simulated low-dose acquisition")  # fmt: skip
def low_dose_ct(ctx: TaskContext) -> TaskItem:
    dose = float(np.clip(ctx.rng.uniform(0.1, 0.25) / ctx.difficulty.severity, 0.02, 0.5))
    sigma = _CT_NOISE_HU * max(ctx.difficulty.noise, 0.25)

    def degrade_raw(raw, rng):
        return degrade.low_dose_noise(raw, dose, rng, full_dose_sigma=sigma)

    return _restore_raw(
        ctx, degrade_raw,
        texts=["Denoise this low-dose CT.", "Turn this low-dose CT into a full-dose image.",
               "Remove the extra quantum noise of the reduced-dose acquisition.",
               "Reduce the noise of this low-dose scan to full-dose quality."],
        description=f"Restore the full-dose image from a CT acquired at {dose:.0%} of the dose "
        f"(noise {sigma / np.sqrt(dose):.0f} HU instead of {sigma:.0f} HU, spatially "
        "correlated); the full-dose noise itself stays.",
        meta={"dose_fraction": dose, "full_dose_sigma_hu": sigma},
    )  # fmt: skip


@task("deblur", "transformation", ALL_MODALITIES, "undo a Gaussian blur")  # fmt: skip
def deblur(ctx: TaskContext) -> TaskItem:
    sigma = float(ctx.rng.uniform(1.5, 2.5)) * ctx.difficulty.severity * ctx.size / 256
    return _restore(
        ctx, lambda img, rng: degrade.gaussian_blur(img, sigma), clean=True,
        texts=["Deblur this image.", "Remove the blur and restore sharp edges.",
               "Sharpen this blurred {phrase} back to full detail.",
               "Undo the Gaussian blurring without adding noise."],
        description=f"Undo a Gaussian blur of sigma {sigma:.2f} px and restore sharp edges and "
        "fine detail without adding noise or changing the anatomy.",
        meta={"blur_sigma_px": sigma},
    )  # fmt: skip


for _factor in (2, 4):

    def _super_resolve(ctx: TaskContext, factor: int = _factor) -> TaskItem:
        return _super_resolution(ctx, factor)

    task(f"super-resolution-{_factor}x", "transformation", ALL_MODALITIES,
         f"restore detail lost to {_factor}x downsampling")(_super_resolve)  # fmt: skip


@task("mr-motion-correction", "transformation", _MR,
      "remove ghosting from patient motion during an MR acquisition")  # fmt: skip
def motion(ctx: TaskContext) -> TaskItem:
    fraction = float(np.clip(ctx.rng.uniform(0.2, 0.35) * ctx.difficulty.severity, 0.05, 0.9))
    shift = float(ctx.rng.uniform(2.0, 4.0)) * ctx.size / 256
    return _restore(
        ctx, lambda img, rng: degrade.mr_motion_artefact(img, rng, fraction=fraction,
                                                         max_shift_px=shift),
        texts=["Remove the motion artefact.", "Correct the motion ghosting in this MR image.",
               "Suppress the ghost replicas along the phase-encode direction.",
               "Undo the blurring and ghosting caused by patient movement."],
        description=f"Remove motion ghosting: {fraction:.0%} of the k-space lines (phase "
        f"encoding along the image rows) were acquired with the head shifted by up to "
        f"{shift:.1f} px; restore the motion-free image.",
        meta={"corrupted_line_fraction": fraction, "max_shift_px": shift},
    )  # fmt: skip


@task("ring-artefact-removal", "transformation", _CT,
      "remove CT ring artefacts (concentric rings)")  # fmt: skip
def rings(ctx: TaskContext) -> TaskItem:
    n = int(ctx.rng.integers(3, 7))
    amp = float(ctx.rng.uniform(40.0, 70.0)) * ctx.difficulty.severity

    def degrade_raw(raw, rng):
        return degrade.ring_artefact(raw, rng, n_rings=n, amplitude=amp,
                                     width_px=max(1.0, ctx.size / 256))  # fmt: skip

    return _restore_raw(
        ctx, degrade_raw,
        texts=["Remove the ring artefact.", "Remove the concentric ring artefacts from this CT.",
               "Correct the detector ring artefacts around the centre of the slice.",
               "Clean up the circular bands without touching the anatomy."],
        description=f"Remove {n} concentric ring artefacts (up to {amp:.0f} HU, centred on the "
        "image centre) and restore the slice without them.",
        meta={"n_rings": n, "amplitude_hu": amp},
    )  # fmt: skip


@task("streak-artefact-removal", "transformation", _CT,
      "remove CT streak artefacts (bright and dark bands)")  # fmt: skip
def streaks(ctx: TaskContext) -> TaskItem:
    n = int(ctx.rng.integers(4, 9))
    amp = float(ctx.rng.uniform(60.0, 110.0)) * ctx.difficulty.severity

    def degrade_raw(raw, rng):
        return degrade.streak_artefact(raw, rng, n_streaks=n, amplitude=amp,
                                       width_px=1.5 * ctx.size / 256)  # fmt: skip

    return _restore_raw(
        ctx, degrade_raw,
        texts=["Remove the streak artefacts.", "Remove the bright and dark streaks from this CT.",
               "Correct the streak artefacts radiating across the slice.",
               "Clean up the straight bands that cross the anatomy."],
        description=f"Remove {n} straight streak artefacts (alternately bright and dark, up to "
        f"{amp:.0f} HU, radiating from one point) and restore the slice without them.",
        meta={"n_streaks": n, "amplitude_hu": amp},
    )  # fmt: skip


@task("bias-field-correction", "transformation", _MR,
      "correct a smooth multiplicative intensity inhomogeneity")  # fmt: skip
def bias(ctx: TaskContext) -> TaskItem:
    strength = float(ctx.rng.uniform(0.25, 0.4)) * ctx.difficulty.severity
    return _restore(
        ctx, lambda img, rng: degrade.add_bias_field(img, rng, strength=strength),
        texts=["Correct the bias field.", "Remove the intensity inhomogeneity from this MR image.",
               "Even out the smooth shading so the same tissue has the same brightness "
               "everywhere.", "Apply bias-field correction to this {phrase}."],
        description=f"Remove a smooth multiplicative bias field (gain between "
        f"{np.exp(-strength):.2f} and {np.exp(strength):.2f}, varying over about a quarter of "
        "the image) so each tissue has one brightness.",
        meta={"bias_strength": strength},
    )  # fmt: skip


@task("enhance-contrast", "transformation", ALL_MODALITIES,
      "restore the contrast of a flattened image")  # fmt: skip
def contrast(ctx: TaskContext) -> TaskItem:
    factor = float(np.clip(ctx.rng.uniform(0.35, 0.55) / ctx.difficulty.severity, 0.1, 0.9))
    return _restore(
        ctx, lambda img, rng: degrade.reduce_contrast(img, factor),
        texts=["Enhance the contrast of this image.", "Increase the contrast of this {phrase}.",
               "Restore the full tissue contrast of this washed-out image.",
               "Make the tissues easier to tell apart by boosting the contrast."],
        description=f"Restore the full contrast: deviations from the mean brightness were "
        f"scaled by {factor:.2f}; scale them back so tissues are clearly distinguished.",
        meta={"contrast_factor": factor},
    )  # fmt: skip


def _window_task(name: str) -> None:
    level, width = degrade.CT_WINDOWS[name]
    slug = name.replace(" ", "-")

    what = f"re-display the CT in the {name} window (level {level:g} / width {width:g} HU)"

    @task(f"window-{slug}", "transformation", _CT, what)
    def make(ctx: TaskContext) -> TaskItem:
        scene, rendered = _scene(ctx)
        raw, display = _hu(rendered)
        windows = {"default": display, "wide": (-1000.0, 1000.0)}
        windows.update({k: (lv - w / 2, lv + w / 2) for k, (lv, w) in degrade.CT_WINDOWS.items()})
        want = (level - width / 2, level + width / 2)
        others = [k for k, v in windows.items() if tuple(v) != want]
        shown = others[int(ctx.rng.integers(len(others)))]
        image = rgb(degrade.to_display(raw, *windows[shown]))
        target = rgb(degrade.apply_window(raw, name))
        return _item(
            ctx, scene, image, target,
            [f"Apply the {name} window.", f"Display this CT in a {name} window "
             f"(level {level:g}, width {width:g}).",
             f"Re-window the slice to {name} settings: W {width:g} / L {level:g} HU.",
             f"Show this {{phrase}} with the standard {name} window."],
            f"Re-display the slice in the {name} window: HU {want[0]:g} to {want[1]:g} map "
            f"linearly to black to white (level {level:g}, width {width:g}), clipped outside; the "
            f"input shows the {shown} window (HU {windows[shown][0]:g} to {windows[shown][1]:g}).",
            {"window": name, "window_level_width": [level, width], "input_window": shown,
             "input_display": [float(v) for v in windows[shown]]},
        )  # fmt: skip


for _name in degrade.CT_WINDOWS:
    _window_task(_name)


# --- helpers ---------------------------------------------------------------------------------


def _scene(ctx: TaskContext, *, clean: bool = False) -> tuple[Scene, Rendered]:
    """A scene with one lesion half of the time (from the item's rng), and its render."""
    scene, plain = new_scene(ctx)
    lesions: list[Lesion] = []
    if ctx.rng.random() < 0.5:
        lesions.append(new_lesion(ctx, scene, plain))
    scene = scene.with_lesions(lesions)
    if clean:
        scene = scene.with_noise(0.0)
    return scene, render(scene)


def _restore(ctx, degrade_image: Callable, *, texts, description, meta, clean=False) -> TaskItem:
    scene, rendered = _scene(ctx, clean=clean)
    target = rendered.image
    if ctx.modality in GREY_MODALITIES:  # degrade one grey plane so the input stays grey
        image = rgb(degrade_image(np.ascontiguousarray(target[:, :, 0]), ctx.rng))
    else:
        image = degrade_image(target, ctx.rng)
    return _item(ctx, scene, image, target, texts, description, meta)


def _restore_raw(ctx, degrade_raw: Callable, *, texts, description, meta) -> TaskItem:
    scene, rendered = _scene(ctx)
    raw, (low, high) = _hu(rendered)
    image = rgb(degrade.to_display(degrade_raw(raw, ctx.rng), low, high))
    return _item(ctx, scene, image, rendered.image, texts, description, meta)


def _hu(rendered: Rendered) -> tuple[np.ndarray, tuple[float, float]]:
    """The raw image of a grey render and its display range (CT renders always carry them)."""
    if rendered.raw is None or rendered.display is None:
        raise TypeError("a raw-unit task needs a grey modality render with raw values")
    return rendered.raw, rendered.display


def _super_resolution(ctx: TaskContext, factor: int) -> TaskItem:
    return _restore(
        ctx, lambda img, rng: degrade.downsample(img, factor), clean=True,
        texts=[f"Sharpen this image: restore the detail lost to {factor}x downsampling.",
               f"Super-resolve this image by a factor of {factor}.",
               f"Recover the full-resolution {{phrase}} from this {factor}x upsampled version.",
               f"Increase the resolution of this image {factor}x, restoring fine structures."],
        description=f"Restore full resolution: the image was area-averaged down by {factor}x "
        f"and enlarged back to the same size with bicubic interpolation; recover the original "
        "fine detail.", meta={"sr_factor": factor, "sr_input": "bicubic-upsampled, same size"},
    )  # fmt: skip


def _item(ctx, scene: Scene, image, target, texts, description, meta) -> TaskItem:
    _, phrase = modality_text(ctx.modality)
    texts = [t.replace("{phrase}", phrase) for t in texts]
    return TaskItem(
        input=np.ascontiguousarray(image), target=target, mask=None, instruction=texts[0],
        paraphrases=tuple(texts[1:]), description=description, region=region(scene),
        metadata={"scene": scene_meta(scene), **meta},
    )  # fmt: skip
