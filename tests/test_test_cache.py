"""tests/_cache.py: a tiny model is built once per builder source, by one process at a time."""

from __future__ import annotations

import multiprocessing
import sys
import textwrap
from pathlib import Path

from tests import _cache


def _builder_module(folder: Path, name: str, body: str) -> str:
    """A module ``name`` in ``folder`` whose ``build(folder)`` writes ``body`` and counts its
    calls in ``calls.txt`` beside it."""
    (folder / f"{name}.py").write_text(
        textwrap.dedent(f"""
        from pathlib import Path

        def build(folder):
            folder.mkdir(parents=True)
            (folder / "model.txt").write_text({body!r})
            with open(Path(__file__).with_name("calls.txt"), "a") as calls:
                calls.write("built\\n")
        """),
        encoding="utf-8",
    )
    return name


def _cached_in_child(args) -> str:
    src, name, cache = args
    sys.path.insert(0, src)
    import importlib
    import os

    os.environ["MEDIBENCH_TEST_CACHE"] = cache
    module = importlib.import_module(name)
    return str(_cache.cached("tiny", module.build))


def test_built_once_reused_and_rebuilt_when_the_builder_changes(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    monkeypatch.syspath_prepend(str(src))
    monkeypatch.setenv("MEDIBENCH_TEST_CACHE", str(tmp_path / "cache"))
    import importlib

    module = importlib.import_module(_builder_module(src, "builder_a", "v1"))
    first = _cache.cached("tiny", module.build)
    again = _cache.cached("tiny", module.build)
    assert first == again and (first / "model.txt").read_text() == "v1"
    assert (src / "calls.txt").read_text().count("built") == 1
    assert first.parent == tmp_path / "cache" and first.name.startswith("tiny-")

    _builder_module(src, "builder_a", "version 2")  # other source, other size
    module = importlib.reload(module)
    second = _cache.cached("tiny", module.build)
    assert second != first and (second / "model.txt").read_text() == "version 2"
    assert (src / "calls.txt").read_text().count("built") == 2
    assert not first.exists()  # the older build is cleared
    assert _cache.cached("tiny", module.build, salt="x") != second  # the salt is in the key


def test_the_key_follows_the_cpu_and_atens_code_path(monkeypatch):
    build = _cache.cached  # any function of a module: only the key is computed
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    here = _cache.key(build)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert _cache.key(build) != here
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    monkeypatch.setattr(_cache, "_cpu", lambda: "AMD EPYC 9R14")
    amd = _cache.key(build)
    monkeypatch.setattr(_cache, "_cpu", lambda: "Intel(R) Xeon(R) Platinum 8488C")
    assert _cache.key(build) != amd


def test_two_processes_asking_at_once_build_it_once(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    name = _builder_module(src, "builder_b", "shared")
    args = (str(src), name, str(tmp_path / "cache"))
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        folders = pool.map(_cached_in_child, [args, args])
    assert folders[0] == folders[1]
    assert (src / "calls.txt").read_text().count("built") == 1
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")] == [
        Path(folders[0]).name
    ]


def test_a_failed_build_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIBENCH_TEST_CACHE", str(tmp_path / "cache"))

    def broken(folder):
        folder.mkdir()
        (folder / "half.bin").write_bytes(b"x")
        raise RuntimeError("out of disk")

    try:
        _cache.cached("broken", broken)
    except RuntimeError as exc:
        assert "out of disk" in str(exc)
    else:
        raise AssertionError("the builder's error was swallowed")
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")] == []


def test_the_digest_of_data_follows_its_files_not_where_they_are(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name / "img").mkdir(parents=True)
        (tmp_path / name / "tasks.jsonl").write_text('{"q": "what is shown ?"}\n')
        (tmp_path / name / "img" / "0.png").write_bytes(b"\x89PNG pixels")
    same = _cache.digest(tmp_path / "a")
    assert len(same) == 16 and same == _cache.digest(tmp_path / "b")  # another folder, same data
    (tmp_path / "b" / "img" / "0.png").write_bytes(b"\x89PNG other pixels")
    changed = _cache.digest(tmp_path / "b")
    assert changed != same
    (tmp_path / "b" / "img" / "0.png").rename(tmp_path / "b" / "img" / "1.png")
    assert _cache.digest(tmp_path / "b") not in (same, changed)  # a renamed file counts too
