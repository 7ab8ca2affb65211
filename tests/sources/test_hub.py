"""``medibench download`` and the source manifest, against a local fake of the Hub."""

import hashlib
import json

import pytest
from typer.testing import CliRunner

from medibench.benchmarks import BENCHMARKS
from medibench.cli import app
from medibench.datasets import load_dataset
from medibench.sources._hub import (
    SOURCE_MANIFEST,
    HubDownloadError,
    HubSource,
    SourceMismatchError,
    download_source,
    verify_source,
)
from tests.runs.conftest import make_native
from tests.sources.fake_hub import FakeRepo, fake_hub

pytest.importorskip("huggingface_hub")

runner = CliRunner()
MEDGEN_SHA = BENCHMARKS.get("medgen").hub.revision


def _native_repo(tmp_path, repo_id="someone/tiny-native"):
    data = make_native(tmp_path / "src", n=3)
    files = {p.relative_to(data).as_posix(): p.read_bytes() for p in data.rglob("*") if p.is_file()}
    return FakeRepo(repo_id, {**files, "extra/notes.txt": b"left out by the patterns\n"})


def test_download_writes_the_files_and_a_manifest_with_their_hashes(tmp_path, hub_env):
    repo = _native_repo(tmp_path)
    with fake_hub(repo) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        source = HubSource(repo.repo_id, revision="main", allow_patterns=("samples.jsonl", "img/*"))
        manifest = download_source(source, tmp_path / "out", benchmark="native")
    out = tmp_path / "out"
    wanted = {p: d for p, d in repo.files.items() if not p.startswith("extra/")}
    assert not (out / "extra").exists()
    recorded = json.loads((out / SOURCE_MANIFEST).read_text())
    assert recorded["repo_id"] == repo.repo_id
    assert recorded["requested_revision"] == "main"
    assert recorded["resolved_revision"] == repo.sha == manifest.resolved_revision
    assert recorded["pinned"] is False
    assert recorded["licence"] == "cc-by-4.0"  # read from the dataset card
    assert {f["path"]: (f["size"], f["sha256"]) for f in recorded["files"]} == {
        p: (len(d), hashlib.sha256(d).hexdigest()) for p, d in wanted.items()
    }
    for path, data in wanted.items():
        assert (out / path).read_bytes() == data
    assert all(r.split()[1].startswith(("/api/datasets/", "/datasets/")) for r in hub.requests)
    assert verify_source(out) == manifest
    assert len(load_dataset(f"native:{out}")) == 3


def test_a_changed_file_makes_loading_fail_naming_it_and_both_hashes(tmp_path, hub_env):
    repo = _native_repo(tmp_path)
    with fake_hub(repo) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        download_source(HubSource(repo.repo_id, revision="main"), tmp_path / "out")
    image = tmp_path / "out" / "img" / "s001.png"
    recorded = hashlib.sha256(image.read_bytes()).hexdigest()
    image.write_bytes(image.read_bytes() + b"\0")
    with pytest.raises(SourceMismatchError) as info:
        load_dataset(f"native:{tmp_path / 'out'}")
    message = str(info.value)
    assert str(image) in message
    assert recorded in message and hashlib.sha256(image.read_bytes()).hexdigest() in message
    image.unlink()
    with pytest.raises(SourceMismatchError, match="s001.png.*missing"):
        verify_source(tmp_path / "out")


def test_cli_downloads_medgen_at_its_pinned_commit(tmp_path, hub_env):
    repo = FakeRepo(
        "Jack04810/MedGEN-Bench",
        {
            "parquet/image_editing/test-00000.parquet": b"PAR1 fake shard",
            "parquet/vqa/test-00000.parquet": b"PAR1 another",
            "README.md": b"# card\n",
        },
        sha=MEDGEN_SHA,
        branches=(),  # only the pinned commit exists: a request for `main` would fail
    )
    out = tmp_path / "MedGEN-Bench"
    with fake_hub(repo) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        res = runner.invoke(app, ["download", "medgen", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "licence: cc-by-4.0" in res.output
    assert f"--dataset medgen:{out}" in res.output
    assert "unpinned" not in res.output
    recorded = json.loads((out / SOURCE_MANIFEST).read_text())
    assert recorded["benchmark"] == "medgen"
    assert recorded["requested_revision"] == recorded["resolved_revision"] == MEDGEN_SHA
    assert [f["path"] for f in recorded["files"]] == [
        "parquet/image_editing/test-00000.parquet",
        "parquet/vqa/test-00000.parquet",
    ]
    assert not (out / "README.md").exists()
    assert (
        f"GET /datasets/Jack04810/MedGEN-Bench/resolve/{MEDGEN_SHA}/README.md" not in hub.requests
    )


def test_cli_says_an_unpinned_source_is_unpinned_and_records_the_commit(tmp_path, hub_env):
    repo = FakeRepo("PaintBench/PaintBench", {"PaintBench/test.parquet": b"PAR1"}, sha="a" * 40)
    out = tmp_path / "pb"
    with fake_hub(repo) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        res = runner.invoke(app, ["download", "paintbench", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "unpinned" in res.output and "'main'" in res.output
    recorded = json.loads((out / SOURCE_MANIFEST).read_text())
    assert (recorded["requested_revision"], recorded["resolved_revision"]) == ("main", "a" * 40)
    assert recorded["pinned"] is False


def test_offline_without_the_files_says_how_to_download(tmp_path, hub_env):
    repo = _native_repo(tmp_path)
    with fake_hub(repo) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        source = HubSource(repo.repo_id, revision="main")
        download_source(source, tmp_path / "done")
        hub_env.setenv("HF_HUB_OFFLINE", "1")
        with pytest.raises(HubDownloadError) as info:
            download_source(source, tmp_path / "empty", benchmark="medgen")
        res = runner.invoke(app, ["download", "medgen", "--out", str(tmp_path / "m")])
        # a folder already downloaded at that revision is re-verified, not fetched
        assert download_source(source, tmp_path / "done").resolved_revision == repo.sha
        asked = len(hub.requests)
        assert asked and all(source.repo_id in r for r in hub.requests)
    message = str(info.value)
    assert "HF_HUB_OFFLINE" in message and "not downloaded" in message
    assert f"medibench download medgen --out {tmp_path / 'empty'}" in message
    assert res.exit_code == 2 and "HF_HUB_OFFLINE" in res.output


def test_download_of_a_benchmark_without_a_hub_source_lists_those_with_one(tmp_path):
    res = runner.invoke(app, ["download", "native", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2
    assert "no hub source" in res.output
    for name in ("medebench", "medgen", "miedb", "paintbench"):
        assert name in res.output
    assert not (tmp_path / "x").exists()
    res = runner.invoke(app, ["download", "medgn", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "medgen" in res.output


def test_unknown_revision_is_a_clear_error(tmp_path, hub_env):
    repo = _native_repo(tmp_path)
    with fake_hub(repo) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(HubDownloadError, match="no revision 'v9'"):
            download_source(HubSource(repo.repo_id, revision="v9"), tmp_path / "out")


def test_the_declared_sources():
    declared = {b.name: b.hub for b in BENCHMARKS if b.hub is not None}
    assert {name: s.repo_id for name, s in declared.items()} == {
        "medebench": "LIUMinghao/MedEBench",
        "medgen": "Jack04810/MedGEN-Bench",
        "miedb": "Laiyf/MieDB-100k",
        "paintbench": "PaintBench/PaintBench",
    }
    assert declared["medgen"].pinned and declared["medgen"].allow_patterns == ("parquet/**",)
    assert all(s.repo_type == "dataset" for s in declared.values())
    # the unpinned ones are so by name, never by an invented sha
    assert {n for n, s in declared.items() if not s.pinned} == {"medebench", "miedb", "paintbench"}
    assert all(s.revision == "main" for s in declared.values() if not s.pinned)
    with pytest.raises(ValueError, match="OWNER/NAME"):
        HubSource("no-owner", revision="main")


def test_files_verified_before_are_not_hashed_again_unless_changed(tmp_path, hub_env, monkeypatch):
    from medibench.sources import _hub

    repo = _native_repo(tmp_path)
    with fake_hub(repo) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        download_source(HubSource(repo.repo_id, revision="main"), tmp_path / "out")
    out = tmp_path / "out"
    verify_source(out)  # hashes every file once, records size and mtime
    assert (out / ".medibench-verified.json").is_file()
    hashed = []
    real = _hub.sha256_file
    monkeypatch.setattr(_hub, "sha256_file", lambda p: hashed.append(p.name) or real(p))
    verify_source(out)
    assert hashed == []
    image = out / "img" / "s001.png"
    image.write_bytes(image.read_bytes())  # same bytes, a new mtime: hashed again, still fine
    verify_source(out)
    assert hashed == ["s001.png"]
    verify_source(out, full=True)
    assert len(hashed) == 1 + len(_manifest_files(out))
    image.write_bytes(image.read_bytes() + b"\0")
    with pytest.raises(SourceMismatchError, match="s001.png"):
        verify_source(out)


def _manifest_files(folder):
    return json.loads((folder / SOURCE_MANIFEST).read_text())["files"]
