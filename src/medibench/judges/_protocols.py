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

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medibench._benchmark import declared_entries, registry_from_benchmarks
from medibench.judges._images import file_data_url, png_data_url
from medibench.judges._parsing import ScoreField
from medibench.judges._prompts import PromptFile, load_prompt
from medibench.registry import Registry
from medibench.samples import Sample

__all__ = [
    "JUDGES",
    "DEFAULT_JUDGE",
    "JudgeProtocol",
    "Fill",
    "image_part",
    "load_judge",
    "needs_target",
    "prompt_files",
    "target_path",
    "text_part",
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
    #: the package whose folder holds ``prompt_file``; by default the package of the module
    #: that defines the judge class (a benchmark's prompts sit beside its judges).
    prompt_package: str = ""
    #: ``False`` (every built-in protocol): the required fields are asked for together and an
    #: answer fills scores only when all of them parsed (all or nothing). ``True``: each field
    #: is asked for on its own and each valid score fills its metric alone; a protocol that
    #: sets it says so in its description.
    independent_fields: bool = False
    prompt: PromptFile = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        package = self.prompt_package or type(self).__module__.rpartition(".")[0]
        object.__setattr__(self, "prompt", load_prompt(self.prompt_file, package=package))

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


def text_part(t: str) -> dict[str, Any]:
    """A text message part."""
    return {"type": "text", "text": t}


def image_part(
    img: np.ndarray | Path, what: str, max_side: int, oversize: str, notes: list[str]
) -> dict[str, Any]:
    """An ``image_url`` message part for an array or an image file (resized per ``oversize``;
    the resize note goes to ``notes``)."""
    if isinstance(img, np.ndarray):
        url, note = png_data_url(img, max_side=max_side, oversize=oversize, what=what)
    else:
        url, note = file_data_url(img, max_side=max_side, oversize=oversize, what=what)
    if note:
        notes.append(note)
    return {"type": "image_url", "image_url": {"url": url}}


def target_path(sample: Sample) -> Path:
    """The ground-truth image of a sample a judge applies to (:func:`needs_target` said yes)."""
    if sample.target is None:
        raise ValueError(f"sample {sample.sample_id} has no ground-truth image to show the judge")
    return Path(sample.target)


def needs_target(sample: Sample) -> str | None:
    """The skip reason of a judge that needs the ground truth, for a sample without one."""
    return None if sample.target else "the sample has no ground-truth image"


#: Every judge protocol, ``name@version``; filled from the benchmarks on first use.
JUDGES: Registry[JudgeProtocol] = registry_from_benchmarks(
    "judge protocol",
    lambda bench: ((j.spec, make, j.description) for j, make in declared_entries(bench.judges)),
)


def prompt_files() -> list[str]:
    """The prompt files of every registered judge protocol."""
    return sorted({JUDGES.create(spec).prompt.filename for spec in JUDGES.names()})


class _DefaultJudges(Mapping[str, str]):
    """Scoring protocol name -> the judge protocol that fills its judged metrics by default
    (each benchmark's ``default_judge``, for each of its protocols)."""

    def _table(self) -> dict[str, str]:
        from medibench._benchmark import BENCHMARKS

        table: dict[str, str] = {}
        for bench in BENCHMARKS:
            if bench.default_judge:
                for proto in bench.protocol_objects():
                    table.setdefault(proto.name, bench.default_judge)
        return table

    def __getitem__(self, name: str) -> str:
        return self._table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


#: The judge protocol used for a scoring protocol's judged metrics when none is named.
DEFAULT_JUDGE: Mapping[str, str] = _DefaultJudges()


def load_judge(spec: str) -> JudgeProtocol:
    """A judge protocol by ``name@version``, or the default judge of a scoring protocol name
    (``"medebench"``, ``"medebench@paper"``, ``"miedb@1"``, ...)."""
    base = spec.split("@", 1)[0]
    if spec not in JUDGES.names() and base in DEFAULT_JUDGE:
        spec = DEFAULT_JUDGE[base]
    return JUDGES.create(spec)
