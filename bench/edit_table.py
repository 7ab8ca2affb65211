"""The README's model-editing table: reliability, generality and locality of ft, lora and grace
on the tiny LLaVA (24 synthetic edits, exact match), written or checked.

Run:  python bench/edit_table.py           # print the table
      python bench/edit_table.py --write   # rewrite the table in README.md
      python bench/edit_table.py --check   # exit 1 when README.md's numbers differ

The task set, the tiny LLaVA (taught the set's locality probes) and every editor are seeded, so
a clean clone on the pinned torch reproduces the numbers exactly.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' tiny LLaVA builder

README = ROOT / "README.md"
BEGIN, END = "<!-- edit-table -->", "<!-- /edit-table -->"
#: (label, editor, sequential, stage)
RUNS = (
    ("ft, single", "ft", 0, "immediate"),
    ("lora, single", "lora", 0, "immediate"),
    ("grace, single", "grace", 0, "immediate"),
    ("lora, sequential-8, right after each edit", "lora", 8, "immediate"),
    ("lora, sequential-8, after the last edit of the sequence", "lora", 8, "final"),
)


def table(edits: int = 24) -> str:
    """The block between :data:`BEGIN` and :data:`END` (markers included)."""
    import torch
    from tests.knowledge_edit.tiny_vlm import build_tiny_llava, taught_items, teach, vocabulary

    from medibench.io import read_image
    from medibench.knowledge_edit import (
        TransformersAnswerer,
        load_editor,
        make_matchers,
        run_edits,
        summarize,
        synthetic_taskset,
    )
    from medibench.knowledge_edit._build import TEXT_TEMPLATES

    torch.set_num_threads(1)
    rows = ["| run | reliability | generality | locality |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ts = synthetic_taskset(root / "tasks", edits, seed=0)
        texts = [t for r in ts.requests for p in r.probes for t in (p.question, p.answer)]
        build_tiny_llava(root / "tiny", vocabulary([*texts, *TEXT_TEMPLATES]))
        teach(root / "tiny", taught_items(ts, read_image), epochs=15)
        reports = {}
        for label, editor, sequential, stage in RUNS:
            if (editor, sequential) not in reports:
                model = TransformersAnswerer(root / "tiny", max_new_tokens=4)
                reports[editor, sequential] = run_edits(
                    ts, model, load_editor(editor), sequential=sequential,
                    matchers=make_matchers(["exact"], model))  # fmt: skip
            report = reports[editor, sequential]
            s = summarize(report.lines)
            s = s["by_stage"][stage] if stage != "immediate" else s
            missed = sum(1 for e in report.edits if e.converged is False)
            note = f" ({missed} of {len(report.edits)} edits did not converge)" if missed else ""
            values = " | ".join(_fmt(s[m]) for m in ("reliability", "generality", "locality"))
            rows.append(f"| {label}{note} | {values} |")
    return "\n".join([BEGIN, *rows, END])


def current(text: str) -> str:
    """The block as it stands in ``text`` (``""`` when absent)."""
    if BEGIN not in text or END not in text:
        return ""
    return text[text.index(BEGIN) : text.index(END) + len(END)]


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    made, text = table(), README.read_text(encoding="utf-8")
    if args.check:
        if current(text) != made:
            print(f"README.md's model-editing table differs from this run:\n{made}",
                  file=sys.stderr)  # fmt: skip
            return 1
        print("README.md's model-editing table holds")
        return 0
    if args.write:
        old = current(text)
        if not old:
            raise SystemExit(f"README.md has no {BEGIN} ... {END} block to rewrite")
        README.write_text(text.replace(old, made), encoding="utf-8")
    print(made)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
