"""Transformation tasks: restore a degraded image, or re-display a CT in a named window.

The target is a render of the scene; the input is that render degraded by a function of
:mod:`medibench.synth.degrade` (raw-unit degradations act on ``Rendered.raw`` and are mapped back
with the scene's display range). No mask: the whole image is the region of interest.

Where the degradation destroys fine detail (denoising, deblurring, super-resolution) the target is
the noise-free render (``scene.with_noise(0)``): acquisition noise cannot be predicted, so it is
not asked for. Elsewhere (low-dose CT, artefacts, bias field, windowing, contrast) the target keeps
the scene's own noise: low-dose CT asks for the full-dose image, the others for the image without
the artefact. Degradation strengths scale with the difficulty's ``severity``.

The restorations are one table (:data:`_RESTORATIONS`) of :class:`_Restoration` rows; the windows
are one task per :data:`~medibench.synth.degrade.CT_WINDOWS` entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from medibench.synth import degrade
from medibench.synth.scenes import GREY_MODALITIES, Lesion, Rendered, Scene, render
from medibench.synth.tasks import _draws as draws
from medibench.synth.tasks._base import TaskContext, TaskItem, TaskRow, register_tasks
from medibench.synth.tasks._common import ALL_MODALITIES, new_scene, rgb, scene_meta, task_item

_CT = tuple(m for m in ALL_MODALITIES if m.startswith("ct"))
_MR = tuple(m for m in ALL_MODALITIES if m.startswith("mri"))
_PHOTON = tuple(m for m in ALL_MODALITIES if not m.startswith("mri"))
_CT_NOISE_HU = 12.0  # full-dose CT noise of the scenes at noise 1 (scenes/ct.py)

Params = dict[str, Any]


@dataclass(frozen=True)
class _Restoration:
    """A restoration task: undo ``degrade`` on a render of the scene.

    ``draw(ctx)`` gives the task's parameters (the item's first draws; they are its metadata),
    ``degrade(ctx, params, image, rng)`` the input from the target (the display image, a grey
    plane for grey modalities, or for ``target="raw"`` the raw units), ``describe(params)`` the
    exact change asked for. ``target``: ``"clean"`` the noise-free render, ``"noisy"`` the
    render with the scene's noise, ``"raw"`` that render, degraded in raw units.
    """

    name: str
    modalities: tuple[str, ...]
    summary: str
    target: Literal["clean", "noisy", "raw"]
    draw: Callable[[TaskContext], Params]
    degrade: Callable[[TaskContext, Params, np.ndarray, np.random.Generator], np.ndarray]
    texts: tuple[str, ...]
    describe: Callable[[Params], str]

    def make(self, ctx: TaskContext) -> TaskItem:
        params = self.draw(ctx)
        scene, rendered = _scene(ctx, clean=self.target == "clean")
        target = rendered.image
        if self.target == "raw":
            raw, (low, high) = _hu(rendered)
            image = rgb(degrade.to_display(self.degrade(ctx, params, raw, ctx.rng), low, high))
        elif ctx.modality in GREY_MODALITIES:  # degrade one grey plane so the input stays grey
            plane = np.ascontiguousarray(target[:, :, 0])
            image = rgb(self.degrade(ctx, params, plane, ctx.rng))
        else:
            image = self.degrade(ctx, params, target, ctx.rng)
        return _item(ctx, scene, image, target, self.texts, self.describe(params), params)

    def row(self) -> TaskRow:
        return (self.name, self.modalities, self.summary, self.make)


def _super_resolution(factor: int) -> _Restoration:
    return _Restoration(
        f"super-resolution-{factor}x", ALL_MODALITIES,
        f"restore detail lost to {factor}x downsampling", "clean",
        lambda ctx: {"sr_factor": factor, "sr_input": "bicubic-upsampled, same size"},
        lambda ctx, p, img, rng: degrade.downsample(img, p["sr_factor"]),
        (f"Sharpen this image: restore the detail lost to {factor}x downsampling.",
         f"Super-resolve this image by a factor of {factor}.",
         f"Recover the full-resolution {{phrase}} from this {factor}x upsampled version.",
         f"Increase the resolution of this image {factor}x, restoring fine structures."),
        lambda p: f"Restore full resolution: the image was area-averaged down by {factor}x "
        f"and enlarged back to the same size with bicubic interpolation; recover the original "
        "fine detail.",
    )  # fmt: skip


def _denoise(
    name: str,
    modalities: tuple[str, ...],
    summary: str,
    add_noise: Callable[[np.ndarray, float, np.random.Generator], np.ndarray],
    sigmas: tuple[float, float],
    texts: tuple[str, ...],
    describe: Callable[[Params], str],
) -> _Restoration:
    """A denoising row: ``add_noise(image, sigma, rng)`` of a ``noise_sigma`` (grey levels) drawn
    uniformly from ``sigmas`` and scaled by the severity; the target is the noise-free render."""
    return _Restoration(
        name, modalities, summary, "clean",
        lambda ctx: {"noise_sigma": float(ctx.rng.uniform(*sigmas)) * ctx.difficulty.severity},
        lambda ctx, p, img, rng: add_noise(img, p["noise_sigma"], rng),
        texts, describe,
    )  # fmt: skip


#: The restoration tasks, in suite order (each row's draws, texts and description).
_RESTORATIONS: tuple[_Restoration, ...] = (
    _denoise(
        "denoise-gaussian", ALL_MODALITIES, "remove additive Gaussian noise",
        degrade.add_gaussian_noise, (10.0, 18.0),
        ("Denoise this image.", "Remove the noise from this {phrase}.",
         "Suppress the Gaussian noise while keeping edges and anatomy intact.",
         "Make this {phrase} less noisy."),
        lambda p: f"Remove additive Gaussian noise (standard deviation {p['noise_sigma']:.1f} "
        "grey levels, independent per pixel) and restore the clean image; anatomy, edges and "
        "contrast stay as they are.",
    ),
    _Restoration(
        "denoise-poisson", _PHOTON, "remove photon (shot) noise of a low photon count", "clean",
        lambda ctx: {"photons_at_white":
                     float(ctx.rng.uniform(40.0, 80.0)) / ctx.difficulty.severity**2},
        lambda ctx, p, img, rng: degrade.add_poisson_noise(img, p["photons_at_white"], rng),
        ("Denoise this image.", "Remove the quantum (photon) noise from this {phrase}.",
         "Reduce the shot noise of this low-count acquisition.",
         "Clean up the grainy photon noise without blurring the anatomy."),
        lambda p: f"Remove Poisson photon noise (about {p['photons_at_white']:.0f} photons at "
        "white: the noise grows with the square root of the brightness) and restore the clean "
        "image.",
    ),
    _denoise(
        "denoise-rician", _MR, "remove Rician (MR magnitude) noise",
        degrade.add_rician_noise, (8.0, 15.0),
        ("Denoise this image.", "Remove the Rician noise from this MR magnitude image.",
         "Reduce the MR noise, including the noise floor in the dark background.",
         "Make this {phrase} less noisy without losing grey-white contrast."),
        lambda p: "Remove Rician noise (magnitude of complex Gaussian noise, sigma "
        f"{p['noise_sigma']:.1f} grey levels, which also lifts the dark background) and restore "
        "the clean image.",
    ),
    _Restoration(
        "low-dose-ct", _CT, "restore the full-dose CT from a simulated low-dose acquisition",
        "raw",
        lambda ctx: {
            "dose_fraction":
                float(np.clip(ctx.rng.uniform(0.1, 0.25) / ctx.difficulty.severity, 0.02, 0.5)),
            "full_dose_sigma_hu": _CT_NOISE_HU * max(ctx.difficulty.noise, 0.25),
        },
        lambda ctx, p, raw, rng: degrade.low_dose_noise(
            raw, p["dose_fraction"], rng, full_dose_sigma=p["full_dose_sigma_hu"]),
        ("Denoise this low-dose CT.", "Turn this low-dose CT into a full-dose image.",
         "Remove the extra quantum noise of the reduced-dose acquisition.",
         "Reduce the noise of this low-dose scan to full-dose quality."),
        lambda p: "Restore the full-dose image from a CT acquired at "
        f"{p['dose_fraction']:.0%} of the dose (noise "
        f"{p['full_dose_sigma_hu'] / np.sqrt(p['dose_fraction']):.0f} HU instead of "
        f"{p['full_dose_sigma_hu']:.0f} HU, spatially correlated); the full-dose noise itself "
        "stays.",
    ),
    _Restoration(
        "deblur", ALL_MODALITIES, "undo a Gaussian blur", "clean",
        lambda ctx: {"blur_sigma_px":
                     float(ctx.rng.uniform(1.5, 2.5)) * ctx.difficulty.severity * ctx.size / 256},
        lambda ctx, p, img, rng: degrade.gaussian_blur(img, p["blur_sigma_px"]),
        ("Deblur this image.", "Remove the blur and restore sharp edges.",
         "Sharpen this blurred {phrase} back to full detail.",
         "Undo the Gaussian blurring without adding noise."),
        lambda p: f"Undo a Gaussian blur of sigma {p['blur_sigma_px']:.2f} px and restore sharp "
        "edges and fine detail without adding noise or changing the anatomy.",
    ),
    _super_resolution(2),
    _super_resolution(4),
    _Restoration(
        "mr-motion-correction", _MR,
        "remove ghosting from patient motion during an MR acquisition", "noisy",
        lambda ctx: {
            "corrupted_line_fraction":
                float(np.clip(ctx.rng.uniform(0.2, 0.35) * ctx.difficulty.severity, 0.05, 0.9)),
            "max_shift_px": float(ctx.rng.uniform(2.0, 4.0)) * ctx.size / 256,
        },
        lambda ctx, p, img, rng: degrade.mr_motion_artefact(
            img, rng, fraction=p["corrupted_line_fraction"], max_shift_px=p["max_shift_px"]),
        ("Remove the motion artefact.", "Correct the motion ghosting in this MR image.",
         "Suppress the ghost replicas along the phase-encode direction.",
         "Undo the blurring and ghosting caused by patient movement."),
        lambda p: f"Remove motion ghosting: {p['corrupted_line_fraction']:.0%} of the k-space "
        "lines (phase encoding along the image rows) were acquired with the head shifted by up "
        f"to {p['max_shift_px']:.1f} px; restore the motion-free image.",
    ),
    _Restoration(
        "ring-artefact-removal", _CT, "remove CT ring artefacts (concentric rings)", "raw",
        lambda ctx: {
            "n_rings": int(ctx.rng.integers(3, 7)),
            "amplitude_hu": float(ctx.rng.uniform(40.0, 70.0)) * ctx.difficulty.severity,
        },
        lambda ctx, p, raw, rng: degrade.ring_artefact(
            raw, rng, n_rings=p["n_rings"], amplitude=p["amplitude_hu"],
            width_px=max(1.0, ctx.size / 256)),
        ("Remove the ring artefact.", "Remove the concentric ring artefacts from this CT.",
         "Correct the detector ring artefacts around the centre of the slice.",
         "Clean up the circular bands without touching the anatomy."),
        lambda p: f"Remove {p['n_rings']} concentric ring artefacts (up to "
        f"{p['amplitude_hu']:.0f} HU, centred on the image centre) and restore the slice "
        "without them.",
    ),
    _Restoration(
        "streak-artefact-removal", _CT, "remove CT streak artefacts (bright and dark bands)",
        "raw",
        lambda ctx: {
            "n_streaks": int(ctx.rng.integers(4, 9)),
            "amplitude_hu": float(ctx.rng.uniform(60.0, 110.0)) * ctx.difficulty.severity,
        },
        lambda ctx, p, raw, rng: degrade.streak_artefact(
            raw, rng, n_streaks=p["n_streaks"], amplitude=p["amplitude_hu"],
            width_px=1.5 * ctx.size / 256),
        ("Remove the streak artefacts.", "Remove the bright and dark streaks from this CT.",
         "Correct the streak artefacts radiating across the slice.",
         "Clean up the straight bands that cross the anatomy."),
        lambda p: f"Remove {p['n_streaks']} straight streak artefacts (alternately bright and "
        f"dark, up to {p['amplitude_hu']:.0f} HU, radiating from one point) and restore the "
        "slice without them.",
    ),
    _Restoration(
        "bias-field-correction", _MR, "correct a smooth multiplicative intensity inhomogeneity",
        "noisy",
        lambda ctx: {"bias_strength":
                     float(ctx.rng.uniform(0.25, 0.4)) * ctx.difficulty.severity},
        lambda ctx, p, img, rng: degrade.add_bias_field(img, rng, strength=p["bias_strength"]),
        ("Correct the bias field.", "Remove the intensity inhomogeneity from this MR image.",
         "Even out the smooth shading so the same tissue has the same brightness everywhere.",
         "Apply bias-field correction to this {phrase}."),
        lambda p: "Remove a smooth multiplicative bias field (gain between "
        f"{np.exp(-p['bias_strength']):.2f} and {np.exp(p['bias_strength']):.2f}, varying over "
        "about a quarter of the image) so each tissue has one brightness.",
    ),
    _Restoration(
        "enhance-contrast", ALL_MODALITIES, "restore the contrast of a flattened image", "noisy",
        lambda ctx: {"contrast_factor":
                     float(np.clip(ctx.rng.uniform(0.35, 0.55) / ctx.difficulty.severity,
                                   0.1, 0.9))},
        lambda ctx, p, img, rng: degrade.reduce_contrast(img, p["contrast_factor"]),
        ("Enhance the contrast of this image.", "Increase the contrast of this {phrase}.",
         "Restore the full tissue contrast of this washed-out image.",
         "Make the tissues easier to tell apart by boosting the contrast."),
        lambda p: "Restore the full contrast: deviations from the mean brightness were scaled by "
        f"{p['contrast_factor']:.2f}; scale them back so tissues are clearly distinguished.",
    ),
)  # fmt: skip


def _window(name: str) -> TaskRow:
    """The task re-displaying a CT in the window ``name`` of ``degrade.CT_WINDOWS``."""
    level, width = degrade.CT_WINDOWS[name]

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
            (f"Apply the {name} window.", f"Display this CT in a {name} window "
             f"(level {level:g}, width {width:g}).",
             f"Re-window the slice to {name} settings: W {width:g} / L {level:g} HU.",
             f"Show this {{phrase}} with the standard {name} window."),
            f"Re-display the slice in the {name} window: HU {want[0]:g} to {want[1]:g} map "
            f"linearly to black to white (level {level:g}, width {width:g}), clipped outside; the "
            f"input shows the {shown} window (HU {windows[shown][0]:g} to {windows[shown][1]:g}).",
            {"window": name, "window_level_width": [level, width], "input_window": shown,
             "input_display": [float(v) for v in windows[shown]]},
        )  # fmt: skip

    what = f"re-display the CT in the {name} window (level {level:g} / width {width:g} HU)"
    return (f"window-{name.replace(' ', '-')}", _CT, what, make)


# --- helpers ---------------------------------------------------------------------------------


def _scene(ctx: TaskContext, *, clean: bool = False) -> tuple[Scene, Rendered]:
    """A scene with one lesion half of the time (from the item's rng), and its render."""
    scene, plain = new_scene(ctx)
    lesions: list[Lesion] = []
    if ctx.rng.random() < 0.5:
        lesions.append(draws.new_lesion(ctx, scene, plain))
    scene = scene.with_lesions(lesions)
    if clean:
        scene = scene.with_noise(0.0)
    return scene, render(scene)


def _hu(rendered: Rendered) -> tuple[np.ndarray, tuple[float, float]]:
    """The raw image of a grey render and its display range (CT renders always carry them)."""
    if rendered.raw is None or rendered.display is None:
        raise TypeError("a raw-unit task needs a grey modality render with raw values")
    return rendered.raw, rendered.display


def _item(ctx, scene: Scene, image, target, texts, description, meta) -> TaskItem:
    metadata = {"scene": scene_meta(scene), **meta}
    texts = list(texts)
    return task_item(ctx, scene, np.ascontiguousarray(image), target, None, texts, description,
                     metadata)  # fmt: skip


# --- the family, in suite order ----------------------------------------------------------------

register_tasks("transformation", [
    *(r.row() for r in _RESTORATIONS), *(_window(name) for name in degrade.CT_WINDOWS),
])  # fmt: skip
