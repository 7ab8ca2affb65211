"""Instruction rephrasing by a chat model (``rephrase:`` of SOURCE.yaml), as MieDB-100k's
construction rephrases its prompts with an LLM (Qwen-Max) for linguistic diversity.

After the near-duplicate filter and the split, each distinct template instruction of the kept
samples is sent once with the prompt file ``build_rephrase_v1.md`` (medibench's own: the
paper's request is unpublished), asking for ``n`` rephrasings. The answer is read all or
nothing: one JSON object ``{"rephrasings": [...]}`` of exactly ``n`` non-empty, distinct
strings, each naming every overlay colour the instruction names (a rephrasing that loses the
colour would ask for another target image); anything else is an error naming the sample.

Each sample then gets one rephrasing as its ``instruction``, drawn with a generator seeded by
``(source, "rephrase", sample id, build seed)``; its ``paraphrases`` become the other
rephrasings, the template's instruction, then the other templates; and
``metadata.rephrase`` keeps the template's instruction beside every rephrasing, the one drawn,
the model, endpoint, prompt file and version, the seed and the full answer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from medibench.build._calls import ChatStep, ModelCall, strict_json
from medibench.build._perception import COLOURS, seeded

__all__ = ["PROMPT", "Rephraser", "parse_rephrasings"]

PROMPT = "build_rephrase_v1.md"


def parse_rephrasings(text: str | None, n: int, colours: tuple[str, ...] = ()) -> list[str]:
    """The ``n`` rephrasings of an answer, or :class:`ValueError` saying what is wrong.

    >>> parse_rephrasings('{"rephrasings": ["Tint the liver red.", "Colour the liver red."]}',
    ...                   2, ("red",))
    ['Tint the liver red.', 'Colour the liver red.']
    """
    data = strict_json(text, ("rephrasings",))
    items = data["rephrasings"]
    if not isinstance(items, list) or len(items) != n:
        got = len(items) if isinstance(items, list) else type(items).__name__
        raise ValueError(f"'rephrasings' must be a list of exactly {n} strings, got {got}")
    out = []
    for i, item in enumerate(items, start=1):
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"rephrasing {i} is not a non-empty string ({item!r})")
        for colour in colours:
            if not re.search(rf"\b{colour}\b", item, re.IGNORECASE):
                raise ValueError(f"rephrasing {i} ({item!r}) does not name the colour '{colour}'")
        out.append(item.strip())
    if len(set(out)) != len(out):
        raise ValueError(f"the rephrasings repeat one another: {out}")
    return out


class Rephraser:
    """The rephrasing step of one build folder (module docstring)."""

    def __init__(self, call: ModelCall, folder: Path) -> None:
        self.step = ChatStep("rephrase", call, PROMPT, folder / ".build" / "calls")
        self.n = call.n

    def apply(self, source_name: str, rows: list[dict[str, Any]]) -> dict[str, int]:
        """Rephrase the instructions of sample records ``rows`` in place; returns the counts
        (``samples``, ``instructions`` asked about, calls ``made`` and ``cached``)."""
        groups: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            groups.setdefault(row["instruction"], []).append(row)
        requests, contexts = [], []
        for instruction, members in groups.items():
            colours = _colours(members[0])
            text = self.step.prompt.render("request", instruction=instruction, n=self.n)
            key = self.step.key({"instruction": instruction, "n": self.n})
            others = f" and {len(members) - 1} more with this instruction" if len(members) > 1 \
                else ""  # fmt: skip
            where = f"sample '{members[0]['sample_id']}'{others} (instruction {instruction!r})"
            requests.append((key, [{"role": "user", "content": text}], where))
            contexts.append(colours)

        def read(text: str | None, refused: str | None, i: int) -> list[str]:
            if refused:
                raise ValueError(f"the model refused ({refused})")
            return parse_rephrasings(text, self.n, contexts[i])

        answers = self.step.ask(requests, read)
        for (instruction, members), (rephrasings, record) in zip(
            groups.items(), answers, strict=True
        ):
            for row in members:
                _assign(source_name, row, instruction, rephrasings, record)
        return {"samples": len(rows), "instructions": len(groups), "made": self.step.made,
                "cached": self.step.cached}  # fmt: skip


def _colours(row: dict[str, Any]) -> tuple[str, ...]:
    """The overlay colours a sample's instruction names (perception): each must stay."""
    named = [c for c in row.get("overlay_color") or () if c in COLOURS]
    text = row["instruction"]
    return tuple(c for c in dict.fromkeys(named) if re.search(rf"\b{c}\b", text, re.IGNORECASE))


def _assign(
    source_name: str, row: dict[str, Any], template: str, rephrasings: list[str],
    record: dict[str, Any],
) -> None:  # fmt: skip
    meta = row["metadata"]
    _, rng = seeded(source_name, "rephrase", row["sample_id"], meta.get("build_seed", 0))
    chosen = int(rng.integers(len(rephrasings)))
    others = [r for i, r in enumerate(rephrasings) if i != chosen]
    row["instruction"] = rephrasings[chosen]
    row["paraphrases"] = [*others, template, *row.get("paraphrases", [])]
    meta["rephrase"] = {"template": template, "rephrasings": rephrasings, "chosen": chosen,
                        **record}  # fmt: skip
