"""``cached_read``: a reading step's result reused while the shards and its files are unchanged."""

import json
import os

from medibench.sources import cached_read


def _setup(tmp_path):
    shard = tmp_path / "a.parquet"
    shard.write_bytes(b"PAR1 rows")
    image = tmp_path / "img.png"
    image.write_bytes(b"png")
    calls = []

    def read():
        calls.append(1)
        return {"rows": [("where", str(image))], "problems": ["p"]}

    return shard, image, calls, read


def _paths(value):
    return [row[1] for row in value["rows"]]


def test_second_read_of_unchanged_shards_uses_the_index(tmp_path):
    shard, image, calls, read = _setup(tmp_path)
    cache = tmp_path / "cache"
    first = cached_read(cache, [shard], read, paths=_paths)
    again = cached_read(cache, [shard], read, paths=_paths)
    assert first == again == {"rows": [["where", str(image)]], "problems": ["p"]}
    assert len(calls) == 1
    assert json.loads((cache / "index.json").read_text())["value"] == first
    # another reading step in the same folder has its own index
    cached_read(cache, [shard], read, paths=_paths, what="other")
    assert len(calls) == 2 and (cache / "other-index.json").is_file()


def test_a_changed_shard_or_a_removed_file_reads_again(tmp_path):
    shard, image, calls, read = _setup(tmp_path)
    cache = tmp_path / "cache"
    cached_read(cache, [shard], read, paths=_paths)
    shard.write_bytes(b"PAR1 other rows")
    cached_read(cache, [shard], read, paths=_paths)
    assert len(calls) == 2
    st = shard.stat()
    os.utime(shard, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    cached_read(cache, [shard], read, paths=_paths)
    assert len(calls) == 3
    image.unlink()
    cached_read(cache, [shard], read, paths=_paths)
    assert len(calls) == 4


def test_unwritable_cache_and_values_json_cannot_hold(tmp_path):
    shard, image, calls, read = _setup(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert cached_read(blocker / "cache", [shard], read, paths=_paths)["problems"] == ["p"]
    value = cached_read(tmp_path / "c2", [shard], lambda: {"rows": [], "b": b"x"}, paths=_paths)
    assert value == {"rows": [], "b": b"x"} and not (tmp_path / "c2" / "index.json").exists()
