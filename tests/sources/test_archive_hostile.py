"""Hostile archives: nothing an archive holds is ever written outside its extraction folder.

Link chains (``l -> .``, ``l2 -> l/..``, ``l3 -> l2/..``, then a file ``l3/X``), in every order
and in zip and tar, absolute and ``..`` names, links out, links over other members, device
members: each is refused with an error naming the archive and the member, no cache folder is
left, and no file appears anywhere outside the folder the archive sits in.
"""

from __future__ import annotations

import io
import itertools
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from medibench.sources import CACHE_SUFFIX, SourceError, resolve_source

LINK_CHAIN = [("l", "."), ("l2", "l/.."), ("l3", "l2/..")]


def _zip(path: Path, members: list[tuple[str, str, bytes | str]]) -> Path:
    """``members``: (kind, name, data) with kind ``file``, ``link`` (data: the target),
    ``chr``/``blk``/``fifo`` (a device member, as Info-ZIP records its mode)."""
    modes = {"link": stat.S_IFLNK | 0o777, "chr": stat.S_IFCHR | 0o644,
             "blk": stat.S_IFBLK | 0o644, "fifo": stat.S_IFIFO | 0o644,
             "file": stat.S_IFREG | 0o644}  # fmt: skip
    with zipfile.ZipFile(path, "w") as zf:
        for kind, name, data in members:
            info = zipfile.ZipInfo(name)
            info.external_attr = modes[kind] << 16
            zf.writestr(info, data)
    return path


def _tar(path: Path, members: list[tuple[str, str, bytes | str]]) -> Path:
    types = {"link": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE, "chr": tarfile.CHRTYPE,
             "blk": tarfile.BLKTYPE, "fifo": tarfile.FIFOTYPE}  # fmt: skip
    with tarfile.open(path, "w") as tar:
        for kind, name, data in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                assert isinstance(data, bytes)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.type = types[kind]
                if kind in ("link", "hard"):
                    info.linkname = str(data)
                tar.addfile(info)
    return path


def _everything(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def _refused(tmp_path: Path, kind: str, members: list, match: str) -> None:
    """Build the archive three folders down, extract it, and check the refusal and that
    nothing changed anywhere under ``tmp_path`` but the archive itself."""
    home = tmp_path / "a" / "b" / "c"
    home.mkdir(parents=True)
    archive = (_zip if kind == "zip" else _tar)(home / f"x.{kind}", members)
    before = _everything(tmp_path)
    with pytest.raises(SourceError, match=match) as info:
        resolve_source(archive)
    assert str(archive) in str(info.value)
    assert "\n" not in str(info.value)
    assert _everything(tmp_path) == before  # no cache, no temp folder, nothing outside
    assert not (home.parent / f"x.{kind}{CACHE_SUFFIX}").exists()


@pytest.mark.parametrize("kind", ["zip", "tar"])
@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
@pytest.mark.parametrize("file_first", [False, True])
def test_a_chain_of_links_never_carries_a_file_out(tmp_path, kind, order, file_first):
    links = [("link", *LINK_CHAIN[i]) for i in order]
    payload = ("file", "l3/X", b"escaped")
    members = [payload, *links] if file_first else [*links, payload]
    _refused(tmp_path, kind, members, r"member 'l[23]?'.* is a link .*outside|member 'l3'")
    assert not list(tmp_path.rglob("X"))


@pytest.mark.parametrize("kind", ["zip", "tar"])
@pytest.mark.parametrize(
    "chain",
    [
        [("up", "d/.."), ("d", "."), ("e", "up/../..")],  # a link's meaning changed by a later link
        [("a", "b/c"), ("b", "."), ("b/c", "..")],
        [("s", "t"), ("t", "u"), ("u", "..")],
        [("deep/x", "../y"), ("y", "deep/x/../..")],
    ],
)
def test_links_that_lead_out_only_once_all_are_made_are_refused(tmp_path, kind, chain):
    members = [("file", "keep.txt", b"ok"), *[("link", n, t) for n, t in chain]]
    _refused(tmp_path, kind, members, r"is a link to .*outside the extraction folder")


@pytest.mark.parametrize("kind", ["zip", "tar"])
@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../x", "climbs out with '..'"),
        ("a/../../x", "climbs out with '..'"),
        ("a/b/../../../x", "climbs out with '..'"),
        ("/etc/x", "absolute path"),
        ("//server/x", "absolute path"),
        ("C:/x", "absolute path"),
        ("C:\\x", "absolute path"),
        ("\\x", "absolute path"),
        ("..\\x", "climbs out with '..'"),
        ("a\\..\\..\\x", "climbs out with '..'"),
    ],
)
def test_a_member_name_out_of_the_folder_is_refused(tmp_path, kind, name, why):
    _refused(tmp_path, kind, [("file", "ok.txt", b"ok"), ("file", name, b"evil")],
             rf"member '{__import__('re').escape(name)}' .*{why}")  # fmt: skip


@pytest.mark.parametrize("kind", ["zip", "tar"])
@pytest.mark.parametrize(
    "target",
    ["..", "../..", "../x", "/", "/etc/hostname", "a/../../x", "a/../..", "./../x", "sub/../../.."],
)
def test_a_link_pointing_out_is_refused(tmp_path, kind, target):
    _refused(tmp_path, kind, [("file", "ok.txt", b"ok"), ("link", "ln", target)],
             r"member 'ln' is a link to .*outside the extraction folder")  # fmt: skip


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_a_link_over_another_member_is_refused(tmp_path, kind):
    _refused(tmp_path, kind,
             [("file", "d/X", b"data"), ("link", "d", ".")],
             r"member 'd' is a link to '\.' where another member already is")  # fmt: skip


@pytest.mark.parametrize("kind", ["zip", "tar"])
@pytest.mark.parametrize("device", ["chr", "blk", "fifo"])
def test_a_device_member_is_refused(tmp_path, kind, device):
    _refused(tmp_path, kind, [("file", "ok.txt", b"ok"), (device, "dev", b"")],
             r"member 'dev' is a device or FIFO")  # fmt: skip


@pytest.mark.parametrize("target", ["../outside", "/etc/hostname", "a/../../x"])
def test_a_tar_hard_link_out_is_refused(tmp_path, target):
    _refused(tmp_path, "tar", [("file", "ok.txt", b"ok"), ("hard", "h", target)],
             r"member 'h' is a link to .*outside the extraction folder")  # fmt: skip


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_links_that_stay_inside_still_work(tmp_path, kind):
    members = [("file", "data/a.png", b"pixels"), ("link", "l", "."), ("link", "l2", "l/data"),
               ("link", "sub/b.png", "../l2/a.png")]  # fmt: skip
    archive = (_zip if kind == "zip" else _tar)(tmp_path / f"x.{kind}", members)
    out = resolve_source(archive)
    assert (out / "sub/b.png").read_bytes() == b"pixels"
    assert (out / "l/l2/a.png").read_bytes() == b"pixels"
