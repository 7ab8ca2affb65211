"""docs/models.md's answering conformance table, rendered from the cells the conformance tests
run (``tests/conformance/_matrix.py``).

Run:  python docs/models_matrix.py          # print the table
      python docs/models_matrix.py --write  # rewrite the block in docs/models.md
      python docs/models_matrix.py --check  # exit 1 when docs/models.md's block is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conformance._matrix import (  # noqa: E402
    ANSWERING,
    EDITING,
    FAMILIES,
    NOTES,
    UNIFIED,
    UNIFIED_NOTES,
    cell,
)

DOC = ROOT / "docs" / "models.md"
BEGIN, END = "<!-- conformance:answering -->", "<!-- /conformance:answering -->"
_MARK = {"supported": "yes", "not tested": "not tested"}


def render() -> str:
    """The block between :data:`BEGIN` and :data:`END` (markers included)."""
    paths = (*ANSWERING, *EDITING)
    head = ["family (tiny copy of)", *(f"`{p}`" if " " not in p else p for p in paths), "notes"]
    rows = [f"| {' | '.join(head)} |", f"|{'---|' * len(head)}"]
    for family, (name, repo) in FAMILIES.items():
        cells = []
        for path in paths:
            status, why = cell(family, path, torchvision=False)
            cells.append(_MARK.get(status) or f"no: {why}")
        rows.append(f"| {name} (`{repo}`) | {' | '.join(cells)} | {NOTES.get(family, '')} |")
    rows += ["", "| unified family (tiny copy of) | `unified`: MedGEN VQA text, generation text "
             "+ image | notes |", "|---|---|---|"]  # fmt: skip
    for family, (name, repo) in UNIFIED.items():
        rows.append(f"| {name} (`{repo}`) | yes | {UNIFIED_NOTES[family]} |")
    return "\n".join([BEGIN, *rows, END])


def current(text: str) -> str:
    """The block as it stands in ``text`` (``""`` when absent)."""
    if BEGIN not in text or END not in text:
        return ""
    start = text.index(BEGIN)
    return text[start : text.index(END) + len(END)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    table, text = render(), DOC.read_text(encoding="utf-8")
    if args.check:
        if current(text) != table:
            print(f"{DOC}: the conformance table is stale: run python docs/models_matrix.py "
                  "--write", file=sys.stderr)  # fmt: skip
            return 1
        return 0
    if args.write:
        old = current(text)
        if not old:
            raise SystemExit(f"{DOC} has no {BEGIN} ... {END} block to rewrite")
        DOC.write_text(text.replace(old, table), encoding="utf-8")
        return 0
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
