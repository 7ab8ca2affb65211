"""MedGEN-Bench's judge tier: a per-task checklist, five dimensions and overall, with or without
the ground truth, on its 1-10 scale or the paper's 1-5."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
class MedGenChecklistJudge(JudgeProtocol):
    """MedGEN-Bench's judge tier: checklist, five dimensions and overall, with or without GT."""

    with_gt: bool = True
    scale_max: int = 10

    def skip_reason(self, sample: Sample) -> str | None:
        if sample.metadata.get("format") in ("VQA", "MultimodalGeneration"):
            return "a text answer: judged by medgen-checklist@code (answer_judges.py)"
        return needs_target(sample) if self.with_gt else None

    def images(self, sample: Sample, prediction: Path) -> list[tuple[str, Path]]:
        out = [("input", Path(sample.input)), ("output", prediction)]
        return out + [("reference", target_path(sample))] if self.with_gt else out

    def texts(self, sample: Sample) -> dict[str, str]:
        return {
            "instruction": sample.instruction,
            "task": sample.task or "image editing",
            "modality": sample.modality or "not stated",
        }

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


def checklist() -> MedGenChecklistJudge:
    """``medgen-checklist@1``: with the ground truth, 1-10."""
    return _medgen(True, 10)


def checklist_nogt() -> MedGenChecklistJudge:
    """``medgen-checklist@1-nogt``: without the ground truth, 1-10."""
    return _medgen(False, 10)


def checklist_scale5() -> MedGenChecklistJudge:
    """``medgen-checklist@1-scale5``: with the ground truth, the paper's 1-5."""
    return _medgen(True, 5)


def checklist_scale5_nogt() -> MedGenChecklistJudge:
    """``medgen-checklist@1-scale5-nogt``: without the ground truth, 1-5."""
    return _medgen(False, 5)
