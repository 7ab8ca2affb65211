"""Benchmark data as users download it, behind the same names.

- **The Hub.** For the files whose blocks download (:data:`FILES`), the local fake Hub of
  tests/sources/fake_hub.py runs on 127.0.0.1 and ``HF_ENDPOINT`` points at it. It serves a tiny
  copy of every benchmark repository that ``medibench download`` and ``hf:`` paths fetch, at the
  repository id and revision each benchmark's ``Benchmark.hub`` declares (a pinned commit is
  served at that commit only; an unpinned branch at a made-up commit). The copies come from the
  tests' layout builders (tests/benchmarks/*/conftest.py and their Parquet writers), so the real
  download, hash checks and manifest verification run unchanged. ``HF_HUB_OFFLINE`` is lifted
  for those files and ``HF_HOME`` is a folder of this test session, never the user's cache.
- **GitHub.** ``git clone https://github.com/mliuby/MedEBench`` becomes
  ``python -m tests.docs.standins.hub medebench-github MedEBench``: the repository's
  ``editing/`` tree and its ``generated_images/<model>/<id>_<k>.png``, from the MedEBench builder.
- **Model outputs.** The prediction folders the blocks score (``MieDB-100k/inference/
  eval_results``, ``medgen_outputs``, ``model_outputs``, ``generated_images``) are the user's
  own model outputs: they are placed in the work folder before the blocks run, made from the
  builders' predictions (:data:`OUTPUTS`).

Everything is built once per test session under ``cache/hub`` (``python -m
tests.docs.standins.hub build DIR`` builds the same folder by hand).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.docs.standins import ALL

#: The blocks that download from the Hub, by file (docs/models.md block 3 downloads MedEBench).
DOWNLOADS = {"README.md": (3,), "docs/models.md": (3,), "docs/sources.md": (1, 2, 3)}
FILES = tuple(DOWNLOADS)

#: The prediction folders each file's blocks score, and the blocks that score them: the user's
#: model outputs, made from the builders' predictions and copied into the work folder before the
#: blocks run.
OUTPUTS = {
    "README.md": {"MieDB-100k": (3,), "medgen_outputs": (3, 8), "model_outputs": (3,)},
    "docs/sources.md": {"MieDB-100k": (2,), "medgen_outputs": (1,), "generated_images": (1,)},
}

#: What README block 3 (the downloads and the clone) makes that later README blocks read, and
#: those blocks: a chain of tests/docs/test_docs_run.py without block 3 gets it from here, from
#: the builders of the same files (:func:`block_3_output`).
BLOCK_3 = {"MedEBench": (5, 8), "MieDB-100k-data": (4,), "MedGEN-Bench": (8, 13)}

SUBSTITUTIONS = {
    ("README.md", "git clone https://github.com/mliuby/MedEBench"): (
        "python -m tests.docs.standins.hub medebench-github MedEBench",
        "GitHub: the tests' MedEBench builder writes the repository's editing/ tree and "
        "generated_images/ (5 samples; 2 models' outputs)",
    ),
}


@contextmanager
def standins(
    file: str, work: Path, env: dict[str, str], cache: Path, blocks: frozenset[int] = ALL
) -> Iterator[None]:
    """The fake Hub (and ``HF_ENDPOINT``, ``HF_HOME``) for the blocks that download, the model
    outputs for the blocks that score them, and what README block 3 makes for a chain without
    it."""
    needs = [name for name, readers in OUTPUTS.get(file, {}).items() if blocks & set(readers)]
    if file == "README.md" and 3 not in blocks:
        for name, readers in BLOCK_3.items():
            if blocks & set(readers):
                block_3_output(name, work, cache)
    if not blocks & set(DOWNLOADS.get(file, ())):
        for name in needs:
            shutil.copytree(build(cache / "hub") / "outputs" / name, work / name, symlinks=True)
        yield
        return
    from tests.sources.fake_hub import fake_hub

    built = build(cache / "hub")
    for name in needs:
        shutil.copytree(built / "outputs" / name, work / name, symlinks=True)
    home = Path(tempfile.mkdtemp(prefix="hf-home-", dir=cache))  # this file's own Hub cache
    with fake_hub(*hub_repos(built / "repos")) as hub:
        env.pop("HF_HUB_OFFLINE", None)
        env.update(HF_ENDPOINT=hub.url, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1")
        try:
            yield
        finally:
            shutil.rmtree(home, ignore_errors=True)


def block_3_output(name: str, work: Path, cache: Path) -> None:
    """``work/name`` as README block 3 leaves it (:data:`BLOCK_3`): the clone of MedEBench (the
    same builder as its ``git clone`` substitution), or a download: the files the fake Hub
    serves for it (the pattern's files, without the manifest the download adds)."""
    if name == "MedEBench":
        medebench_github(work / name)
        return
    repos = build(cache / "hub") / "repos"
    if name == "MieDB-100k-data":
        (work / name).mkdir()
        shutil.copy(repos / _repo_id("miedb") / "dataBenchmark_00.tar", work / name)
    else:  # MedGEN-Bench: its parquet/** (the download's --include)
        shutil.copytree(repos / _repo_id("medgen") / "parquet", work / name / "parquet")


def build(folder: Path) -> Path:
    """``folder`` with ``repos/<owner>/<name>/`` (each benchmark's Hub files) and ``outputs/``
    (the prediction folders of :data:`OUTPUTS`); built the first time, in a temporary sibling
    renamed into place, so a half-built one is never found, under a lock, so that the xdist
    workers sharing ``folder`` build it once."""
    if folder.exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if folder.exists():  # built while this process waited
            return folder
        part = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        try:
            for bench in _hub_benchmarks():
                _REPOS[bench.name](part / "repos" / bench.hub.repo_id, part / "build" / bench.name)
            release = part / "repos" / _repo_id("medgen")
            _medgen_outputs(release, part / "outputs" / "medgen_outputs")
            _outputs_from(part / "build", part / "outputs")
            shutil.rmtree(part / "build")
            part.rename(folder)
        finally:
            shutil.rmtree(part, ignore_errors=True)
    return folder


def hub_repos(repos: Path) -> list:
    """A :class:`~tests.sources.fake_hub.FakeRepo` per benchmark with a Hub source, holding the
    files under ``repos/<repo_id>``: at the pinned commit only, or at a made-up commit that its
    branch resolves to."""
    from tests.sources.fake_hub import FakeRepo

    out = []
    for bench in _hub_benchmarks():
        source = bench.hub
        root = repos / source.repo_id
        files = {
            p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }
        if source.pinned:
            sha, branches = source.revision, ()
        else:  # a commit of the fake's own, what the branch resolves to
            sha, branches = hashlib.sha1(source.repo_id.encode()).hexdigest(), (source.revision,)
        out.append(FakeRepo(source.repo_id, files, sha=sha, branches=branches))
    return out


def medebench_github(out: Path) -> Path:
    """The MedEBench GitHub repository as cloned into ``out``: ``editing/`` and
    ``generated_images/`` (refused, as ``git clone`` refuses, when ``out`` holds files)."""
    from tests.benchmarks.medebench.conftest import build_medebench

    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"destination path '{out}' already exists and is not an empty directory")
    return build_medebench(out)


# -- the repositories ---------------------------------------------------------------------------
def _hub_benchmarks() -> list:
    from medibench.benchmarks import BENCHMARKS

    benches = [b for b in BENCHMARKS if b.hub is not None]
    unknown = sorted(b.name for b in benches if b.name not in _REPOS)
    assert not unknown, f"no Hub stand-in for benchmark(s) {unknown}: add a builder to _REPOS"
    return benches


def _repo_id(name: str) -> str:
    from medibench.benchmarks import BENCHMARKS

    return BENCHMARKS.get(name).hub.repo_id


def _card(repo: Path, title: str) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "README.md").write_text(f"---\nlicense: cc-by-4.0\n---\n# {title} (a test copy)\n")


def _medebench_repo(repo: Path, scratch: Path) -> None:
    """The Hub copy: the GitHub tree's ``editing/`` (the outputs stay on GitHub)."""
    from tests.benchmarks.medebench.conftest import build_medebench

    tree = build_medebench(scratch)
    shutil.copytree(tree / "editing", repo / "editing")
    _card(repo, "MedEBench")


def _miedb_repo(repo: Path, scratch: Path) -> None:
    """``dataBenchmark_00.tar`` holding ``dataBenchmark/``, and one more file the download's
    pattern leaves out."""
    import tarfile

    from tests.benchmarks.miedb.conftest import build_layout

    layout = build_layout(scratch)
    repo.mkdir(parents=True)
    with tarfile.open(repo / "dataBenchmark_00.tar", "w") as tar:
        tar.add(layout.root / "dataBenchmark", arcname="dataBenchmark")
    _card(repo, "MieDB-100k")


def _medgen_repo(repo: Path, scratch: Path) -> None:
    """The Parquet release (``parquet/{image_editing,multimodal_generation,vqa}``) and a card
    outside the download's ``parquet/**``."""
    from tests.benchmarks.medgen.test_parquet import build_release

    build_release(repo)
    _card(repo, "MedGEN-Bench")


def _paintbench_repo(repo: Path, scratch: Path) -> None:
    """``<config>/<split>-00000-of-00001.parquet`` for configs PaintBench (test, dev) and
    TinyGrafixBench (test), as ``push_to_hub`` lays them out."""
    from tests.benchmarks.paintbench.conftest import build_paintbench
    from tests.benchmarks.paintbench.test_parquet import hub_rows, write_shard

    tree = build_paintbench(scratch)
    rows = hub_rows(tree["bench"])
    write_shard(repo / "PaintBench" / "test-00000-of-00001.parquet", rows)
    write_shard(repo / "PaintBench" / "dev-00000-of-00001.parquet", rows[:3])
    write_shard(repo / "TinyGrafixBench" / "test-00000-of-00001.parquet", rows[3:5])
    _card(repo, "PaintBench")


_REPOS: dict[str, Callable[[Path, Path], None]] = {
    "medebench": _medebench_repo,
    "medgen": _medgen_repo,
    "miedb": _miedb_repo,
    "paintbench": _paintbench_repo,
}


# -- the model outputs ----------------------------------------------------------------------------
def _outputs_from(scratch: Path, outputs: Path) -> None:
    """The builders' own predictions, where the docs score them."""
    shutil.copytree(scratch / "medebench" / "generated_images", outputs / "generated_images")
    eval_results = outputs / "MieDB-100k" / "inference" / "eval_results"
    shutil.copytree(scratch / "miedb" / "eval_results", eval_results)
    shutil.copytree(scratch / "paintbench" / "model_outputs", outputs / "model_outputs")


def _medgen_outputs(release: Path, out: Path) -> None:
    """One model's outputs for the Parquet release: each editing sample's ground truth with a
    little noise, as ``<sample_id>_0.png`` (the MedGEN builder has no outputs for it)."""
    import numpy as np

    from medibench.datasets import load_dataset
    from medibench.io import read_image, write_image

    with tempfile.TemporaryDirectory() as tmp:  # the adapter writes its image cache beside it
        copy = Path(shutil.copytree(release, Path(tmp) / "release"))
        rng = np.random.default_rng(5)
        for sample in load_dataset(f"medgen:{copy}"):
            truth = read_image(sample.target).astype(np.int16)
            noisy = np.clip(truth + rng.integers(-6, 7, truth.shape), 0, 255).astype(np.uint8)
            write_image(out / "toy-editor" / f"{sample.sample_id}_0.png", noisy)


def main(argv: list[str]) -> int:
    usage = "usage: python -m tests.docs.standins.hub medebench-github DIR | build DIR"
    if len(argv) != 2 or argv[0] not in {"medebench-github", "build"}:
        print(usage, file=sys.stderr)
        return 2
    out = Path(argv[1])
    if argv[0] == "medebench-github":
        medebench_github(out)
        print(f"{out}: editing/ and generated_images/ (the tests' MedEBench builder)")
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        print(build(out))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main(sys.argv[1:]))
