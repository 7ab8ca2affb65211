"""The README's model-editing table: reliability, generality and locality of ft, lora, grace@paper,
grace-tokens, balancedit, wise and MEND on the tiny LLaVA (24 synthetic edits, exact match),
written or checked.

Run:  python bench/edit_table.py           # print the table
      python bench/edit_table.py --write   # rewrite the table in README.md
      python bench/edit_table.py --check   # exit 1 when README.md's numbers differ
      python bench/edit_table.py --paths   # the table on each ATen code path, and its spread

The task set, the tiny LLaVA (taught the set's locality probes) and every editor are seeded. The
table is computed in a child process in arithmetic that comes out the same on every x86-64 CPU
(:data:`PINNED`, ``bench/_portable.py``): ATen's portable kernels (``ATEN_CPU_CAPABILITY=default``),
one thread, the tiny LLaVA in float64 (:data:`DTYPE`), matrix products and the functions MKL's
vector math would compute routed around MKL, libm's FMA variant hidden. On ATen's SIMD paths the
tiny model's teaching (15 epochs of Adam) carries a last-bit difference up to other weights and
cells move by up to 0.583 (measured): ``--paths`` prints the table on each path this CPU has. The
editors train in whatever dtype the model has (float32 for a user's model). MEND's hypernetwork
is trained first, as ``medibench edit train-mend`` trains it with mend@1's settings, on the same
24 edits.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' tiny LLaVA builder

from bench._portable import LIBM, Portable  # noqa: E402

README = ROOT / "README.md"
BEGIN, END = "<!-- edit-table -->", "<!-- /edit-table -->"
#: The tiny LLaVA's weights, teaching and edits.
DTYPE = "float64"
#: The code path the table is computed on (read by ATen and MKL when they load: a child's env).
PINNED = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    **LIBM,
}
CAPABILITIES = ("default", "avx2", "avx512")
#: (label, editor, sequential, stage)
RUNS = (
    ("ft, single", "ft", 0, "immediate"),
    ("lora, single", "lora", 0, "immediate"),
    ("grace@paper, single", "grace@paper", 0, "immediate"),
    ("grace-tokens, single", "grace-tokens", 0, "immediate"),
    ("balancedit, single", "balancedit", 0, "immediate"),
    ("wise, single", "wise", 0, "immediate"),
    ("lora, sequential-8, right after each edit", "lora", 8, "immediate"),
    ("lora, sequential-8, after the last edit of the sequence", "lora", 8, "final"),
    ("mend, single", "mend", 0, "immediate"),
    ("mend, sequential-24, right after each edit", "mend", 24, "immediate"),
    ("mend, sequential-24, after the last edit of the sequence", "mend", 24, "final"),
    ("balancedit, sequential-24, after the last edit", "balancedit", 24, "final"),
    ("wise, sequential-24, after the last edit", "wise", 24, "final"),
)


def table(edits: int = 24, capability: str = "default") -> str:
    """The block between :data:`BEGIN` and :data:`END` (markers included), computed in a child
    process on :data:`PINNED`'s code path (``capability``: ATen's, for ``--paths``)."""
    env = {**os.environ, **PINNED, "ATEN_CPU_CAPABILITY": capability}
    argv = [sys.executable, str(Path(__file__).resolve()), "--here", "--edits", str(edits)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode or BEGIN not in done.stdout:
        raise RuntimeError(f"{' '.join(argv)} ({capability}): exit {done.returncode}\n"
                           f"{done.stderr[-3000:]}")  # fmt: skip
    return current(done.stdout)


def table_here(edits: int = 24) -> str:
    """:func:`table`, computed in this process on its own code path."""
    import torch

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
    from medibench.knowledge_edit._mend_train import read_mend_config, train_mend
    from medibench.knowledge_edit.tiny_llava import (
        build_tiny_llava,
        taught_items,
        teach,
        vocabulary,
    )

    torch.set_num_threads(1)
    rows = ["| run | reliability | generality | locality |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp, Portable():
        root = Path(tmp)
        ts = synthetic_taskset(root / "tasks", edits, seed=0)
        texts = [t for r in ts.requests for p in r.probes for t in (p.question, p.answer)]
        build_tiny_llava(root / "tiny", vocabulary([*texts, *TEXT_TEMPLATES]), dtype=DTYPE)
        teach(root / "tiny", taught_items(ts, read_image), epochs=15)
        train_mend(root / "tasks", root / "tiny", root / "mend", read_mend_config())
        reports = {}
        for label, editor, sequential, stage in RUNS:
            if (editor, sequential) not in reports:
                model = TransformersAnswerer(root / "tiny", max_new_tokens=4)
                spec = f"mend:{root / 'mend'}" if editor == "mend" else editor
                reports[editor, sequential] = run_edits(
                    ts, model, load_editor(spec), sequential=sequential,
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


def paths(edits: int = 24) -> str:
    """The table on each of ATen's code paths this CPU has, and the largest difference of a
    cell from the pinned path's."""
    import torch

    have = CAPABILITIES[: CAPABILITIES.index(torch.backends.cpu.get_cpu_capability().lower()) + 1]
    made = {c: table(edits, c) for c in have}
    cells = {c: [float(x) for row in _rows(t) for x in row if x != "undefined"]
             for c, t in made.items()}  # fmt: skip
    spread = max(abs(a - b) for c in have for a, b in zip(cells[c], cells[have[0]], strict=True))
    return "\n".join([*(f"{c}:\n{t}" for c, t in made.items()),
                      f"largest difference from {have[0]}: {spread:.3f}"])  # fmt: skip


def _rows(block: str) -> list[list[str]]:
    return [[x.strip() for x in line.split("|")[2:-1]]
            for line in block.splitlines()[3:-1]]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--paths", action="store_true")
    ap.add_argument("--edits", type=int, default=24)
    ap.add_argument("--here", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = ap.parse_args()
    if args.here:
        print(table_here(args.edits))
        return 0
    if args.paths:
        print(paths(args.edits))
        return 0
    made, text = table(args.edits), README.read_text(encoding="utf-8")
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
