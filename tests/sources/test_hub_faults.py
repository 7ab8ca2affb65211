"""``medibench download`` against a Hub that misbehaves: wrong bytes, another commit, a cut-off
body, a redirect loop, 500, 404. Each is one line naming the file and the status, exit 2, no
traceback, and nothing recorded as verified; a file changed or added after the download is
caught whatever sub folder of it is loaded."""

from __future__ import annotations

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
from tests.sources.fake_hub import FakeRepo, fake_hub

pytest.importorskip("huggingface_hub")

runner = CliRunner()
MEDGEN_SHA = BENCHMARKS.get("medgen").hub.revision
FILES = {
    "parquet/image_editing/test-00000.parquet": b"PAR1 editing shard " * 40,
    "parquet/vqa/test-00000.parquet": b"PAR1 vqa shard " * 40,
    "parquet/vqa/notes.txt": b"a small file kept in git, not LFS\n",
}


def _medgen(**kw) -> FakeRepo:
    return FakeRepo("Jack04810/MedGEN-Bench", dict(FILES), sha=MEDGEN_SHA, branches=(), **kw)


def _download(tmp_path, hub_env, repo, *extra):
    out = tmp_path / "MedGEN-Bench"
    with fake_hub(repo) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        res = runner.invoke(app, ["download", "medgen", "--out", str(out), *extra])
    return res, out


def _one_line_error(res) -> str:
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.exception is None or isinstance(
        res.exception, SystemExit
    )
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1, res.output
    return " ".join(res.output.split())


@pytest.mark.parametrize(
    "path", ["parquet/vqa/test-00000.parquet", "parquet/vqa/notes.txt"]
)  # an LFS file (sha256) and a git file (blob id)
def test_bytes_other_than_the_hub_promises_are_refused_and_not_recorded(tmp_path, hub_env, path):
    res, out = _download(tmp_path, hub_env, _medgen(faults={path: "wrong-bytes"}))
    message = _one_line_error(res)
    assert f"file {path}" in message and "not what the Hub's metadata promises" in message
    data = FILES[path]
    promised = (hashlib.sha256(data).hexdigest() if path.endswith(".parquet")
                else hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest())  # fmt: skip
    assert promised in message
    assert not (out / SOURCE_MANIFEST).exists()
    assert not (out / path).exists()  # the wrong bytes are removed, never trusted later


@pytest.mark.parametrize(
    ("fault", "status"),
    [("500", "HTTP 500"), ("404", "HTTP 404"), ("redirect-loop", "edirect"),
     ("truncate", "download failed")],  # fmt: skip
)
def test_an_http_failure_of_a_file_is_one_line_naming_it(tmp_path, hub_env, fault, status):
    path = "parquet/vqa/test-00000.parquet"
    res, out = _download(tmp_path, hub_env, _medgen(faults={path: fault}))
    message = _one_line_error(res)
    assert f"file {path}: download failed" in message and status in message
    assert not (out / SOURCE_MANIFEST).exists()


@pytest.mark.parametrize(("fault", "status"), [("500", "HTTP 500"), ("redirect-loop", "edirect")])
def test_an_http_failure_of_the_api_is_one_line(tmp_path, hub_env, fault, status):
    repo = _medgen()
    out = tmp_path / "MedGEN-Bench"
    with fake_hub(repo) as hub:
        hub.api_fault = fault
        hub_env.setenv("HF_ENDPOINT", hub.url)
        res = runner.invoke(app, ["download", "medgen", "--out", str(out)])
    message = _one_line_error(res)
    assert "Jack04810/MedGEN-Bench" in message and status in message
    assert not (out / SOURCE_MANIFEST).exists()


def test_a_snapshot_at_another_commit_than_the_pinned_one_is_refused(tmp_path, hub_env):
    other = "f" * 40
    res, out = _download(tmp_path, hub_env, _medgen(answer_sha=other))
    message = _one_line_error(res)
    assert f"asked for commit {MEDGEN_SHA}" in message and f"answered commit {other}" in message
    assert "--revision" in message
    assert not (out / SOURCE_MANIFEST).exists()


def test_revision_asked_for_is_downloaded_and_recorded_as_asked(tmp_path, hub_env):
    repo = FakeRepo("Jack04810/MedGEN-Bench", dict(FILES), sha="e" * 40, branches=("main",))
    res, out = _download(tmp_path, hub_env, repo, "--revision", "main")
    assert res.exit_code == 0, res.output
    recorded = json.loads((out / SOURCE_MANIFEST).read_text())
    assert (recorded["requested_revision"], recorded["resolved_revision"]) == ("main", "e" * 40)
    assert recorded["pinned"] is False


def test_a_failed_download_removes_an_earlier_manifest(tmp_path, hub_env):
    res, out = _download(tmp_path, hub_env, _medgen())
    assert res.exit_code == 0, res.output and (out / SOURCE_MANIFEST).is_file()
    broken = _medgen(faults={"parquet/vqa/notes.txt": "500"})
    res, out = _download(tmp_path, hub_env, broken, "--revision", MEDGEN_SHA)
    assert res.exit_code == 0  # already there at that commit: not fetched again
    (out / "parquet/vqa/notes.txt").unlink()
    res, out = _download(tmp_path, hub_env, broken)
    _one_line_error(res)
    assert not (out / SOURCE_MANIFEST).exists()


def _downloaded(tmp_path, hub_env):
    with fake_hub(_medgen()) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        download_source(BENCHMARKS.get("medgen").hub, tmp_path / "DL", benchmark="medgen")
    return tmp_path / "DL"


@pytest.mark.parametrize("loaded", ["", "parquet", "parquet/vqa", "parquet/vqa/test-00000.parquet"])
@pytest.mark.parametrize("changed", ["parquet/vqa/test-00000.parquet",
                                     "parquet/image_editing/test-00000.parquet"])  # fmt: skip
def test_a_file_changed_after_download_is_caught_from_any_sub_folder(
    tmp_path, hub_env, loaded, changed
):
    out = _downloaded(tmp_path, hub_env)
    verify_source(out / loaded)
    (out / changed).write_bytes((out / changed).read_bytes() + b"\0")
    with pytest.raises(SourceMismatchError, match=f"{changed}: sha256 .* does not match"):
        verify_source(out / loaded)


@pytest.mark.parametrize("loaded", ["", "parquet", "parquet/vqa"])
def test_a_file_added_after_download_is_refused(tmp_path, hub_env, loaded):
    out = _downloaded(tmp_path, hub_env)
    (out / "parquet/vqa/test-00001.parquet").write_bytes(b"PAR1 smuggled")
    with pytest.raises(SourceMismatchError, match="test-00001.parquet: not part of the download"):
        verify_source(out / loaded)
    (out / "parquet/vqa/test-00001.parquet").unlink()
    (out / "parquet/vqa/my-notes.md").write_text("a file of a kind the download has none of")
    assert verify_source(out / loaded) is not None


def test_load_dataset_of_a_sub_folder_verifies_the_download(tmp_path, hub_env):
    out = _downloaded(tmp_path, hub_env)
    (out / "parquet/vqa/test-00000.parquet").write_bytes(b"PAR1 other")
    with pytest.raises(SourceMismatchError, match="test-00000.parquet: sha256"):
        load_dataset(f"medgen:{out / 'parquet' / 'vqa'}")


@pytest.mark.parametrize("path", ["../../etc/hostname", "/etc/hostname"])
def test_a_manifest_listing_a_path_outside_its_folder_is_refused(tmp_path, hub_env, path):
    out = _downloaded(tmp_path, hub_env)
    data = json.loads((out / SOURCE_MANIFEST).read_text())
    data["files"].append({"path": path, "size": 1, "sha256": "0" * 64})
    (out / SOURCE_MANIFEST).write_text(json.dumps(data))
    with pytest.raises(SourceMismatchError, match=f"path '{path}' (escapes|is absolute)"):
        verify_source(out)


def test_the_library_call_raises_the_same_error(tmp_path, hub_env):
    with fake_hub(_medgen(faults={"parquet/vqa/notes.txt": "wrong-bytes"})) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        source = HubSource("Jack04810/MedGEN-Bench", revision=MEDGEN_SHA)
        with pytest.raises(HubDownloadError, match="notes.txt: the bytes received"):
            download_source(source, tmp_path / "x")
