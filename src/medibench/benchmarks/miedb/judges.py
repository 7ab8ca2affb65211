"""medibench's 0-100 rubric for MieDB-100k modification samples (the paper's rubric is
unpublished: this one is not it), judged on an input|output|target collage."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from medibench.io import read_image
from medibench.judges import Fill, JudgeProtocol, ScoreField
from medibench.judges._images import collage
from medibench.judges._protocols import image_part, needs_target, target_path, text_part
from medibench.samples import Perspective, Sample


@dataclass(frozen=True)
class MieDBRubricJudge(JudgeProtocol):
    """medibench's 0-100 rubric for MieDB modification samples, on an input|output|target
    collage (the paper's rubric is unpublished; this one is not it)."""

    def skip_reason(self, sample: Sample) -> str | None:
        if sample.perspective is not Perspective.modification:
            return "the rubric judges modification samples only"
        return needs_target(sample)

    def images(self, sample: Sample, prediction: Path) -> list[tuple[str, Path]]:
        return [
            ("input", Path(sample.input)),
            ("output", prediction),
            ("target", target_path(sample)),
        ]

    def texts(self, sample: Sample) -> dict[str, str]:
        return {"instruction": sample.instruction}

    def messages(self, sample, paths, *, structured, max_side, oversize):  # as JudgeProtocol
        notes = []  # resize notes
        images = [read_image(p, mode="rgb") for p in paths]
        board = collage(images, ["INPUT", "OUTPUT", "TARGET"])
        task = self.prompt.render(
            "task", answer_format=self._answer_format(structured), **self.texts(sample)
        )
        parts = [image_part(board, "collage", max_side, oversize, notes), text_part(task)]
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


def rubric() -> MieDBRubricJudge:
    """``miedb-rubric@1``."""
    return _miedb()
