"""MedEBench's judge: the change text, input, ground truth and edited image, then two steps
(list the differences, then score EA, CP and VQ 0-10); EA and VQ fill ``ea`` and ``vq``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from medibench.judges import Fill, JudgeProtocol, ScoreField
from medibench.judges._protocols import image_part, needs_target, target_path, text_part
from medibench.samples import Sample

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
        return needs_target(sample)

    def images(self, sample: Sample, prediction: Path) -> list[tuple[str, Path]]:
        return [
            ("input", Path(sample.input)),
            ("target", target_path(sample)),
            ("edited", prediction),
        ]

    def texts(self, sample: Sample) -> dict[str, str]:
        shown = sample.description if self.shown == "description" else sample.instruction
        return {"change": shown or ""}

    def messages(self, sample, paths, *, structured, max_side, oversize):  # as JudgeProtocol
        notes = []  # resize notes
        change = self.prompt.render(f"change_{self.shown}", **self.texts(sample))
        steps = self.prompt.render("steps", answer_format=self._answer_format(structured))
        parts = [text_part(change)]
        parts += [
            image_part(img, role, max_side, oversize, notes)
            for (role, _), img in zip(self.images(sample, Path()), paths, strict=True)
        ]
        parts.append(text_part(steps))
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


def paper_structure() -> MedEBenchJudge:
    """``medebench-judge@paper-structure``: shown the detailed expected change."""
    return _medebench("description")


def paper_structure_instruction() -> MedEBenchJudge:
    """``medebench-judge@paper-structure-instruction``: shown the plain instruction."""
    return _medebench("instruction")
