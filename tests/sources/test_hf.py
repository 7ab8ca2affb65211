"""``hf:OWNER/NAME[@REVISION]`` dataset paths: the local Hugging Face cache first, ``--download``
through a local fake of the Hub (nothing leaves the machine)."""

import json
import os

import pytest
from typer.testing import CliRunner

from medibench.benchmarks import BENCHMARKS
from medibench.cli import app
from medibench.datasets import DatasetError, load_dataset, resolve_inside
from medibench.sources import HubDownloadError, SourceError
from medibench.sources._hf import HfSpec, parse_hf_path
from tests.benchmarks.medgen.test_parquet import _comparable
from tests.benchmarks.medgen.test_parquet import trees as medgen_trees  # noqa: F401
from tests.sources.fake_hub import FakeRepo, fake_hub
from tests.sources.test_hub import _native_repo

pytest.importorskip("huggingface_hub")

runner = CliRunner()
MEDGEN_SHA = BENCHMARKS.get("medgen").hub.revision


def _files(folder):
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and ".medibench" not in p.as_posix()
    }


def _score(tmp, dataset, preds, name, *extra):
    out = tmp / f"{name}.jsonl"
    args = ["score", "--dataset", dataset, "--predictions", str(preds), "--out", str(out)]
    res = runner.invoke(app, [*args, "--no-progress", *extra])
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in out.read_text().splitlines()], res.output


def test_parse():
    assert parse_hf_path("hf:Jack04810/MedGEN-Bench") == HfSpec("Jack04810/MedGEN-Bench", "")
    assert parse_hf_path("hf:a/b@" + "f" * 40) == HfSpec("a/b", "f" * 40)
    assert str(HfSpec("a/b", "v1")) == "hf:a/b@v1"
    for bad in ("hf:nameonly", "hf:a/b/c", "hf:/b", "hf:a/b@"):
        with pytest.raises(SourceError, match="expected 'hf:OWNER/NAME'"):
            parse_hf_path(bad)


def test_not_cached_says_how_to_download(tmp_path, hub_env):
    with pytest.raises(HubDownloadError) as info:
        load_dataset("native:hf:someone/tiny-native@v2")
    message = str(info.value)
    assert "someone/tiny-native@v2 is not in the local Hugging Face cache" in message
    assert str(tmp_path / "hf_home" / "hub") in message
    assert "--download" in message
    assert "hf download someone/tiny-native --repo-type dataset --revision v2" in message
    res = runner.invoke(
        app,
        ["score", "--dataset", "hf:someone/tiny-native", "--predictions", str(tmp_path)]
        + ["--out", str(tmp_path / "s.jsonl")],
    )
    assert res.exit_code == 2 and "not in the local Hugging Face cache" in res.output


def test_download_then_offline_gives_the_same_samples_and_pixels(tmp_path, hub_env):
    repo = _native_repo(tmp_path)
    folder = load_dataset(f"native:{tmp_path / 'src'}")
    with fake_hub(repo) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        fetched = load_dataset(f"hf:{repo.repo_id}", download=True)
        asked = len(hub.requests)
    assert asked > 0
    # offline now: the snapshot in the cache is found without the network
    hub_env.setenv("HF_HUB_OFFLINE", "1")
    cached = load_dataset(f"native:hf:{repo.repo_id}@{repo.sha}")
    for ds in (fetched, cached):
        assert type(ds).__name__ == type(folder).__name__
        assert [s.sample_id for s in ds] == [s.sample_id for s in folder]
        assert str(ds.root).startswith(str(tmp_path / "hf_home" / "hub"))
        # the snapshot's files are links into the cache's blobs/: allowed, same bytes
        for ours, theirs in zip(ds, folder, strict=True):
            assert os.path.islink(ds.root / "samples.jsonl")
            with open(ours.input, "rb") as a, open(theirs.input, "rb") as b:
                assert a.read() == b.read()
    assert sum("unpinned" in note for note in fetched.notes) == 1
    assert any("downloaded into the Hugging Face cache" in n for n in fetched.notes)
    assert not any("unpinned" in note for note in cached.notes)
    # --download offline is refused, naming the setting
    with pytest.raises(HubDownloadError, match="HF_HUB_OFFLINE is set and .* is not in"):
        load_dataset("native:hf:someone/other", download=True)


def test_download_is_only_for_hub_paths(tmp_path):
    with pytest.raises(ValueError, match="download applies to Hugging Face dataset paths"):
        load_dataset(f"native:{tmp_path}", download=True)


def test_medgen_release_by_repo_name_at_its_pinned_commit(medgen_trees, tmp_path, hub_env):  # noqa: F811
    """``hf:Jack04810/MedGEN-Bench`` is the medgen benchmark, at its pinned commit, with only
    ``parquet/**`` fetched; its score records equal the folder's."""
    release, preds = medgen_trees["release"], medgen_trees["preds"]
    files = {**_files(release), "README.md": b"# card\n"}
    repo = FakeRepo("Jack04810/MedGEN-Bench", files, sha=MEDGEN_SHA, branches=())
    spec = "hf:Jack04810/MedGEN-Bench"
    res = runner.invoke(
        app, ["score", "--dataset", spec, "--predictions", str(preds), "--out", str(tmp_path / "x")]
    )
    assert res.exit_code == 2 and f"Jack04810/MedGEN-Bench@{MEDGEN_SHA} is not in" in res.output
    with fake_hub(repo) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        from_hub, output = _score(tmp_path, spec, preds, "hub", "--download")
        assert not any("README.md" in r for r in hub.requests)
    assert "downloaded into the Hugging Face cache" in output
    hub_env.setenv("HF_HUB_OFFLINE", "1")
    cached, _ = _score(tmp_path, f"medgen:{spec}@{MEDGEN_SHA}", preds, "cached")
    from_folder, _ = _score(tmp_path, f"medgen:{release}", preds, "folder")
    # Three scored samples under each default protocol (medgen@code and medgen@1).
    assert [r["status"] for r in from_folder].count("ok") == 6
    assert {r["protocol"] for r in from_folder} == {"medgen"}
    assert {r["protocol_version"] for r in from_folder} == {"code", "1"}
    assert _comparable(from_hub) == _comparable(cached) == _comparable(from_folder)


def test_a_link_out_of_the_snapshots_repository_is_still_refused(tmp_path):
    repo = tmp_path / "hub" / "datasets--a--b"
    snapshot = repo / "snapshots" / ("0" * 40)
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "x").write_bytes(b"ok")
    (tmp_path / "secret").write_bytes(b"no")
    (snapshot / "img").mkdir(parents=True)
    (snapshot / "img" / "in.png").symlink_to(repo / "blobs" / "x")
    (snapshot / "img" / "out.png").symlink_to(tmp_path / "secret")
    assert resolve_inside(snapshot.resolve(), "img/in.png", what="t") == (repo / "blobs" / "x")
    with pytest.raises(DatasetError, match="through a symbolic link"):
        resolve_inside(snapshot.resolve(), "img/out.png", what="t")
    # outside a hub cache, a link to a sibling folder is refused as before
    plain = tmp_path / "plain"
    (plain / "img").mkdir(parents=True)
    (plain / "img" / "in.png").symlink_to(repo / "blobs" / "x")
    with pytest.raises(DatasetError, match="through a symbolic link"):
        resolve_inside(plain.resolve(), "img/in.png", what="t")


@pytest.mark.parametrize("path", ["img/s001.png", "samples.jsonl"])  # LFS (sha256), git (blob id)
def test_a_download_with_bytes_other_than_the_listing_promises_is_refused(tmp_path, hub_env, path):
    """The hf: path checks each downloaded file as ``medibench download`` does; the refused
    snapshot leaves the cache, so the wrong bytes are never loaded later."""
    import hashlib

    repo = _native_repo(tmp_path)
    repo.faults[path] = "wrong-bytes"
    data = repo.files[path]
    promised = (hashlib.sha256(data).hexdigest() if path.endswith(".png")
                else hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest())  # fmt: skip
    snapshot = tmp_path / "hf_home" / "hub" / "datasets--someone--tiny-native" / "snapshots"
    with fake_hub(repo) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(HubDownloadError) as info:
            load_dataset(f"native:hf:{repo.repo_id}", download=True)
        message = " ".join(str(info.value).split())
        assert f"someone/tiny-native@{repo.sha}: file {path}: the bytes received" in message
        assert promised in message and "not what the Hub's metadata promises" in message
        assert "the snapshot was removed from the Hugging Face cache" in message
        assert not (snapshot / repo.sha).exists()
        with pytest.raises(HubDownloadError, match="is not in the local Hugging Face cache"):
            load_dataset(f"native:hf:{repo.repo_id}")  # nothing of it is served from the cache
        argv = ["score", "--dataset", f"hf:{repo.repo_id}", "--download", "--predictions",
                str(tmp_path), "--out", str(tmp_path / "s")]  # fmt: skip
        res = runner.invoke(app, argv)
        assert res.exit_code == 2
        assert f"file {path}: the bytes received" in " ".join(res.output.split())
        del repo.faults[path]  # the Hub serves the right bytes again: the download succeeds
        fetched = load_dataset(f"native:hf:{repo.repo_id}", download=True)
    assert (fetched.root / path).read_bytes() == data


@pytest.mark.parametrize(
    ("fault", "status"),
    [
        ("500", "HTTP 500"),
        ("404", "HTTP 404"),
        ("truncate", "RemoteProtocolError"),
        ("redirect-loop", "TooManyRedirects"),
    ],  # fmt: skip
)
def test_an_http_failure_of_a_download_is_one_line_and_nothing_is_cached(
    tmp_path, hub_env, retry_waits, fault, status
):
    repo = _native_repo(tmp_path)
    repo.faults["img/s001.png"] = fault
    with fake_hub(repo) as hub:
        hub_env.setenv("HF_ENDPOINT", hub.url)
        with pytest.raises(HubDownloadError) as info:
            load_dataset(f"native:hf:{repo.repo_id}", download=True)
        message = str(info.value)
        assert message.startswith(f"cannot download someone/tiny-native@main from {hub.url}: ")
        assert status in message and "\n" not in message
        argv = ["score", "--dataset", f"hf:{repo.repo_id}", "--download", "--predictions",
                str(tmp_path), "--out", str(tmp_path / "s")]  # fmt: skip
        res = runner.invoke(app, argv)
        assert res.exit_code == 2  # the CLI's one line, not a traceback (exit 1)
        assert "cannot download someone/tiny-native@main" in " ".join(res.output.split())
    # a 500 and a cut-off body are retried (the waits skipped), a 404 and a loop are not
    assert bool(retry_waits) == (fault in ("500", "truncate"))
    with pytest.raises(HubDownloadError, match="is not in the local Hugging Face cache"):
        load_dataset(f"native:hf:{repo.repo_id}")  # the half-fetched snapshot is not served
