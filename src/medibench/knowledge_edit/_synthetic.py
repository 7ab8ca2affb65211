"""A synthetic medical VQA edit task set from the built-in suite's scenes (offline, exact).

Each synthetic patient is a procedural scene (:mod:`medibench.synth.scenes`) with one to three
lesions, the first highlighted in a pure colour (red, green or blue; 60% overlay). Three
questions have exact answers: the lesion count (``"one"``..``"three"``), the side of the image
the highlighted lesion is on (``"left"`` / ``"right"``) and the highlight's colour. Patient
``i`` gets one edit, on question ``i mod 3``, whose probes are:

* T0: the question itself (reliability); questions about two other patients (locality).
* T1: the same question on the same scene drawn at another noise level (generality).
* T2: a rephrasing of the question (generality).
* T3: the same question on patients of other modalities: generality when their answer is the
  target, locality otherwise.
* T4: ``G``: the question after a true statement about another finding ("The highlight is
  red. How many lesions ...?"); ``L``: the other two questions on the same image.
* T5: the same question on the patient's follow-up (same anatomy; lesions grown, sometimes one
  more, sometimes another highlight colour): generality when the answer stayed the target,
  locality when the progression changed it.

Every draw comes from a generator seeded by ``(seed, patient)``: the same arguments give
byte-identical images and the same task set.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from medibench.io import encode_image
from medibench.knowledge_edit._tasks import EditRequest, Probe, TaskSet, write_taskset
from medibench.metrics import blend_overlay
from medibench.sources import store_image_cell
from medibench.synth import item_rng
from medibench.synth.scenes import (
    Lesion,
    SceneError,
    lesion_hosts,
    make_scene,
    place_lesion,
    render,
)
from medibench.synth.tasks._common import COLOUR_PREFIXES, lesion_spec

__all__ = ["QUESTIONS", "SYNTH_MODALITIES", "synthetic_taskset"]

SYNTH_MODALITIES = ("ct", "xray", "mri", "dermoscopy", "fundus", "endoscopy")
COUNT_WORDS = ("zero", "one", "two", "three", "four")
COLOURS = ("red", "green", "blue")
#: (attribute, question, rephrasing)
QUESTIONS = (
    ("count", "How many lesions are in this image?",
     "What is the number of lesions in this image?"),
    ("side", "On which side of the image is the highlighted lesion?",
     "Is the highlighted lesion on the left or the right of the image?"),
    ("colour", "What colour is the highlighted lesion?",
     "In which colour is the lesion highlighted?"),
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _Patient:
    index: int
    modality: str
    image: str
    variation: str
    followup: str
    answers: dict[str, str]
    followup_answers: dict[str, str]


def synthetic_taskset(out: str | os.PathLike, n: int, *, seed: int = 0, size: int = 64) -> TaskSet:
    """Write a task set of ``n`` synthetic edits into ``out`` and return it."""
    if n < 1:
        raise ValueError(f"a synthetic task set needs at least 1 edit, got {n}")
    root = Path(out)
    images = root / "images"
    images.mkdir(parents=True, exist_ok=True)
    patients = [_patient(i, seed, size, images) for i in range(n + 2)]
    requests = []
    order = [int(i) for i in item_rng("synthetic-edit-order", seed, n).permutation(n)]
    for position, i in enumerate(order):
        requests.append(_request(patients[i], patients, position, seed))
    return write_taskset(root, requests, sources=["synthetic"], seed=seed,
                         extra={"synthetic": {"n": n, "size": size}})  # fmt: skip


def _request(p: _Patient, patients: list[_Patient], order: int, seed: int) -> EditRequest:
    attr, question, rephrase = QUESTIONS[p.index % 3]
    target = p.answers[attr]
    eid = f"synthetic-{p.index:05d}"
    probes: list[Probe] = []

    def add(kind, tt, image, q, a, **meta) -> None:
        i = sum(1 for x in probes if x.kind == kind and x.task_type == tt)
        probes.append(Probe(f"{eid}/{tt}-{kind}-{i}", kind, tt, image, q, a, meta))

    add("reliability", "T0", p.image, question, target)
    add("generality", "T1", p.variation, question, target, variation="noise")
    add("generality", "T2", p.image, rephrase, target, rephrase="template")
    rng = item_rng("synthetic-probes", seed, p.index)
    others = [o for o in patients if o.index != p.index]
    for o in [o for o in others if o.modality != p.modality][:2]:
        kind = "generality" if o.answers[attr] == target else "locality"
        add(kind, "T3", o.image, question, o.answers[attr], modality=o.modality, patient=o.index)
    other_attr, other_q, _ = QUESTIONS[(p.index + 1) % 3]
    fact = _statement(other_attr, p.answers[other_attr])
    add("generality", "T4", p.image, f"{fact} {question}", target, variant="G")
    for a, q, _ in QUESTIONS:
        if a != attr:
            add("locality", "T4", p.image, q, p.answers[a], variant="L")
    follow = p.followup_answers[attr]
    add("generality" if follow == target else "locality", "T5", p.followup, question, follow)
    for j in rng.choice(len(others), 2, replace=False):
        o = others[int(j)]
        a, q, _ = QUESTIONS[int(rng.integers(3))]
        add("locality", "T0", o.image, q, o.answers[a], patient=o.index)
    return EditRequest(eid, p.image, question, target, "synthetic", order, tuple(probes),
                       {"attribute": attr, "modality": p.modality, "patient": p.index})  # fmt: skip


def _statement(attr: str, answer: str) -> str:
    if attr == "count":
        one = answer == "one"
        return f"There {'is' if one else 'are'} {answer} lesion{'' if one else 's'}."
    if attr == "side":
        return f"The highlighted lesion is on the {answer}."
    return f"The highlight is {answer}."


def _patient(i: int, seed: int, size: int, images: Path) -> _Patient:
    modality = SYNTH_MODALITIES[i % len(SYNTH_MODALITIES)]
    for attempt in range(20):
        rng = item_rng("synthetic-patient", seed, i, attempt)
        try:
            return _draw(i, modality, rng, size, images)
        except SceneError:  # no room for the lesions in this anatomy: another one
            continue
    raise SceneError(f"synthetic patient {i}: no {modality} scene holds its lesions at {size} px")


def _draw(i: int, modality: str, rng: np.random.Generator, size: int, images: Path) -> _Patient:
    scene = make_scene(modality, seed=int(rng.integers(2**31)), size=size, clutter=0.2)
    plain = render(scene)
    hosts = [h for h in lesion_hosts(modality) if h in plain.labels]
    n = int(rng.integers(1, 4))
    lesions: list[Lesion] = []
    for _ in range(n):
        host = hosts[int(rng.integers(len(hosts)))]
        kind, _, contrast = lesion_spec(modality, host, scene.param("variant"))
        if modality in COLOUR_PREFIXES:
            contrast = 0.8
        lesions.append(place_lesion(scene, plain, host=host, radius=0.06 * size, kind=kind,
                                    contrast=contrast, rng=rng, avoid=tuple(lesions)))  # fmt: skip
    colour = COLOURS[int(rng.integers(3))]
    ill = scene.with_lesions(lesions)
    image, answers = _picture(ill, colour, size)
    variation, _ = _picture(ill.with_noise(scene.noise * 2 + 0.5), colour, size)
    grown = [dataclasses.replace(x, radii=(x.radii[0] * 1.25, x.radii[1] * 1.25)) for x in lesions]
    if rng.random() < 0.5 and n < 3:
        host = hosts[int(rng.integers(len(hosts)))]
        kind, _, contrast = lesion_spec(modality, host, scene.param("variant"))
        try:
            grown.append(place_lesion(scene, plain, host=host, radius=0.06 * size, kind=kind,
                                      contrast=0.8 if modality in COLOUR_PREFIXES else contrast,
                                      rng=rng, avoid=tuple(grown), margin=3.0))  # fmt: skip
        except SceneError:
            pass
    new_colour = COLOURS[int(rng.integers(3))] if rng.random() < 0.5 else colour
    follow, follow_answers = _picture(scene.with_lesions(grown), new_colour, size)
    return _Patient(
        i, modality, _store(image, images, f"p{i}"), _store(variation, images, f"p{i}-var"),
        _store(follow, images, f"p{i}-fu"), answers, follow_answers,
    )  # fmt: skip


def _picture(scene, colour: str, size: int) -> tuple[np.ndarray, dict[str, str]]:
    rendered = render(scene)
    mask = rendered.labels["lesion:0"]
    image = blend_overlay(rendered.image, mask, colour)
    col = float(np.nonzero(mask)[1].mean())
    answers = {
        "count": COUNT_WORDS[len(scene.lesions)],
        "side": "right" if col > (size - 1) / 2 else "left",
        "colour": colour,
    }
    return image, answers


def _store(image: np.ndarray, images: Path, name: str) -> str:
    data = encode_image(image, ".png", where=name)
    stored = store_image_cell({"bytes": data, "path": f"{name}.png"}, images, file=images,
                              row=0, column="image")  # fmt: skip
    return stored.relative_to(images.parent).as_posix()
