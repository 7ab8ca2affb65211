"""resolve_source: folders as they are, archives extracted once into a cache folder, bad ones
refused with the archive (and member) named."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from medibench.sources import CACHE_SUFFIX, SourceError, resolve_source

FILES = {"bench/metadata.json": b"[]", "bench/a/in.png": b"\x89PNG fake", "top.txt": b"hello"}


def _tar(path: Path, files=FILES, mode="w") -> Path:
    with tarfile.open(path, mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _zip(path: Path, files=FILES) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(".medibench")
    }


def test_a_folder_is_returned_as_is(tmp_path):
    assert resolve_source(tmp_path) == tmp_path


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("d.tar", lambda p: _tar(p)),
        ("d.tar.gz", lambda p: _tar(p, mode="w:gz")),
        ("d.tgz", lambda p: _tar(p, mode="w:gz")),
        ("d.zip", _zip),
    ],
)
def test_an_archive_is_extracted_next_to_it(tmp_path, name, make):
    archive = make(tmp_path / name)
    notes: list[str] = []
    out = resolve_source(archive, notes=notes)
    assert out == tmp_path / f"{name}{CACHE_SUFFIX}" and out.is_dir()
    assert _tree(out) == FILES
    assert len(notes) == 1 and "extracted 3 member(s)" in notes[0] and str(archive) in notes[0]
    # no temporary folder left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, out.name])


def test_extraction_happens_once_and_again_when_the_archive_changes(tmp_path):
    archive = _tar(tmp_path / "d.tar")
    out = resolve_source(archive)
    (out / "top.txt").write_bytes(b"touched")  # a second call must not re-extract
    notes: list[str] = []
    assert resolve_source(archive, notes=notes) == out and notes == []
    assert (out / "top.txt").read_bytes() == b"touched"
    _tar(archive, {**FILES, "top.txt": b"new contents!"})
    st = archive.stat()
    os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert resolve_source(archive, notes=notes) == out and len(notes) == 1
    assert (out / "top.txt").read_bytes() == b"new contents!"


def test_a_missing_path_is_named(tmp_path):
    with pytest.raises(SourceError, match=r"^MieDB dataset .*nope\.tar does not exist$"):
        resolve_source(tmp_path / "nope.tar", what="MieDB dataset")


@pytest.mark.parametrize("name", ["d.tar", "d.tar.gz", "d.zip"])
def test_a_truncated_archive_is_a_clear_error(tmp_path, name):
    big = {"bench/blob.bin": os.urandom(20000), **FILES}
    archive = tmp_path / name
    _zip(archive, big) if name.endswith(".zip") else _tar(
        archive, big, mode="w:gz" if name.endswith(".gz") else "w"
    )
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match=rf"archive {archive} is truncated or corrupt"):
        resolve_source(archive)
    assert not (tmp_path / f"{name}{CACHE_SUFFIX}").exists()
    assert [p.name for p in tmp_path.iterdir()] == [name]  # the partial extraction is gone


@pytest.mark.parametrize(
    ("member", "why"),
    [
        ("../evil.txt", "climbs out with '..'"),
        ("bench/../../evil.txt", "climbs out with '..'"),
        ("/tmp/evil.txt", "absolute path"),
    ],
)
@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_a_member_that_escapes_is_refused(tmp_path, member, why, kind):
    archive = tmp_path / f"d.{kind}"
    files = {**FILES, member: b"evil"}
    if kind == "zip":
        with zipfile.ZipFile(archive, "w") as zf:
            for name, data in files.items():
                zf.writestr(zipfile.ZipInfo(name), data)
    else:
        _tar(archive, files)
    with pytest.raises(SourceError, match=rf"archive {archive}: member '{member}' .*{why}"):
        resolve_source(archive)
    assert not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / f"d.{kind}{CACHE_SUFFIX}").exists()


@pytest.mark.parametrize("target", ["../../etc/passwd", "/etc/passwd", "../.."])
def test_a_link_pointing_out_is_refused(tmp_path, target):
    archive = tmp_path / "d.tar"
    with tarfile.open(archive, "w") as tar:
        link = tarfile.TarInfo("bench/link")
        link.type, link.linkname = tarfile.SYMTYPE, target
        tar.addfile(link)
    with pytest.raises(SourceError, match=rf"member 'bench/link' is a link to '{target}'"):
        resolve_source(archive)


def test_a_link_inside_the_folder_is_kept(tmp_path):
    archive = tmp_path / "d.tar"
    with tarfile.open(archive, "w") as tar:
        data = b"pixels"
        info = tarfile.TarInfo("bench/a.png")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("bench/sub/b.png")
        link.type, link.linkname = tarfile.SYMTYPE, "../a.png"
        tar.addfile(link)
    out = resolve_source(archive)
    assert (out / "bench/sub/b.png").read_bytes() == b"pixels"


def test_a_device_member_is_refused(tmp_path):
    archive = tmp_path / "d.tar"
    with tarfile.open(archive, "w") as tar:
        fifo = tarfile.TarInfo("bench/pipe")
        fifo.type = tarfile.FIFOTYPE
        tar.addfile(fifo)
    with pytest.raises(SourceError, match="member 'bench/pipe' is a device or FIFO"):
        resolve_source(archive)


@pytest.mark.parametrize("mode", ["w", "w:gz"])
def test_a_tar_cut_between_two_members_is_truncated_too(tmp_path, mode):
    whole = _tar(tmp_path / "whole.tar", {"a": b"x" * 600, "b": b"y" * 600})
    cut = whole.read_bytes()[:1536]  # the first member's header and data, nothing after
    archive = tmp_path / ("cut.tar.gz" if mode == "w:gz" else "cut.tar")
    archive.write_bytes(gzip.compress(cut) if mode == "w:gz" else cut)
    with pytest.raises(SourceError, match=r"truncated or corrupt \(it ends after member 'a'"):
        resolve_source(archive)


def test_a_folder_not_made_by_medibench_is_never_replaced(tmp_path):
    archive = _tar(tmp_path / "d.tar")
    mine = tmp_path / f"d.tar{CACHE_SUFFIX}"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    with pytest.raises(SourceError, match="exists and was not made by medibench"):
        resolve_source(archive)
    assert (mine / "keep.txt").read_text() == "mine"
