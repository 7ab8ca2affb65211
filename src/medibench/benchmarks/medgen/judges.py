"""MedGEN-Bench's judge tier: a per-task checklist, five dimensions and overall, with or without
the ground truth, on its 1-10 scale or the paper's 1-5."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Self

from medibench.judges import Fill, JudgeProtocol, ScoreField
from medibench.judges._protocols import image_part, needs_target, target_path, text_part
from medibench.samples import Sample

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
class MedGenJudge(JudgeProtocol):
    """What MedGEN-Bench's judges share: the five dimensions and overall on 1-``scale_max``,
    shown the ground truth or not (``with_gt``), and the sample's instruction, task and
    modality in the prompt."""

    with_gt: bool = True
    scale_max: int = 10

    @classmethod
    def scoring_dimensions(
        cls,
        about: str,
        version: str,
        prompt_file: str,
        *,
        with_gt: bool,
        scale_max: int,
        fill_suffix: str = "",
        extra_fields: tuple[ScoreField, ...] = (),
    ) -> Self:
        """A ``medgen-checklist@version`` judge whose dimensions fill ``medgen@code``'s metrics
        of the same name (+ ``fill_suffix``); ``about`` opens its description."""
        fields = tuple(ScoreField(k, label, 1, scale_max) for k, label in _MEDGEN_DIMENSIONS)
        return cls(
            name="medgen-checklist",
            version=version,
            prompt_file=prompt_file,
            fields=fields + extra_fields,
            fills=tuple(Fill("medgen@code", k + fill_suffix, k) for k, _ in _MEDGEN_DIMENSIONS),
            description=(
                f"{about}, five dimensions + overall 1-{scale_max}, "
                + ("with" if with_gt else "without")
                + " the ground truth"
            ),
            with_gt=with_gt,
            scale_max=scale_max,
        )

    def texts(self, sample: Sample) -> dict[str, str]:
        return {
            "instruction": sample.instruction,
            "task": sample.task or "image editing",
            "modality": sample.modality or "not stated",
        }


@dataclass(frozen=True)
class MedGenChecklistJudge(MedGenJudge):
    """MedGEN-Bench's judge tier: checklist, five dimensions and overall, with or without GT."""

    def skip_reason(self, sample: Sample) -> str | None:
        if sample.metadata.get("format") in ("VQA", "MultimodalGeneration"):
            return "a text answer: judged by medgen-checklist@code (answer_judges.py)"
        return needs_target(sample) if self.with_gt else None

    def images(self, sample: Sample, prediction: Path) -> list[tuple[str, Path]]:
        out = [("input", Path(sample.input)), ("output", prediction)]
        return out + [("reference", target_path(sample))] if self.with_gt else out

    def messages(self, sample, paths, *, structured, max_side, oversize):  # as JudgeProtocol
        notes = []  # resize notes
        roles = [r for r, _ in self.images(sample, Path())]
        parts = [
            image_part(p, r, max_side, oversize, notes) for r, p in zip(roles, paths, strict=True)
        ]
        intro = self.prompt.render("images_with_gt" if self.with_gt else "images_without_gt")
        task = self.prompt.render(
            "task",
            scale_max=self.scale_max,
            reference_hint=" (compare with REFERENCE)" if self.with_gt else "",
            answer_format=self._answer_format(structured, scale_max=self.scale_max),
            **self.texts(sample),
        )
        parts.append(text_part(intro + "\n\n" + task))
        return [{"role": "user", "content": parts}], notes


def _medgen(with_gt: bool, scale_max: int) -> MedGenChecklistJudge:
    version = "1" + ("-scale5" if scale_max == 5 else "") + ("" if with_gt else "-nogt")
    checklist = tuple(
        ScoreField(k, label, 0, 1, required=False, kind="yes_no") for k, label in _MEDGEN_CHECKLIST
    )
    return MedGenChecklistJudge.scoring_dimensions(
        "MedGEN-Bench checklist", version, "medgen_checklist_v1.md",
        with_gt=with_gt, scale_max=scale_max, extra_fields=checklist,
    )  # fmt: skip


#: ``medgen-checklist@1``: with the ground truth, 1-10.
checklist = partial(_medgen, True, 10)
#: ``medgen-checklist@1-nogt``: without the ground truth, 1-10.
checklist_nogt = partial(_medgen, False, 10)
#: ``medgen-checklist@1-scale5``: with the ground truth, the paper's 1-5.
checklist_scale5 = partial(_medgen, True, 5)
#: ``medgen-checklist@1-scale5-nogt``: without the ground truth, 1-5.
checklist_scale5_nogt = partial(_medgen, False, 5)
