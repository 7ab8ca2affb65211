"""The Hub stand-in of the docs run (tests/docs/standins/hub.py): what it serves is what
medibench asks for, and a documented download runs against it."""

from __future__ import annotations

import json
import subprocess
import sys
from fnmatch import fnmatch

import pytest

from medibench.benchmarks import BENCHMARKS
from tests.docs.standins import hub

pytest.importorskip("huggingface_hub")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return hub.build(tmp_path_factory.mktemp("standin") / "hub")


@pytest.mark.slow
def test_every_hub_benchmark_is_served_at_its_declared_repo_and_revision(built):
    repos = {r.repo_id: r for r in hub.hub_repos(built / "repos")}
    declared = {b.hub.repo_id: b.hub for b in BENCHMARKS if b.hub is not None}
    assert (
        set(repos)
        == set(declared)
        == {
            "LIUMinghao/MedEBench",
            "Jack04810/MedGEN-Bench",
            "Laiyf/MieDB-100k",
            "PaintBench/PaintBench",
        }
    )
    for repo_id, source in declared.items():
        repo = repos[repo_id]
        if source.pinned:  # served at that commit only: `main` would be a 404
            assert (repo.sha, repo.branches) == (source.revision, ())
        else:
            assert repo.branches == (source.revision,) and repo.commit("main") == repo.sha
        patterns = source.allow_patterns or ("*",)
        wanted = [p for p in repo.files if any(fnmatch(p, g) for g in patterns)]
        assert wanted, repo_id
        if source.dataset:
            assert source.dataset in wanted
    medgen = repos["Jack04810/MedGEN-Bench"]
    assert medgen.sha == "cee5e7ae410f7c5be12d5fa55464afb094c099b7"
    assert "README.md" in medgen.files  # a file outside parquet/** that the download skips
    outputs = {name for names in hub.OUTPUTS.values() for name in names}
    assert {p.name for p in (built / "outputs").iterdir()} == outputs


@pytest.mark.slow
def test_the_models_md_download_runs_against_the_fake_hub(built, tmp_path):
    work, cache = tmp_path / "work", built.parent
    work.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "PYTHONPATH": ":".join(sys.path)}
    with hub.standins("docs/models.md", work, env, cache):
        assert "HF_HUB_OFFLINE" not in env and env["HF_ENDPOINT"].startswith("http://127.0.0.1:")
        assert env["HF_HOME"].startswith(str(cache))
        command = [sys.executable, "-m", "medibench", "download", "medebench", "--out"]
        res = subprocess.run(
            [*command, "data/MedEBench"], cwd=work, env=env, capture_output=True, text=True
        )
    assert res.returncode == 0, res.stderr
    manifest = json.loads((work / "data/MedEBench/medibench-source.json").read_text())
    assert manifest["repo_id"] == "LIUMinghao/MedEBench"
    assert manifest["requested_revision"] == "main" and not manifest["pinned"]
    assert len(manifest["files"]) == 16  # 5 samples' previous + changed, 4 masks, metadata, card


def test_a_file_that_downloads_nothing_gets_no_fake_hub(tmp_path):
    env = {"HF_HUB_OFFLINE": "1"}
    with hub.standins("docs/suite.md", tmp_path, env, tmp_path):
        assert env == {"HF_HUB_OFFLINE": "1"}
    assert list(tmp_path.iterdir()) == []


def test_the_github_clone_refuses_a_folder_that_holds_files(tmp_path):
    (tmp_path / "MedEBench").mkdir()
    (tmp_path / "MedEBench" / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match="already exists and is not an empty directory"):
        hub.medebench_github(tmp_path / "MedEBench")
    assert [p.name for p in (tmp_path / "MedEBench").iterdir()] == ["notes.txt"]
