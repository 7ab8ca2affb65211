"""A dataset path that is an archive: extracted once, safely, into a cache folder beside it.

``dataBenchmark_00.tar`` becomes ``dataBenchmark_00.tar.medibench/``. Extraction goes to a
temporary sibling folder that is renamed into place only when complete, so an interrupted
extraction never looks finished; a marker file inside records the archive's size and mtime, so
a changed archive is extracted again. Every member is checked before anything is written:
absolute names, ``..`` parts, links that point outside the folder, and device or FIFO members
are refused with an error naming the archive and the member (tar extraction also runs through
``tarfile``'s ``data`` filter where Python has it).
"""

from __future__ import annotations

import json
import lzma
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from medibench.sources._errors import SourceError
from medibench.sources._paths import inside_problem

__all__ = ["ARCHIVE_SUFFIXES", "CACHE_SUFFIX", "is_archive", "resolve_source"]

#: Archive names resolve_source extracts (compared case-insensitively).
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")
#: The cache folder of ``X.tar`` is ``X.tar.medibench``.
CACHE_SUFFIX = ".medibench"
_MARKER = ".medibench-archive.json"
_MARKER_VERSION = 1
_READ_ERRORS = (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, lzma.LZMAError)


def resolve_source(
    path: str | os.PathLike, *, what: str = "dataset", notes: list[str] | None = None
) -> Path:
    """The folder (or file) a dataset spec's ``path`` stands for.

    * a folder: returned as is;
    * an archive (``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``, ``.tar.xz``, ``.zip``): the
      cache folder ``<archive>.medibench/`` next to it, extracted on first use and again when
      the archive's size or mtime changed; ``notes`` (when a list) gets a line on extraction;
    * any other existing file (a ``.parquet`` shard, say): returned as is, for the caller to
      read.

    ``what`` starts the error messages (``"MieDB-100k dataset"``).

    Raises:
        SourceError: the path does not exist; the archive is truncated or corrupt (naming the
            archive); a member would land outside the folder (naming the archive and the
            member); the cache folder cannot be written.
    """
    path = Path(path)
    if path.is_dir():
        return path
    if not path.exists():
        raise SourceError(f"{what} {path} does not exist")
    if not is_archive(path):
        return path
    cache = path.with_name(path.name + CACHE_SUFFIX)
    if _is_current(cache, path):
        return cache
    count = _extract_into_place(path, cache)
    if notes is not None:
        notes.append(f"{what}: extracted {count} member(s) of {path} into {cache}")
    return cache


def is_archive(path: str | os.PathLike) -> bool:
    """Whether ``path``'s name ends in one of :data:`ARCHIVE_SUFFIXES`."""
    return Path(path).name.lower().endswith(ARCHIVE_SUFFIXES)


# --- helpers ---------------------------------------------------------------------------------


def _stamp(archive: Path) -> dict[str, object]:
    st = archive.stat()
    return {
        "version": _MARKER_VERSION,
        "archive": archive.name,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
    }


def _is_current(cache: Path, archive: Path) -> bool:
    try:
        return json.loads((cache / _MARKER).read_text(encoding="utf-8")) == _stamp(archive)
    except (OSError, ValueError):
        return False


def _extract_into_place(archive: Path, cache: Path) -> int:
    """Extract into a temporary sibling, then rename it to ``cache``; the member count."""
    stamp = _stamp(archive)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{archive.name}.", dir=archive.parent))
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary folder
    except OSError as exc:
        raise SourceError(
            f"cannot extract {archive}: its folder is not writable for the cache folder "
            f"{cache.name} ({exc.strerror or exc}); extract it by hand and give the folder"
        ) from None
    try:
        count = _extract(archive, tmp)
        (tmp / _MARKER).write_text(json.dumps(stamp), encoding="utf-8")
        _swap_in(tmp, cache, archive)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return count


def _swap_in(tmp: Path, cache: Path, archive: Path) -> None:
    """Rename ``tmp`` to ``cache``, replacing an outdated cache; a concurrent winner stands."""
    if cache.exists():
        if _is_current(cache, archive):
            return  # another process finished the same extraction first
        if not (cache / _MARKER).is_file():
            raise SourceError(
                f"cannot extract {archive}: {cache} exists and was not made by medibench (it "
                f"has no {_MARKER}); move it away or give that folder instead"
            )
        old = cache.with_name(f".{cache.name}.old-{os.getpid()}")
        os.replace(cache, old)
        shutil.rmtree(old, ignore_errors=True)
    try:
        os.replace(tmp, cache)
    except OSError:
        if not _is_current(cache, archive):
            raise


def _extract(archive: Path, dest: Path) -> int:
    try:
        if archive.name.lower().endswith(".zip"):
            return _extract_zip(archive, dest)
        return _extract_tar(archive, dest)
    except SourceError:
        raise
    except OSError as exc:
        if exc.errno is None:  # gzip.BadGzipFile and friends: the data, not the disk
            raise _corrupt(archive, exc) from None
        raise SourceError(
            f"cannot extract {archive} next to it: {exc.strerror or exc} ({exc.filename or dest})"
        ) from None
    except _READ_ERRORS as exc:
        raise _corrupt(archive, exc) from None


def _corrupt(archive: Path, exc: BaseException) -> SourceError:
    return SourceError(
        f"archive {archive} is truncated or corrupt ({type(exc).__name__}: {exc}); "
        "download it again"
    )


def _extract_tar(archive: Path, dest: Path) -> int:
    with tarfile.open(archive, "r:*") as tar:
        members = tar.getmembers()  # reads every header: a cut-off archive fails here or below
        for member in members:
            _check_tar_member(archive, member)
        # links last: no file is ever written through a link the archive made
        ordered = [m for m in members if not m.issym()] + [m for m in members if m.issym()]
        for member in ordered:
            if member.issym():
                _check_link_place(archive, dest, member.name, member.linkname)
            _extract_tar_member(archive, tar, member, dest)
        _check_links_end_inside(archive, dest, [m.name for m in members if m.issym()])
        _check_tar_end(archive, tar, members)  # after the data: a forward seek, even in a .gz
    return len(members)


def _extract_tar_member(archive: Path, tar: tarfile.TarFile, member: tarfile.TarInfo,
                        dest: Path) -> None:  # fmt: skip
    if not hasattr(tarfile, "data_filter"):  # pragma: no cover - Python without filters
        tar.extract(member, dest)
        return
    try:
        tar.extract(member, dest, filter="data")
    except tarfile.FilterError as exc:
        raise SourceError(f"archive {archive}: member '{member.name}' is refused ({exc})") from None


def _check_tar_end(archive: Path, tar: tarfile.TarFile, members: list[tarfile.TarInfo]) -> None:
    """Refuse a tar without its end-of-archive block: tarfile reads one cut between two
    members (or inside a header) as complete, without a word."""
    assert tar.fileobj is not None
    tar.fileobj.seek(tar.offset)
    block = tar.fileobj.read(tarfile.BLOCKSIZE)
    if len(block) < tarfile.BLOCKSIZE or block.count(0) != tarfile.BLOCKSIZE:
        last = f" after member '{members[-1].name}'" if members else ""
        raise SourceError(
            f"archive {archive} is truncated or corrupt (it ends{last} without the tar "
            "end-of-archive block); download it again"
        )


def _check_tar_member(archive: Path, member: tarfile.TarInfo) -> None:
    _check_name(archive, member.name)
    if member.issym() or member.islnk():
        # a symlink's target is relative to its folder, a hard link's to the archive's root
        base = PurePosixPath(member.name).parent if member.issym() else PurePosixPath()
        _check_link(archive, member.name, member.linkname, base)
    elif not (member.isfile() or member.isdir()):
        raise SourceError(f"archive {archive}: member '{member.name}' is a device or FIFO; refused")


def _extract_zip(archive: Path, dest: Path) -> int:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        links = []
        for info in infos:
            _check_name(archive, info.filename)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                target = zf.read(info).decode("utf-8", errors="replace")
                _check_link(archive, info.filename, target, PurePosixPath(info.filename).parent)
                links.append((info.filename, target))
            elif stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise SourceError(
                    f"archive {archive}: member '{info.filename}' is a device or FIFO; refused"
                )
        for info in infos:  # links last: no file is ever written through a link
            if not stat.S_ISLNK(info.external_attr >> 16):
                zf.extract(info, dest)  # reads and CRC-checks the member's data
        for name, target in links:
            _check_link_place(archive, dest, name, target)
            link = dest / name
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, link)
        _check_links_end_inside(archive, dest, [name for name, _ in links])
    return len(infos)


def _check_link_place(archive: Path, dest: Path, name: str, target: str) -> None:
    """Refuse a link whose folder, or whose target, leads outside ``dest`` through the links
    already made (the file system as extracted so far, not the text), or that would replace
    a member already extracted."""
    root = dest.resolve()
    parent = PurePosixPath(name.replace("\\", "/")).parent
    for path, what in ((str(parent), "its folder"), (str(parent / target), "its target")):
        if inside_problem(root, path) is not None:
            raise SourceError(
                f"archive {archive}: member '{name}' is a link to '{target}', outside the "
                f"extraction folder ({what} leads to {_shown(root, path)} through the links "
                "made before it); refused"
            )
    if os.path.lexists(dest / name):
        raise SourceError(
            f"archive {archive}: member '{name}' is a link to '{target}' where another member "
            "already is; refused"
        )


def _check_links_end_inside(archive: Path, dest: Path, names: list[str]) -> None:
    """Refuse the archive when any link, once every link is made, leads out of ``dest``: a
    link checked before a later one changed what its target's path means."""
    root = dest.resolve()
    for name in names:
        if inside_problem(root, name) is not None:
            raise SourceError(
                f"archive {archive}: member '{name}' is a link to "
                f"'{os.readlink(dest / name)}', outside the extraction folder once the "
                f"archive's other links are made (it leads to {_shown(root, name)}); refused"
            )


def _shown(root: Path, path: str) -> str:
    """Where ``path`` really leads, relative to the extraction folder (``../..``)."""
    return os.path.relpath((root / path).resolve(), root)


def _check_name(archive: Path, name: str) -> None:
    """Refuse a member name that is absolute or climbs out of the folder."""
    posix = name.replace("\\", "/")
    if posix.startswith("/") or (len(posix) > 1 and posix[1] == ":"):
        raise SourceError(
            f"archive {archive}: member '{name}' has an absolute path; refused (it would be "
            "written outside the extraction folder)"
        )
    if ".." in PurePosixPath(posix).parts:
        raise SourceError(
            f"archive {archive}: member '{name}' climbs out with '..'; refused (it would be "
            "written outside the extraction folder)"
        )


def _check_link(archive: Path, name: str, target: str, base: PurePosixPath) -> None:
    """Refuse, before anything is written, a link whose target as written is absolute or
    climbs out of the folder (where it really leads is checked as links are made)."""
    if inside_problem(_ROOT, str(base / target.replace("\\", "/")), follow_links=True):
        raise SourceError(
            f"archive {archive}: member '{name}' is a link to '{target}', outside the "
            "extraction folder; refused"
        )


#: The extraction folder, for checks of a member's text before the folder exists.
_ROOT = Path("/extraction-folder")
