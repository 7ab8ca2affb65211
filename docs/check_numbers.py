# ruff: noqa: E402
"""Every figure of README.md and docs/ that a script produces, checked against the text.

Run:  python docs/numbers.py --check          # the fast checks (seconds): exit 1 on a mismatch
      python docs/numbers.py --check --slow   # also the examples' tables (minutes)
      python docs/numbers.py --list           # which figures come from which script
      python docs/numbers.py --write          # rewrite the inventory table in docs/numbers.md

A check recomputes its figures (deterministic ones exactly, as the docs round them) or, for a
timing that depends on the machine, reads the runs a bench script recorded in
``bench/results/`` (``--record``), and looks for the text the docs must then hold. Whitespace
and line breaks in the docs do not matter. Figures that no check recomputes yet are listed too
(``status`` says why): the text is checked to be as inventoried, so a changed figure shows up
here rather than nowhere. The inventory table of docs/numbers.md is written from this file.

The command keeps its name, ``python docs/numbers.py`` (docs/numbers.py runs this file's
``main``); the code lives here, under a name no standard-library module has.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import math
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/docs/_blocks.py, tests' tiny-model builders

INVENTORY = ROOT / "docs" / "numbers.md"
BEGIN, END = "<!-- numbers:inventory -->", "<!-- /numbers:inventory -->"
#: The machine every measured figure of the docs was measured on, as the docs name it.
MACHINE = "AMD EPYC"
#: In a figure's text: anything on the same line (a table row's cells in between).
WILDCARD = "[...]"


from tests.docs._figures import STATED, Check, Figure

# -- fast, deterministic -------------------------------------------------------------------


def suite_counts() -> list[Figure]:
    from medibench.synth.scenes._scene import MODALITIES
    from medibench.synth.suite import SUITES, plan_suite
    from medibench.synth.tasks._base import TASKS

    def count(name: str) -> tuple[int, dict]:
        d = SUITES[name]
        return len(
            plan_suite(n_per_task=d["n_per_task"], tasks=d["tasks"], modalities=d["modalities"])
        ), d

    import inspect

    from medibench.cli.run import demo

    # `make demo` runs `medibench demo --out demo_run`: the suite is the command's default
    default = inspect.signature(demo).parameters["suite"].default
    n1, d1 = count(default)
    n_mini, d_mini = count("medibench-suite@1-mini")
    tasks, mods = len(TASKS), len(MODALITIES)
    perspectives = len({t.perspective for t in TASKS.values()})
    frozen_mods = len(d1["modalities"])
    out = [
        Figure(
            "README.md",
            f"the demo generates the frozen `{default}` ({n1} samples over "
            f"{len(d1['tasks'])} task types and {frozen_mods} modalities",
            "frozen suite size",
        ),
        Figure(
            "README.md",
            f"{tasks} task types over {mods} modalities and all {_word(perspectives)} perspectives",
            "task types, modalities",
        ),
        Figure(
            "docs/suite.md",
            f"{tasks} task types over {mods} scene modalities and the "
            f"{_word(perspectives)} perspectives",
            "task types, modalities",
        ),
        Figure("docs/suite.md", f"runs the {n_mini}-sample one", "mini suite size"),
        Figure(
            "docs/suite.md",
            f"`@{default.split('@')[1]}` is the suite of `make demo` (`medibench demo --suite "
            f"{default}`, its default)",
            "the demo's suite",
        ),
    ]
    for name, n, d, mods_cell in (
        ("medibench-suite@1", n1, d1, ", ".join(d1["modalities"])),
        ("medibench-suite@1-mini", n_mini, d_mini, "the same"),
    ):
        tasks_cell = f"all {tasks}" if tuple(d["tasks"]) == tuple(TASKS) else len(d["tasks"])
        out.append(
            Figure(
                "docs/suite.md",
                f"| `{name}` | {d['preset']} | {d['n_per_task']} | "
                f"{d['seed']} | {d['size']} | {tasks_cell} | {mods_cell} | {n} |",
                f"{name} row",
            )
        )
    for t in TASKS.values():
        out.append(
            Figure(
                "docs/suite.md",
                f"| `{t.name}` | {t.perspective.value} | {', '.join(t.modalities)} |",
                "the task table: perspective, modalities",
            )
        )
    return out


def difficulty_presets() -> list[Figure]:
    from medibench.synth.tasks._base import PRESETS

    def rng(pair: tuple) -> str:
        return f"{pair[0]:g}-{pair[1]:g}"

    return [
        Figure(
            "docs/suite.md",
            f"| `{p.name}` | {rng(p.lesion_radius)} | "
            f"{rng(p.lesion_contrast)} | {rng(p.n_lesions)} | {rng(p.n_distractors)} | "
            f"{p.noise:g} | {p.clutter:g} | {p.severity:g} |",
            f"preset {p.name}",
        )
        for p in PRESETS.values()
    ]


def docs_run_count() -> list[Figure]:
    from tests.docs._blocks import shell_blocks, table_rows

    running = sum(1 for r in table_rows() if r.status in ("runs", "partly"))
    return [
        Figure(
            "README.md",
            f"({running} of {len(shell_blocks())};",
            "shell blocks the docs-run test executes",
        )
    ]


def judge_prompt_hashes() -> list[Figure]:
    out = []
    for path in sorted((ROOT / "src" / "medibench" / "benchmarks").glob("*/*.md")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        out.append(Figure("docs/judges.md", f"| `{path.name}` |", f"{path.name} listed"))
        out.append(Figure("docs/judges.md", f"`{digest}` |", f"sha256 of {path.name}"))
    return out


def medgen_counts() -> list[Figure]:
    from medibench.metrics.text import CLINICAL_ENTITIES
    from medibench.protocols import load_protocol

    n, metrics = len(CLINICAL_ENTITIES), len(load_protocol("medgen@code").metric_names)
    return [
        Figure("README.md", f"the official {n}-entity clinical list", "clinical entities"),
        Figure("docs/medgen.md", f"the official {n}-entity regex list", "clinical entities"),
        Figure("docs/report.md", f"(`medgen@code` declares {metrics})", "medgen@code metrics"),
    ]


def hub_revisions() -> list[Figure]:
    from medibench.benchmarks import BENCHMARKS

    out = []
    for name in ("medgen", "miedb", "paintbench", "medebench"):
        hub = BENCHMARKS.get(name).hub
        pinned = re.fullmatch(r"[0-9a-f]{40}", hub.revision) is not None
        cell = f"`{hub.revision}`" if pinned else f"`{hub.revision}`, **unpinned**"
        row = f"| `{name}` | `{hub.repo_id}` | {WILDCARD} | {cell}"
        out.append(Figure("docs/sources.md", row, "repository and revision"))
        if pinned:
            out.append(Figure("README.md", f"--revision {hub.revision}", f"{name} revision"))
    return out


def model_sizes() -> list[Figure]:
    from medibench.models.diffusers import kontext_size

    w, h = kontext_size(640, 480)
    return [Figure("docs/models.md", f"a 640x480 input gives {w}x{h}", "Kontext working size")]


def icl_shortfall() -> list[Figure]:
    """How many starter samples have fewer same-task demonstrations than K (docs/models.md)."""
    from medibench.datasets import load_dataset
    from medibench.runs._icl import plan_icl

    ds = load_dataset("starter")
    samples = list(ds)
    plan = plan_icl((2, 4), pool=None, select="same-task", embedding="thumbnail",
                    dataset="starter", dataset_options={}, samples=samples, loaded=ds,
                    seed=0)  # fmt: skip
    n = [len(plan.allowed(s, "target")) for s in samples]
    short = {k: sum(x < k for x in n) for k in (2, 4)}
    text = (
        f"{len(samples)}-sample starter set, `same-task` leaves {short[4]} samples with fewer "
        f"than 4 candidates and {short[2]} with fewer than 2"
    )
    return [Figure("docs/models.md", text, "same-task shortfall")]


def export_constants() -> list[Figure]:
    from medibench.datasets import _export

    mb = _export._SHARD_BYTES // 1_000_000
    return [
        Figure(
            "docs/sources.md",
            f"shards of about {mb} MB, row groups of {_export._ROW_GROUP})",
            "hf-parquet shard and row-group size",
        )
    ]


def same_speed_everywhere() -> list[Figure]:
    """A measured figure quoted twice says the same thing twice (the README's row is the source)."""
    return [
        Figure("README.md", "116.0-120.7/s over 50 waves (3,200 samples)", "judge throughput"),
        Figure(
            "docs/judges.md",
            "concurrency 64: 116.0-120.7/s over 3,200 samples",
            "judge throughput, as the README's",
        ),
        Figure("README.md", "1.04x (203 vs 211 ms per step", "train speed"),
        Figure("docs/train.md", "203 ms against 211 ms per step, 1.04x", "train speed"),
    ]


# -- recorded timings (bench/results/, written by the bench scripts' --record) ------------


def recorded(script: str) -> list[dict]:
    path = ROOT / "bench" / "results" / f"{script}.json"
    return json.loads(path.read_text(encoding="utf-8"))["runs"] if path.is_file() else []


def spread(values: list[float], fmt: str) -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}-{hi}"


def loads(runs: list[dict]) -> str:
    return spread([max(r["load_average"]) for r in runs], "{:.0f}")


def calibration_speed() -> list[Figure]:
    runs = recorded("calibration")
    if not runs:
        return [Figure("bench/results/calibration.json", "(no run recorded)", "calibration runs")]
    f = [r["figures"] for r in runs]
    t = spread([x["all_metrics_s[calibration@1]"] for x in f], "{:.1f}")
    ratio = spread([x[f"{m}_torchmetrics_ratio"] for x in f for m in ("ece", "mce")], "{:.1f}")
    diff = max(x[f"{m}_torchmetrics_diff"] for x in f for m in ("ece", "mce"))
    text = (
        f"recorded (`bench/results/calibration.json`): all metrics in {t} s {_over(runs)}; "
        f"ECE/MCE {ratio}x torchmetrics, values within {_exp(diff)}"
    )
    return [
        Figure("README.md", text, "calibration metrics time, vs torchmetrics"),
        Figure("docs/calibration.md", text, "calibration metrics time, vs torchmetrics"),
    ]


def suite_speed() -> list[Figure]:
    runs = recorded("suite")
    if not runs:
        return [Figure("bench/results/suite.json", "(no run recorded)", "suite runs")]
    a = spread([r["figures"]["per_s_written[256]"] for r in runs], "{:.0f}")
    b = spread([r["figures"]["per_s_written[512]"] for r in runs], "{:.0f}")
    text = f"recorded (`bench/results/suite.json`): {a}/s at 256, {b}/s at 512 {_over(runs)}"
    return [Figure("README.md", text, "suite samples per second (process pool, PNG writing)")]


def _over(runs: list[dict]) -> str:
    """How many runs, their load, and the machine, as a recorded figure's text names them."""
    cpus = sorted({f"{r['machine']['cpu']}, {r['machine']['cores']} cores" for r in runs})
    n = len(runs)
    return f"over {_word(n)} run{'s' * (n > 1)} at load average {loads(runs)} on {'; '.join(cpus)}"


def machine_named() -> list[Figure]:
    return [
        Figure(
            "README.md",
            f"measured here (2-core {MACHINE} machines, Python 3.11",
            "the speed table names its machine",
        )
    ]


# -- slow: the examples whose tables the docs quote ------------------------------------------


def mni152_table() -> list[Figure]:
    from medibench.calibration.mni152 import run_example

    return mni152_figures(run_example(seed=0).summary)


def mni152_figures(s: dict) -> list[Figure]:
    """The MNI152 table's figures from the example's summary (``summary.json`` of
    ``python -m medibench.calibration.mni152``, which README and docs/calibration.md run)."""

    def row(stage: str, domain: str) -> str:
        v = s[stage][domain]
        return f"| {v['accuracy']:.4f} | {v['ece']:.4f} | {v['nll']:.4f} |"

    temp = f"{s['temperature']:.3f}"
    n_train, n_val, n_test = (f"{s[k]:,}" for k in ("n_train", "n_val", "n_test"))
    return [
        Figure("README.md", f"| in-domain {row('before', 'in-domain')}", "in-domain"),
        Figure(
            "README.md", f"| shifted (bias field + noise) {row('before', 'shifted')}", "shifted"
        ),
        Figure(
            "README.md",
            f"| in-domain after temperature scaling (T = {temp}) "
            f"{row('after_temperature', 'in-domain')}",
            "in-domain, calibrated",
        ),
        Figure(
            "README.md",
            f"| shifted after temperature scaling {row('after_temperature', 'shifted')}",
            "shifted, calibrated",
        ),
        Figure("README.md", f"classifier on {n_train} voxels", "training voxels"),
        Figure("README.md", f"temperature scaling on {n_val} validation voxels", "validation"),
        Figure("README.md", f"On {n_test} test voxels per domain", "test voxels"),
        Figure("docs/calibration.md", f"| in-domain {row('before', 'in-domain')}", "in-domain"),
        Figure("docs/calibration.md", f"| shifted {row('before', 'shifted')}", "shifted"),
        Figure(
            "docs/calibration.md",
            f"| in-domain, temperature {temp} {row('after_temperature', 'in-domain')}",
            "in-domain, calibrated",
        ),
        Figure(
            "docs/calibration.md",
            f"| shifted, temperature {temp} {row('after_temperature', 'shifted')}",
            "shifted, calibrated",
        ),
        Figure("docs/calibration.md", f"trained on {n_train} voxels", "training voxels"),
        Figure("docs/calibration.md", f"fitted on {n_val} validation voxels", "validation"),
        Figure("docs/calibration.md", f"{n_test} test voxels per domain", "test voxels"),
    ]


#: Figures that come out differently by CPU and ATen code path (``ATEN_CPU_CAPABILITY`` default,
#: avx2, avx512), each measured under all three on the machines named: the docs state the range,
#: and a check accepts a value that rounds within it.
PATH_SPREADS: dict[str, tuple[float, float]] = {
    # 20 epochs on a random-weight CLIP (float32: MKL's kernels differ between CPUs) carry the
    # last bits into the 2nd decimal: AMD EPYC 0.4549-0.4559 on the three paths; Intel Xeon
    # (Sapphire Rapids) 0.4281 on default, 0.4510 on avx2 and avx512
    "prompt-tuning in-domain ece": (0.4281, 0.4559),
}


def across_paths(name: str, value: float, fmt: str = "{:.4f}") -> str:
    """``value`` as the docs state it: the range of :data:`PATH_SPREADS` where it has one and
    the value rounds within it, else the value itself (which the range then fails to match)."""
    text = fmt.format(value)
    if name in PATH_SPREADS:
        lo, hi = PATH_SPREADS[name]
        if lo <= float(text) <= hi:
            return f"{fmt.format(lo)}-{fmt.format(hi)}"
    return text


def mni152_margin_table() -> list[Figure]:
    """The MNI152 example's predictions before and after its temperature, analysed as
    docs/calibration.md's `calibration analyze` block does (the files' names as its groups)."""
    import dataclasses

    from medibench.calibration.calibrators import apply_calibrator, fit_calibrator
    from medibench.calibration.margins import margin_analysis
    from medibench.calibration.mni152 import run_example

    ex = run_example(seed=0)
    calibrated = apply_calibrator(fit_calibrator(ex.val, "temperature"), ex.test)
    files = [
        dataclasses.replace(ex.test, source="mni/test.npz"),
        dataclasses.replace(calibrated, source="mni/test_calibrated.npz"),
    ]
    return mni152_margin_figures(margin_analysis(files, by=["domain"]))


def mni152_margin_figures(result: dict) -> list[Figure]:
    """The margin table's figures from the ``calibration analyze --json`` of its block."""
    doc = "docs/calibration.md"
    groups = {g["group"]: g for g in result["groups"]}

    def row(name: str) -> str:
        g = groups[name]
        values = (g["accuracy"], g["ece"], g["margin"]["mean"], g["margin_correct"],
                  g["margin_incorrect"])  # fmt: skip
        return f"| {name} | " + " | ".join(f"{v:.4f}" for v in values) + " |"

    rel = result["relation"]["ece"]
    wrong = {k: f"{groups[k]['margin_incorrect']:.2f}" for k in groups}
    return [
        *(Figure(doc, row(name), "margins: " + name.split(" / ")[1]) for name in groups),
        Figure(doc, f"wrong predictions have small margins ({wrong['test.npz / in-domain']})",
               "in-domain wrong margin"),
        Figure(doc, f"wrong predictions already stand {wrong['test.npz / shifted']} above",
               "shifted wrong margin"),
        Figure(doc, f"scaled to {wrong['test_calibrated.npz / shifted']} they are",
               "shifted wrong margin, calibrated"),
        Figure(doc, f"over these four groups is {rel['rho']:.3f} (p = {rel['pvalue']:.2g})",
               "Spearman rho, mean margin vs ECE"),
    ]  # fmt: skip


def prompt_tuning_table() -> list[Figure]:
    import os
    import subprocess

    doc = (ROOT / "docs" / "calibration.md").read_text(encoding="utf-8")
    block = doc[doc.index("## Few-shot prompt tuning") :]
    train = next(x for x in block.splitlines() if x.startswith("medibench calibration train"))
    score = next(x for x in block.splitlines() if x.startswith("medibench calibration score"))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        for command in ("python -m medibench.prompt_tuning.example pt", train, score):
            argv = command.split("  #")[0].split()
            argv = [sys.executable, *(argv[1:] if argv[0] == "python" else ["-m", *argv])]
            done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"{command}: exit {done.returncode}\n{done.stderr[-2000:]}")
        scores = json.loads((Path(tmp) / "pt/probe/scores.json").read_text())
    return prompt_tuning_figures(scores)


def prompt_tuning_figures(scores: dict) -> list[Figure]:
    """The prompt-tuning table's figures from the ``calibration score --json`` of its block."""
    from medibench.prompt_tuning import example

    groups = scores["groups"]
    defaults = example.build_example.__kwdefaults__

    def row(label: str, name: str) -> str:
        g = groups[name]
        acc, ece = (across_paths(f"prompt-tuning {name} {m}", g[m]) for m in ("accuracy", "ece"))
        return f"| {label} | {g['n']} | {acc} | {ece} |"

    return [
        Figure("docs/calibration.md", row("in-domain (`source@test`)", "in-domain"), "in-domain"),
        Figure("docs/calibration.md", row("shifted (real backgrounds)", "shifted"), "shifted"),
        Figure(
            "docs/calibration.md",
            f"{defaults['per_class']} procedural scenes per class",
            "scenes per class",
        ),
        Figure(
            "docs/calibration.md",
            f"a shifted domain of {defaults['shifted_per_class']} per class",
            "shifted per class",
        ),
    ]


def build_demo_dice() -> list[Figure]:
    from medibench.build import build
    from medibench.build.demo import write_demo_sources

    with tempfile.TemporaryDirectory() as tmp:
        sources = write_demo_sources(Path(tmp) / "sources")
        build("perception", sources["mni152"], Path(tmp) / "p", exports=())
        quality = json.loads((Path(tmp) / "p/report/quality.json").read_text())
    return demo_dice_figures(quality)


def demo_dice_figures(quality: dict) -> list[Figure]:
    """The Dice figure from an MNI152 perception build's ``report/quality.json``."""
    dice = quality["overlay_dice"]["grayscale_mean"]
    return [
        Figure(
            "README.md",
            f"the overlay-to-mask Dice is {dice:.4f} on the grayscale demo",
            "overlay-to-mask Dice, MNI152 perception build",
        )
    ]


def edit_table() -> list[Figure]:
    from bench.edit_table import table

    made = table()
    rows = [line for line in made.splitlines() if line.startswith("| ")]
    figures = [Figure("README.md", row, "model-editing table row") for row in rows]
    cells = {row.split("|")[1].strip(): [c.strip() for c in row.split("|")[2:5]] for row in rows}
    # docs/knowledge_edit.md quotes their rows
    for editor in ("grace@paper", "grace-tokens", "balancedit", "wise", "mend"):
        label = next(k for k in cells if k.startswith(f"{editor}, single"))
        values = " / ".join(cells[label])
        figures.append(Figure("docs/knowledge_edit.md", f"`{editor}` {values}", f"{editor} row"))
        missed = re.search(r"\((\d+) of (\d+) edits did not converge\)", label)
        if missed:
            said = f"{missed[1]} of its {missed[2]} edits not converged"
            figures.append(Figure("docs/knowledge_edit.md", said, f"{editor}'s unconverged edits"))
    each, last = (" / ".join(cells[next(k for k in cells if k.startswith(f"mend, {s}"))])
                  for s in ("sequential-24, right", "sequential-24, after"))  # fmt: skip
    said = f"{each} right after each edit and {last} after the last one"
    figures.append(Figure("docs/knowledge_edit.md", said, "mend's sequential rows"))
    return figures


def _word(n: int) -> str:
    words = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
    return words[n] if 0 <= n < len(words) else f"{n:,}"


def _exp(x: float) -> str:
    """An upper bound with one significant digit: 1.49e-06 -> "2e-6"."""
    exponent = math.floor(math.log10(x)) if x > 0 else 0
    mantissa = math.ceil(round(x / 10.0**exponent, 9))
    if mantissa == 10:
        mantissa, exponent = 1, exponent + 1
    return f"{mantissa}e{exponent}"


CHECKS: tuple[Check, ...] = (
    Check(
        "suite counts",
        "`medibench.synth.suite.SUITES`, `plan_suite`, the task registry",
        "none (exact)",
        suite_counts,
    ),
    Check(
        "difficulty presets", "`medibench.synth.tasks.PRESETS`", "none (exact)", difficulty_presets
    ),
    Check(
        "docs-run count",
        "`tests/docs/blocks.md` rows, `tests/docs/_blocks.shell_blocks()`",
        "none (exact)",
        docs_run_count,
    ),
    Check(
        "judge prompt hashes",
        "sha256 of `src/medibench/benchmarks/*/*.md`",
        "none (exact)",
        judge_prompt_hashes,
    ),
    Check(
        "MedGEN-Bench counts",
        "`CLINICAL_ENTITIES`, `medgen@code`'s metric names",
        "none (exact)",
        medgen_counts,
    ),
    Check("hub revisions", "each benchmark's `HubSource`", "none (exact)", hub_revisions),
    Check(
        "Kontext working size",
        "`medibench.models.diffusers.kontext_size`",
        "none (exact)",
        model_sizes,
    ),
    Check(
        "same-task shortfall",
        "`medibench.runs._icl.IclPlan.allowed` on the starter set",
        "none (exact)",
        icl_shortfall,
    ),
    Check(
        "export sizes", "`medibench.datasets._export` constants", "none (exact)", export_constants
    ),
    Check(
        "speed quoted twice",
        "the README's speed table (the bench scripts' runs)",
        "the same text in both places",
        same_speed_everywhere,
    ),
    Check("speed machine", "README's speed table header", "-", machine_named),
    Check(
        "calibration speed",
        "`python bench/calibration.py --record` -> `bench/results/calibration.json`",
        "the range over the recorded runs",
        calibration_speed,
    ),
    Check(
        "suite speed",
        "`python bench/suite.py --record` -> `bench/results/suite.json`",
        "the range over the recorded runs",
        suite_speed,
    ),
    Check(
        "MNI152 calibration example",
        "`medibench.calibration.mni152.run_example(seed=0)` (35 s)",
        "none: 4 decimals as printed",
        mni152_table,
        slow=True,
        listed=(
            Figure("README.md", "| in-domain |", "the MNI152 table (4 rows), voxel counts"),
            Figure("docs/calibration.md", "| in-domain |", "the same table (4 rows)"),
        ),
    ),
    Check(
        "MNI152 margin analysis",
        "docs/calibration.md's `calibration analyze` on `run_example(seed=0)`'s predictions (40 s)",
        "none: 4 decimals as printed",
        mni152_margin_table,
        slow=True,
        listed=(
            Figure(
                "docs/calibration.md",
                "| test.npz / in-domain |",
                "the margin table (4 rows), the margins and rho quoted below it",
            ),
        ),
    ),
    Check(
        "prompt-tuning example",
        "docs/calibration.md's commands (example, train, score; 2.5 min)",
        "4 decimals as printed; in-domain ECE: its range over ATen's CPU code paths",
        prompt_tuning_table,
        slow=True,
        listed=(
            Figure(
                "docs/calibration.md",
                "| in-domain (`source@test`) |",
                "n, accuracy, ECE (2 rows); scenes per class",
            ),
        ),
    ),
    Check(
        "build demo Dice",
        "`medibench build perception` on the MNI152 demo source (1 min)",
        "none: 4 decimals",
        build_demo_dice,
        slow=True,
        listed=(Figure("README.md", "the overlay-to-mask Dice is", "grayscale demo Dice"),),
    ),
    Check(
        "model-editing table",
        "`python bench/edit_table.py --check` (about 2 min of CPU time)",
        "none: 3 decimals",
        edit_table,
        slow=True,
        listed=(Figure("README.md", "<!-- edit-table -->", "the model-editing table (13 rows)"),),
    ),
    *STATED,
)


# -- matching, reporting --------------------------------------------------------------------


def find(doc: str, text: str) -> int | None:
    """The 1-based line where ``text`` starts in ``doc`` (whitespace-insensitive; ``[...]``
    stands for anything on the same line), else None."""
    body = _read(doc)
    parts = [r"\s+".join(map(re.escape, part.split())) for part in text.split(WILDCARD)]
    m = re.search(r"[^\n]*?".join(parts), body)
    return None if m is None else body[: m.start()].count("\n") + 1


def nearest(doc: str, text: str) -> str:
    lines = _read(doc).splitlines()
    best = difflib.get_close_matches(text.strip(), [x.strip() for x in lines], n=1, cutoff=0.3)
    return best[0][:160] if best else "(nothing close)"


def run_checks(slow: bool, only: str = "", skip: tuple[str, ...] = ()) -> tuple[int, list[str]]:
    """How many figures were checked, and a message per figure the docs do not hold (the checks
    named in ``skip`` left out)."""
    checked, problems = 0, []
    for check in CHECKS:
        if (check.slow and not slow) or only.lower() not in check.name.lower():
            continue
        if check.name in skip:
            continue
        figures = list(check.stated) if check.figures is None else check.figures()
        checked += len(figures)
        problems += figure_problems(check.name, figures)
    return checked, problems


def figure_problems(name: str, figures: list[Figure]) -> list[str]:
    """A message per figure of check ``name`` that the docs do not hold."""
    return [
        f"{f.doc}: {name}, {f.what}: the text should read\n"
        f"    {f.text}\n  closest: {nearest(f.doc, f.text)}"
        for f in figures
        if find(f.doc, f.text) is None
    ]


def inventory() -> str:
    """The table of docs/numbers.md: every figure, where, what produces it, its noise, status
    (figures of one check that fill one table of a doc, one after the other, are one row)."""
    rows = ["| where | figure | produced by | noise | status |", "|---|---|---|---|---|"]
    for check in CHECKS:
        figures = check.stated or check.listed
        if check.figures is not None and not check.slow:
            figures = check.figures()
        groups: list[list[Figure]] = []
        for f in figures:
            if groups and (groups[-1][0].doc, groups[-1][0].what) == (f.doc, f.what):
                groups[-1].append(f)
            else:
                groups.append([f])
        status = check.status + (" (slow: `--slow`)" if check.slow else "")
        for group in groups:
            f, lines = group[0], [find(g.doc, g.text) for g in group]
            where = (
                "?"
                if None in lines
                else "-".join(dict.fromkeys(map(str, (min(lines), max(lines)))))
            )
            figure = f.text if len(f.text) <= 90 else f.text[:87] + "..."
            more = f", and {len(group) - 1} more like it" if len(group) > 1 else ""
            rows.append(
                f"| {f.doc}:{where} | {_cell(figure)} ({f.what}{more}) | "
                f"{check.producer} | {check.noise} | {status} |"
            )
    return "\n".join([BEGIN, *rows, END])


def inventory_current() -> bool:
    """Whether docs/numbers.md holds :func:`inventory`'s table, line numbers aside (an edit
    elsewhere in a doc moves them; ``--write`` refreshes them)."""
    text = INVENTORY.read_text(encoding="utf-8") if INVENTORY.is_file() else ""
    if BEGIN not in text or END not in text:
        return False
    table = text[text.index(BEGIN) : text.index(END) + len(END)]
    return _unlined(table) == _unlined(inventory())


def _unlined(table: str) -> str:
    return re.sub(r"^\| ([^|]+?):(\d+(?:-\d+)?|\?) \|", r"| \1 |", table, flags=re.M)


def _cell(text: str) -> str:
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def _read(doc: str) -> str:
    path = ROOT / doc
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--slow", action="store_true", help="with --check: the slow checks too")
    ap.add_argument("--only", default="", help="with --check: the checks whose name has this")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--write", action="store_true", help="rewrite docs/numbers.md's table")
    args = ap.parse_args()
    if args.list:
        for c in CHECKS:
            print(f"{c.name}: {c.producer} [{c.status}{', slow' if c.slow else ''}]")
        return 0
    if args.write:
        text = INVENTORY.read_text(encoding="utf-8")
        old = text[text.index(BEGIN) : text.index(END) + len(END)]
        INVENTORY.write_text(text.replace(old, inventory()), encoding="utf-8")
        return 0
    t0 = time.perf_counter()
    checked, problems = run_checks(slow=args.slow, only=args.only)
    if not args.only and not inventory_current():
        problems.append(
            "docs/numbers.md: the inventory table is stale: run python docs/numbers.py --write"
        )
    for p in problems:
        print(p, file=sys.stderr)
    print(
        f"{checked} figures checked, {len(problems)} problem(s) "
        f"({time.perf_counter() - t0:.1f} s{'' if args.slow else '; --slow for the rest'})"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
