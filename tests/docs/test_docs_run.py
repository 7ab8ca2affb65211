"""Docs that run: every shell block of README.md and docs/*.md is executed here, in a temporary
folder against local stand-ins (tests/docs/standins/: tiny models at the documented weight paths,
a fake Hub, a fake OpenAI/Gemini server, the benchmarks' layout builders), and listed in
tests/docs/blocks.md with how it runs. A block that is added, removed or edited without its row
fails, and so does a row that is not run (``not yet``), so the table stays the exact list.

The blocks of one chain (:data:`CHAINS`; a file not named there is one chain) run in order in
one folder (later blocks use what earlier ones made), with ``medibench`` and ``python`` on PATH
meaning this checkout (``medibench`` forked from the worker's docs zygote, tests/docs/_zygote.py,
where the environment allows), ``COLUMNS=80``, and the substitutions of :data:`SUBSTITUTIONS`
applied (each one marked and explained). Each chain is a test of its own, so xdist runs them side by
side; what a chain reads from another chain's blocks a stand-in builds in its place. After a
chain ran, the stand-in modules' ``check`` hooks look at what its blocks made.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.docs import standins
from tests.docs._blocks import ROOT, TABLE, Block, shell_blocks, table_rows

#: (file, text in the block) -> (replacement, why): the marked substitutions of every module of
#: tests/docs/standins (a block names a download, weights, a paid API or a size too slow for a
#: test; "" drops the line; file "*" is every file).
SUBSTITUTIONS = standins.substitutions()


#: file -> {chain: its blocks, in order}: the blocks of one chain use what the chain's earlier
#: blocks made and nothing that another chain's blocks make, except through a stand-in (named in
#: the row of tests/docs/blocks.md of the block that reads it). A file not named is one chain.
CHAINS: dict[str, dict[str, tuple[int, ...]]] = {
    "README.md": {
        "demo": (1,),
        "download": (2, 3),
        "run": (4, 6),  # 4: runs/a, which 6 reports; MieDB of block 3: a stand-in (hub.py)
        "judge-analyze": (5, 8),  # MedEBench, MedGEN-Bench of block 3: stand-ins (hub.py)
        "suite": (7,),
        "build-train": (9, 10),  # 9: sources/, built/perception, which 10 trains on
        "calibration": (11,),
        "prompt-tuning": (12,),
        "medgen": (13,),  # MedGEN-Bench of block 3: a stand-in (hub.py)
        "edit": (14,),
    },
    # 3, 4: MieDB and PaintBench data and outputs the user has: stand-ins (correlate.py)
    "docs/analysis.md": {
        "attention": (1,),
        "features": (2,),
        "miedb-human": (3,),
        "paintbench-fit": (4,),
    },
    # 1: sources/, built/perception, which 2 runs and scores; 3: the chat-model steps, on its own
    "docs/build.md": {"build": (1, 2), "llm": (3,)},
    # 3: the margin analysis of block 1's predictions
    "docs/calibration.md": {"mni152": (1, 3), "prompt-tuning": (2,)},
    # each block builds its own task set: the run, the geometry analysis, the sweep
    "docs/knowledge_edit.md": {"run": (1,), "geometry": (2,), "sweep": (3,)},
    "docs/models.md": {"run": (1, 2), "icl": (3,)},  # 1: mydata, which 2 runs on
    # data/train, data/heldout of block 1, which 2 trains and runs on: a stand-in (train.py)
    "docs/train.md": {"ablation": (1,), "finetune": (2,), "inpainting": (3,)},
}


def chains() -> list[tuple[str, str, tuple[int, ...]]]:
    """(file, chain, blocks) of every block that runs: :data:`CHAINS`, and one chain (named
    ``all``) per other file."""
    run = sorted({(r.file, r.ordinal) for r in table_rows() if r.status in {"runs", "partly"}})
    out = []
    for file in sorted({f for f, _ in run}):
        named = CHAINS.get(file) or {"all": tuple(n for f, n in run if f == file)}
        out += [(file, name, blocks) for name, blocks in named.items()]
    return out


def _runnable(block: Block) -> str:
    """The block's text with its substitutions applied (lines whose replacement is "" dropped)."""
    lines = []
    # the file's own substitutions first, then those of every file ("*")
    ordered = sorted(SUBSTITUTIONS.items(), key=lambda item: item[0][0] == "*")
    for line in block.text.splitlines():
        for (file, old), (new, _why) in ordered:
            if file in (block.file, "*") and old in line:
                line = line.replace(old, new) if new else ""
        if line.strip():
            lines.append(line)
    return "\n".join(lines) + "\n"


#: the environment as the session starts: a chain's commands get it, not what the worker's own
#: tests have set since (torch's inductor sets ``TORCHINDUCTOR_CACHE_DIR`` in the worker when a
#: test compiles; a chain with it would not match its docs zygote and run every command fresh)
_SESSION_ENV = dict(os.environ)


def _env(bin_dir: Path, zygote: str = "") -> dict[str, str]:
    env = {k: v for k, v in _SESSION_ENV.items() if not k.startswith(("OPENAI", "GEMINI", "HF_"))}
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}",
        PYTHONPATH=path.rstrip(os.pathsep),
        COLUMNS="80",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        MEDIBENCH_DOCS_ZYGOTE=zygote,
    )
    return env


def _shims(folder: Path) -> Path:
    """``medibench`` and ``python`` on the chain's PATH: ``medibench`` and ``python -m
    medibench.X`` through the docs zygote when its environment allows, else fresh."""
    folder.mkdir(parents=True, exist_ok=True)
    zygote = f"{sys.executable} -S -E {Path(__file__).with_name('_zygote.py')}"
    for name, argv in (("medibench", f"{zygote} client"), ("python", f"{zygote} python")):
        shim = folder / name
        shim.write_text(f'#!/bin/sh\nexec {argv} "$@"\n', encoding="utf-8")
        shim.chmod(0o755)
    return folder


def test_every_block_has_a_current_row():
    blocks = {(b.file, b.ordinal): b for b in shell_blocks()}
    rows = {(r.file, r.ordinal): r for r in table_rows()}
    missing = sorted(set(blocks) - set(rows))
    stale = sorted(set(rows) - set(blocks))
    assert not missing, f"blocks without a row in {TABLE.name}: {missing}"
    assert not stale, f"rows of {TABLE.name} with no block: {stale}"
    for key, row in rows.items():
        assert row.first == blocks[key].first, f"{key}: the block now starts {blocks[key].first!r}"
        assert row.status in {"runs", "partly"}, f"{key} is not run: {row.why}"
        assert row.status == "runs" or row.why, f"{key}: say what is left out"
    assert len(blocks) == 45  # the count README and blocks.md state


def test_every_substitution_applies_to_a_block():
    texts = defaultdict(str)
    for b in shell_blocks():
        texts[b.file] += b.text
    everything = "".join(texts.values())
    for (file, old), (_new, why) in SUBSTITUTIONS.items():
        assert old in (everything if file == "*" else texts[file]) and why, (file, old)


@pytest.fixture(scope="session")
def standin_cache(tmp_path_factory) -> Path:
    """A folder the stand-in modules share across chains: one per session, shared by its xdist
    workers (the session's temporary root), so the fake Hub's files are built once (the
    stand-ins build into a scratch folder renamed into place)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' basetemps are folders of the session's
    folder = root / "docs-standins"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def docs_zygote(tmp_path_factory) -> Iterator[str]:
    """The folder of this worker's docs zygote (tests/docs/_zygote.py): a server that imports
    torch, diffusers and transformers once and forks each ``medibench`` command of the chains
    whose environment matches its own (the first chain waits until it listens).
    ``MEDIBENCH_DOCS_FORK=0`` runs every command fresh."""
    if os.environ.get("MEDIBENCH_DOCS_FORK") == "0":
        yield ""
        return
    folder = tempfile.mkdtemp(prefix="mbz-")  # a Unix socket's path has at most 107 bytes
    log = tmp_path_factory.mktemp("zygote") / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("_zygote.py")), "serve", folder],
            env={**_env(Path(folder), folder), "MEDIBENCH_DOCS_ZYGOTE_PARENT": str(os.getpid())},
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    _SERVERS[folder] = (server, log)
    try:
        _wait_for(folder)
        yield folder
        _alive(folder)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_for(folder: str, timeout: float = 300.0) -> None:
    """Wait until the zygote listens (its imports take ~10 s of CPU; a chain started before
    would run its commands fresh, each importing them again); fail if it exits first."""
    deadline = time.monotonic() + timeout
    while not any(name.endswith(".sock") for name in os.listdir(folder)):
        _alive(folder)
        if time.monotonic() > deadline:
            pytest.fail(f"the docs zygote did not listen within {timeout:.0f} s")
        time.sleep(0.1)


#: the docs zygote's folder -> (its server process, its log)
_SERVERS: dict[str, tuple[subprocess.Popen, Path]] = {}


def _alive(folder: str) -> None:
    """Fail, with the server's log, when this worker's docs zygote has exited: its chains would
    still pass, each command a fresh process (slower, and the zygote's fault unseen)."""
    if folder not in _SERVERS:
        return  # MEDIBENCH_DOCS_FORK=0: no server
    server, log = _SERVERS[folder]
    if server.poll() is not None:
        pytest.fail(f"the docs zygote exited ({server.returncode}):\n"
                    f"{log.read_text(errors='replace')[-3000:]}")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("file", "blocks"),
    [pytest.param(f, b, id=f if c == "all" else f"{f}:{c}") for f, c, b in chains()],
)
def test_the_blocks_that_run_run(file, blocks, tmp_path, standin_cache, docs_zygote):
    ordinals = set(blocks)
    # a developer's aid: DOCS_BLOCKS="README.md:4,6 docs/train.md:1" runs only those blocks
    only = dict(item.split(":") for item in os.environ.get("DOCS_BLOCKS", "").split())
    if only:
        ordinals &= {int(n) for n in only.get(file, "").split(",") if n}
        if not ordinals:
            pytest.skip(f"DOCS_BLOCKS names none of {file} blocks {blocks}")
    chosen = frozenset(ordinals)
    env = _env(_shims(tmp_path / "bin"), docs_zygote)
    work = tmp_path / "work"
    work.mkdir()
    with ExitStack() as stack:
        for module in standins.modules():
            if hasattr(module, "standins"):
                stack.enter_context(module.standins(file, work, env, standin_cache, chosen))
        _run_blocks(file, ordinals, work, env)
    for module in standins.modules():
        if hasattr(module, "check"):
            module.check(file, chosen, work)
    _alive(docs_zygote)


def _run_blocks(file: str, ordinals: set[int], work: Path, env: dict[str, str]) -> None:
    times = os.environ.get("DOCS_BLOCK_TIMES")  # a developer's aid: file, block, seconds
    for block in (b for b in shell_blocks() if b.file == file and b.ordinal in ordinals):
        script = "set -euo pipefail\n" + _runnable(block)
        trace = os.environ.get("DOCS_TRACE")  # a developer's aid: each command with its start
        if trace:
            script = "PS4='+ $EPOCHREALTIME '; set -x\n" + script
        start = time.perf_counter()
        res = subprocess.run(
            ["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, check=False
        )
        if trace:
            with open(trace, "a", encoding="utf-8") as f:
                f.write("".join(x + "\n" for x in res.stderr.splitlines() if x.startswith("+ ")))
        if times:
            with open(times, "a", encoding="utf-8") as f:
                f.write(f"{file}\t{block.ordinal}\t{time.perf_counter() - start:.1f}\n")
        assert res.returncode == 0, (
            f"{block.file} block {block.ordinal} (line {block.line}) failed:\n{script}\n"
            f"--- stdout\n{res.stdout[-3000:]}\n--- stderr\n{res.stderr[-3000:]}"
        )
