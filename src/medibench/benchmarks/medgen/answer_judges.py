"""MedGEN-Bench's judge for all three formats, as its evaluation code asks it.

=======================================  =====================================  =======
judge protocol                           fills (of ``medgen@code``)             scale
=======================================  =====================================  =======
``medgen-checklist@code``                the six judged metrics                 1-10
``medgen-checklist@code-nogt``           the same six, ``_nogt`` (reference-    1-10
                                         free: the pairing-sensitivity score)
``medgen-checklist@paper``               the six judged metrics                 1-5
``medgen-checklist@paper-nogt``          the six ``_nogt`` metrics              1-5
=======================================  =====================================  =======

What the judge is shown follows ``eval.py``: a VQA answer with the input image (and, with the
ground truth, the reference text); a generation or editing answer with the ground-truth and
generated images (with GT) or the input and output images (without GT). Every view gets the
instruction, the model's text answer and the checklist of the record's format (the code's
``TASK_JUDGE_CHECKLISTS``: vqa, image_edit, multimodal_generation). The five dimensions and
overall are required together (all or nothing); the prompt is medibench's wording
(``medgen_checklist_code.md``). The answer's text file is one of the hashed inputs, so a
changed answer is a new cache key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from medibench.benchmarks.medgen.judges import MedGenJudge
from medibench.judges._protocols import image_part, text_part
from medibench.samples import Sample

__all__ = ["MedGenAnswerJudge", "code", "code_nogt", "paper", "paper_nogt"]

_ANSWER = "answer"
_CHECKLIST = {"VQA": "checklist_vqa", "MultimodalGeneration": "checklist_generation"}
_LABELS = {
    "input": "INPUT (the image given to the model)",
    "output": "OUTPUT (the image the model made)",
    "reference": "GROUND TRUTH (the expected image)",
}


@dataclass(frozen=True)
class MedGenAnswerJudge(MedGenJudge):
    """The code's judge for VQA, generation and editing answers (module docstring)."""

    def skip_reason(self, sample: Sample) -> str | None:
        expected = sample.metadata.get("expected") or {}
        if self.with_gt and not (expected.get("text") or sample.target):
            return "the sample has no ground truth"
        return None

    def images(self, sample: Sample, prediction: Path) -> list[tuple[str, Path]]:
        fmt = sample.metadata.get("format")
        text = prediction.with_suffix(".txt")
        png = prediction.with_suffix(".png")
        answer = [(_ANSWER, text)] if text.is_file() or fmt == "VQA" else []
        if fmt == "VQA":
            sheet = sample.metadata.get("contact_sheet")
            return [("input", Path(sheet or sample.input)), *answer]
        shown = [("input", Path(sample.input))]
        if self.with_gt and sample.target:
            shown = [("reference", Path(sample.target))]
        if png.is_file() or prediction.suffix.lower() != ".txt":
            shown.append(("output", png if png.is_file() else prediction))
        return [*shown, *answer]

    def texts(self, sample: Sample) -> dict[str, str]:
        expected = sample.metadata.get("expected") or {}
        texts = super().texts(sample)
        if self.with_gt:
            texts["reference"] = str(expected.get("text") or sample.description or "")
        return texts

    def messages(
        self, sample: Sample, paths: Sequence[Path], *,
        structured: bool, max_side: int, oversize: str,
    ) -> tuple[list[dict[str, Any]], list[str]]:  # fmt: skip
        notes: list[str] = []
        roles = [r for r, _ in self.images(sample, Path(paths[-1]))]
        parts, response = [], "(no text answer)"
        for role, path in zip(roles, paths, strict=True):
            if role == _ANSWER:
                response = Path(path).read_text(encoding="utf-8").strip() or "(empty)"
            else:
                parts.append(image_part(path, role, max_side, oversize, notes))
        shown = ", ".join(_LABELS[r] for r in roles if r != _ANSWER) or "no image"
        view = "intro_with_gt" if self.with_gt else "intro_without_gt"
        gt_clause = " and consistent with the ground truth" if self.with_gt else ""
        section = _CHECKLIST.get(sample.metadata.get("format") or "", "checklist_edit")
        texts = self.texts(sample)
        reference = texts.pop("reference", "")
        task = self.prompt.render(
            "task",
            reference=f"Ground-truth answer:\n{reference}\n" if self.with_gt else "",
            response=response,
            checklist=self.prompt.render(section, gt_clause=gt_clause),
            scale_max=self.scale_max,
            answer_format=self._answer_format(structured, scale_max=self.scale_max),
            **texts,
        )
        parts.append(text_part(self.prompt.render(view, shown=shown) + "\n\n" + task))
        return [{"role": "user", "content": parts}], notes


def _judge(with_gt: bool, scale_max: int) -> MedGenAnswerJudge:
    version = ("code" if scale_max == 10 else "paper") + ("" if with_gt else "-nogt")
    return MedGenAnswerJudge.scoring_dimensions(
        "MedGEN-Bench's code judge, all formats", version, "medgen_checklist_code.md",
        with_gt=with_gt, scale_max=scale_max, fill_suffix="" if with_gt else "_nogt",
    )  # fmt: skip


#: ``medgen-checklist@code``: with the ground truth, 1-10.
code = partial(_judge, True, 10)
#: ``medgen-checklist@code-nogt``: without the ground truth, 1-10.
code_nogt = partial(_judge, False, 10)
#: ``medgen-checklist@paper``: with the ground truth, the paper's 1-5.
paper = partial(_judge, True, 5)
#: ``medgen-checklist@paper-nogt``: without the ground truth, 1-5.
paper_nogt = partial(_judge, False, 5)
