"""Judge protocols: what a judge sees, what it must answer, and which metrics its scores fill.

=============================================  ========================================  =======
judge protocol                                 fills                                      scale
=============================================  ========================================  =======
``medebench-judge@paper-structure``            ``ea``, ``vq`` of medebench@paper, @1      0-10 /10
``medebench-judge@paper-structure-instruction``  the same, shown the plain instruction    0-10 /10
``miedb-rubric@1``                             ``rubric`` of miedb@paper, miedb@1         0-100
``medgen-checklist@1`` (``-nogt``)             the six judged metrics of medgen@code      1-10
``medgen-checklist@1-scale5`` (``-nogt``)      the same on the paper's 1-5 scale          1-5
=============================================  ========================================  =======

A protocol names the images of a call in order (their content hashes go into the cache key),
the texts it fills into its prompt, and builds the chat messages from the image files. Its
required fields are required together (``independent_fields=False``): MedEBench's EA, CP and VQ,
the rubric score, MedGEN's five dimensions and overall fill their metrics only when all of them
parsed from a real score statement; MedGEN's checklist items are optional.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medibench.io import read_image
from medibench.judges._images import collage, file_data_url, png_data_url
from medibench.judges._parsing import ScoreField
from medibench.judges._prompts import PromptFile, load_prompt
from medibench.registry import Registry
from medibench.samples import Perspective, Sample

__all__ = [
    "JUDGES",
    "DEFAULT_JUDGE",
    "JudgeProtocol",
    "MedEBenchJudge",
    "MedGenChecklistJudge",
    "MieDBRubricJudge",
    "Fill",
    "load_judge",
]


@dataclass(frozen=True)
class Fill:
    """Score field ``field`` divided by ``divide_by`` becomes ``metric`` of ``protocol``
    (``"name@version"``)."""

    protocol: str
    metric: str
    field: str
    divide_by: float = 1.0


@dataclass(frozen=True)
class JudgeProtocol:
    """Base of the judge protocols; subclasses define :meth:`images` and :meth:`messages`."""

    name: str
    version: str
    prompt_file: str
    fields: tuple[ScoreField, ...]
    fills: tuple[Fill, ...]
    description: str = ""
    #: free-text JSON keys a structured answer carries besides the scores.
    text_keys: tuple[str, ...] = ()
    #: ``False`` (every built-in protocol): the required fields are asked for together and an
    #: answer fills scores only when all of them parsed (all or nothing). ``True``: each field
    #: is asked for on its own and each valid score fills its metric alone; a protocol that
    #: sets it says so in its description.
    independent_fields: bool = False
    prompt: PromptFile = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt", load_prompt(self.prompt_file))

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def targets(self) -> tuple[str, ...]:
        """The scoring protocols (``name@version``) whose judged metrics this judge fills."""
        return tuple(dict.fromkeys(f.protocol for f in self.fills))

    def skip_reason(self, sample: Sample) -> str | None:
        """Why this judge does not apply to ``sample`` (``None``: it applies)."""
        return None

    def images(self, sample: Sample, prediction: Path) -> list[tuple[str, Path]]:
        """``(role, path)`` of each image the judge sees, in the order it sees them."""
        raise NotImplementedError

    def texts(self, sample: Sample) -> dict[str, str]:
        """The texts filled into the prompt (they go into the cache key)."""
        raise NotImplementedError

    def messages(
        self,
        sample: Sample,
        paths: Sequence[Path],
        *,
        structured: bool,
        max_side: int,
        oversize: str,
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """The chat messages and notes (resizes) for the image files ``paths`` (in the order
        of :meth:`images`)."""
        raise NotImplementedError

    def response_format(self, mode: str) -> dict[str, Any] | None:
        """The ``response_format`` for a server's ``structured_output`` mode."""
        if mode == "json_object":
            return {"type": "json_object"}
        if mode != "json_schema":
            return None
        props: dict[str, Any] = {k: {"type": "string"} for k in self.text_keys}
        for f in self.fields:
            props[f.key] = (
                {"type": "string", "enum": ["yes", "no"]}
                if f.kind == "yes_no"
                else {"type": "integer", "minimum": int(f.lo), "maximum": int(f.hi)}
            )
        return {
            "type": "json_schema",
            "json_schema": {
                "name": self.name.replace("-", "_"),
                "strict": True,
                "schema": {
                    "type": "object",
                    "properties": props,
                    "required": list(props),
                    "additionalProperties": False,
                },
            },
        }

    def _answer_format(self, structured: bool, **values: object) -> str:
        return self.prompt.render("answer_json" if structured else "answer_text", **values)


def _text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def _image(img: np.ndarray | Path, what: str, max_side: int, oversize: str, notes: list[str]):
    if isinstance(img, np.ndarray):
        url, note = png_data_url(img, max_side=max_side, oversize=oversize, what=what)
    else:
        url, note = file_data_url(img, max_side=max_side, oversize=oversize, what=what)
    if note:
        notes.append(note)
    return {"type": "image_url", "image_url": {"url": url}}


def _needs_target(sample: Sample) -> str | None:
    return None if sample.target else "the sample has no ground-truth image"


# -- MedEBench --------------------------------------------------------------------------------
_MEDEBENCH_FIELDS = (
    ScoreField("editing_accuracy", "Editing Accuracy", 0, 10, aliases=("EA",)),
    ScoreField("contextual_preservation", "Contextual Preservation", 0, 10, aliases=("CP",)),
    ScoreField("visual_quality", "Visual Quality", 0, 10, aliases=("VQ",)),
)


@dataclass(frozen=True)
class MedEBenchJudge(JudgeProtocol):
    """MedEBench's judge structure: change text, input, ground truth, edited image, two steps.

    ``shown = "description"`` shows the detailed expected change (``sample.description``, the
    paper's choice; samples without one are skipped with that reason); ``"instruction"`` the
    plain instruction the model got.
    """

    shown: str = "description"

    def skip_reason(self, sample: Sample) -> str | None:
        if self.shown == "description" and not sample.description:
            return "the sample has no description of the expected change"
        return _needs_target(sample)

    def images(self, sample: Sample, prediction: Path) -> list[tuple[str, Path]]:
        return [
            ("input", Path(sample.input)),
            ("target", Path(sample.target)),
            ("edited", prediction),
        ]

    def texts(self, sample: Sample) -> dict[str, str]:
        return {"change": sample.description if self.shown == "description" else sample.instruction}

    def messages(self, sample, paths, *, structured, max_side, oversize):
        notes: list[str] = []
        change = self.prompt.render(f"change_{self.shown}", **self.texts(sample))
        steps = self.prompt.render("steps", answer_format=self._answer_format(structured))
        parts = [_text(change)]
        parts += [
            _image(img, role, max_side, oversize, notes)
            for (role, _), img in zip(self.images(sample, Path()), paths, strict=True)
        ]
        parts.append(_text(steps))
        return [{"role": "user", "content": parts}], notes


def _medebench(shown: str) -> MedEBenchJudge:
    suffix = "" if shown == "description" else "-instruction"
    return MedEBenchJudge(
        name="medebench-judge",
        version=f"paper-structure{suffix}",
        prompt_file="medebench_paper_structure.md",
        fields=_MEDEBENCH_FIELDS,
        fills=tuple(
            Fill(p, m, f, 10.0)
            for p in ("medebench@paper", "medebench@1")
            for m, f in (("ea", "editing_accuracy"), ("vq", "visual_quality"))
        ),
        description=(
            "MedEBench judge structure (change text, input, ground truth, edited; two steps), "
            f"shown the {shown}; EA and VQ 0-10, divided by 10"
        ),
        text_keys=("differences",),
        shown=shown,
    )


# -- MieDB-100k -------------------------------------------------------------------------------
@dataclass(frozen=True)
class MieDBRubricJudge(JudgeProtocol):
    """medibench's 0-100 rubric for MieDB modification samples, on an input|output|target
    collage (the paper's rubric is unpublished; this one is not it)."""

    def skip_reason(self, sample: Sample) -> str | None:
        if sample.perspective is not Perspective.modification:
            return "the rubric judges modification samples only"
        return _needs_target(sample)

    def images(self, sample: Sample, prediction: Path) -> list[tuple[str, Path]]:
        return [
            ("input", Path(sample.input)),
            ("output", prediction),
            ("target", Path(sample.target)),
        ]

    def texts(self, sample: Sample) -> dict[str, str]:
        return {"instruction": sample.instruction}

    def messages(self, sample, paths, *, structured, max_side, oversize):
        notes: list[str] = []
        images = [read_image(p, mode="rgb") for p in paths]
        board = collage(images, ["INPUT", "OUTPUT", "TARGET"])
        task = self.prompt.render(
            "task", answer_format=self._answer_format(structured), **self.texts(sample)
        )
        parts = [_image(board, "collage", max_side, oversize, notes), _text(task)]
        return [{"role": "user", "content": parts}], notes


def _miedb() -> MieDBRubricJudge:
    return MieDBRubricJudge(
        name="miedb-rubric",
        version="1",
        prompt_file="miedb_rubric_v1.md",
        fields=(ScoreField("rubric", "Rubric Score", 0, 100, aliases=("Rubric", "Score")),),
        fills=(Fill("miedb@paper", "rubric", "rubric"), Fill("miedb@1", "rubric", "rubric")),
        description="medibench's 0-100 modification rubric on an input|output|target collage",
        text_keys=("reason",),
    )


# -- MedGEN-Bench -----------------------------------------------------------------------------
_MEDGEN_DIMENSIONS = (
    ("anatomical_accuracy", "Anatomical Accuracy"),
    ("clinical_finding_accuracy", "Clinical Finding Accuracy"),
    ("instruction_compliance", "Instruction Compliance"),
    ("cross_modal_consistency", "Cross-Modal Consistency"),
    ("hallucination_control", "Hallucination Control"),
    ("overall", "Overall"),
)
_MEDGEN_CHECKLIST = (
    ("edit_in_target_region", "Edit In Target Region"),
    ("context_preserved", "Context Preserved"),
    ("no_new_artifacts", "No New Artifacts"),
    ("clinically_plausible", "Clinically Plausible"),
)


@dataclass(frozen=True)
class MedGenChecklistJudge(JudgeProtocol):
    """MedGEN-Bench's judge tier: checklist, five dimensions and overall, with or without GT."""

    with_gt: bool = True
    scale_max: int = 10

    def skip_reason(self, sample: Sample) -> str | None:
        return _needs_target(sample) if self.with_gt else None

    def images(self, sample: Sample, prediction: Path) -> list[tuple[str, Path]]:
        out = [("input", Path(sample.input)), ("output", prediction)]
        return out + [("reference", Path(sample.target))] if self.with_gt else out

    def texts(self, sample: Sample) -> dict[str, str]:
        return {
            "instruction": sample.instruction,
            "task": sample.task or "image editing",
            "modality": sample.modality or "not stated",
        }

    def messages(self, sample, paths, *, structured, max_side, oversize):
        notes: list[str] = []
        roles = [r for r, _ in self.images(sample, Path())]
        parts = [_image(p, r, max_side, oversize, notes) for r, p in zip(roles, paths, strict=True)]
        intro = self.prompt.render("images_with_gt" if self.with_gt else "images_without_gt")
        task = self.prompt.render(
            "task",
            scale_max=self.scale_max,
            reference_hint=" (compare with REFERENCE)" if self.with_gt else "",
            answer_format=self._answer_format(structured, scale_max=self.scale_max),
            **self.texts(sample),
        )
        parts.append(_text(intro + "\n\n" + task))
        return [{"role": "user", "content": parts}], notes


def _medgen(with_gt: bool, scale_max: int) -> MedGenChecklistJudge:
    version = "1" + ("-scale5" if scale_max == 5 else "") + ("" if with_gt else "-nogt")
    fields = tuple(ScoreField(k, label, 1, scale_max) for k, label in _MEDGEN_DIMENSIONS)
    fields += tuple(
        ScoreField(k, label, 0, 1, required=False, kind="yes_no") for k, label in _MEDGEN_CHECKLIST
    )
    return MedGenChecklistJudge(
        name="medgen-checklist",
        version=version,
        prompt_file="medgen_checklist_v1.md",
        fields=fields,
        fills=tuple(Fill("medgen@code", k, k) for k, _ in _MEDGEN_DIMENSIONS),
        description=(
            f"MedGEN-Bench checklist, five dimensions + overall 1-{scale_max}, "
            + ("with" if with_gt else "without")
            + " the ground truth"
        ),
        with_gt=with_gt,
        scale_max=scale_max,
    )


JUDGES: Registry[JudgeProtocol] = Registry("judge protocol")
for _spec, _factory in (
    ("medebench-judge@paper-structure", lambda: _medebench("description")),
    ("medebench-judge@paper-structure-instruction", lambda: _medebench("instruction")),
    ("miedb-rubric@1", _miedb),
    ("medgen-checklist@1", lambda: _medgen(True, 10)),
    ("medgen-checklist@1-nogt", lambda: _medgen(False, 10)),
    ("medgen-checklist@1-scale5", lambda: _medgen(True, 5)),
    ("medgen-checklist@1-scale5-nogt", lambda: _medgen(False, 5)),
):
    JUDGES.register(_spec, _factory, help=_factory().description)

#: The judge protocol used for a scoring protocol's judged metrics when none is named.
DEFAULT_JUDGE = {
    "medebench": "medebench-judge@paper-structure",
    "miedb": "miedb-rubric@1",
    "medgen": "medgen-checklist@1",
}


def load_judge(spec: str) -> JudgeProtocol:
    """A judge protocol by ``name@version``, or the default judge of a scoring protocol name
    (``"medebench"``, ``"medebench@paper"``, ``"miedb@1"``, ...)."""
    base = spec.split("@", 1)[0]
    if spec not in JUDGES.names() and base in DEFAULT_JUDGE:
        spec = DEFAULT_JUDGE[base]
    return JUDGES.create(spec)
