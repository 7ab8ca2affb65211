"""Parquet rows streamed by row group, column checks, and image cells in the ``datasets``
encodings decoding to the pixels of the same images stored as files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from medibench.io import encode_image, read_image, write_image
from medibench.sources import (
    ImageCellError,
    SourceError,
    check_columns,
    iter_parquet_rows,
    parquet_files,
    store_image_cell,
)

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def _images(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.integers(0, 256, (12 + i, 16, 3), dtype=np.uint8) for i in range(n)]


def _write(path: Path, columns: dict[str, list], schema=None, row_group_size=None) -> Path:
    table = pa.table(columns, schema=schema)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def test_png_files_and_bytes_cells_decode_to_identical_arrays(tmp_path):
    images = _images(5)
    files = []
    for i, image in enumerate(images):
        files.append(tmp_path / "png" / f"{i}.png")
        write_image(files[-1], image)
    cells = [{"bytes": f.read_bytes(), "path": f.name} for f in files]
    shard = _write(
        tmp_path / "shard.parquet",
        {"id": [str(i) for i in range(5)], "image": cells, "inputs": [[c, c] for c in cells]},
        schema=pa.schema([("id", pa.string()), ("image", IMAGE), ("inputs", pa.list_(IMAGE))]),
        row_group_size=2,
    )
    rows = list(iter_parquet_rows(shard, ["id", "image", "inputs"], batch_rows=1))
    assert [(r.index, r.values["id"]) for r in rows] == [(i, str(i)) for i in range(5)]
    for row, file in zip(rows, files, strict=True):
        from_file = read_image(file)
        np.testing.assert_array_equal(row.image("image"), from_file)
        assert all(np.array_equal(a, from_file) for a in row.images("inputs"))
        np.testing.assert_array_equal(
            row.image("image", mode="gray"), read_image(file, mode="gray")
        )


def test_path_cells_are_read_relative_to_the_base_folder(tmp_path):
    image = _images(1)[0]
    write_image(tmp_path / "imgs" / "a.png", image)
    shard = _write(
        tmp_path / "s.parquet",
        {"plain": ["imgs/a.png"], "struct": [{"bytes": None, "path": "imgs/a.png"}]},
        schema=pa.schema([("plain", pa.string()), ("struct", IMAGE)]),
    )
    (row,) = iter_parquet_rows(shard)
    np.testing.assert_array_equal(row.image("plain", base=tmp_path), image)
    np.testing.assert_array_equal(row.image("struct", base=tmp_path), image)
    with pytest.raises(ImageCellError, match="escapes the dataset folder"):
        row.values["plain"] = "../outside.png"
        row.image("plain", base=tmp_path / "imgs")


def test_a_cell_that_does_not_decode_is_that_rows_problem(tmp_path):
    good = encode_image(_images(1)[0], ".png")
    cells = [
        {"bytes": good, "path": "0.png"},
        {"bytes": b"\x89PNG\r\n\x1a\nbroken", "path": "1.png"},
        {"bytes": good, "path": "2.png"},
        None,
    ]
    shard = _write(tmp_path / "s.parquet", {"image": cells}, schema=pa.schema([("image", IMAGE)]))
    decoded, failed = {}, {}
    for row in iter_parquet_rows(shard):
        try:
            decoded[row.index] = row.image("image")
        except ImageCellError as exc:
            failed[row.index] = exc
    assert sorted(decoded) == [0, 2]
    assert str(failed[1]) == (
        f"{shard}: row 1, column 'image': '1.png': truncated PNG: the file ends before its IEND "
        "chunk"
    )
    assert (failed[1].file, failed[1].row, failed[1].column) == (str(shard), 1, "image")
    assert str(failed[3]) == f"{shard}: row 3, column 'image': the cell is empty (null)"


def test_missing_columns_are_named_with_the_ones_found(tmp_path):
    shard = _write(tmp_path / "s.parquet", {"task": ["a"], "instruction": ["b"]})
    assert check_columns(shard, ["task"]) == ["task", "instruction"]
    with pytest.raises(SourceError) as info:
        list(iter_parquet_rows(shard, ["task", "input_images", "answer"]))
    assert str(info.value) == (
        f"{shard}: missing column(s) input_images, answer; found: task, instruction"
    )


def test_a_file_that_is_not_parquet_is_named(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(SourceError, match=rf"^{bad}: not a readable Parquet file"):
        list(iter_parquet_rows(bad))


def test_shards_of_a_folder_in_name_order(tmp_path):
    for name in ("b/1.parquet", "a/2.parquet", "a/10.parquet"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        _write(tmp_path / name, {"x": [name]})
    files = parquet_files(tmp_path)
    assert [f.relative_to(tmp_path).as_posix() for f in files] == [
        "a/10.parquet",
        "a/2.parquet",
        "b/1.parquet",
    ]
    assert [r.values["x"] for r in iter_parquet_rows(files)] == [
        "a/10.parquet",
        "a/2.parquet",
        "b/1.parquet",
    ]
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="holds no .parquet files"):
        parquet_files(tmp_path / "empty")
    with pytest.raises(SourceError, match="is not a Parquet file"):
        parquet_files(_write(tmp_path / "x.csv", {"x": [1]}))


def test_stored_cells_are_the_unchanged_bytes_by_content(tmp_path):
    image = _images(1)[0]
    data = encode_image(image, ".png")
    where = dict(file=tmp_path / "s.parquet", row=0, column="image")
    assets = tmp_path / "assets"
    named = store_image_cell({"bytes": data, "path": "x/a.PNG"}, assets, **where)
    digest = named.stem
    assert named == assets / digest[:2] / f"{digest}.png" and named.read_bytes() == data
    unnamed = store_image_cell({"bytes": data, "path": None}, assets, **where)
    assert unnamed == named  # sniffed as PNG; written once
    np.testing.assert_array_equal(read_image(named), image)
    write_image(tmp_path / "b.png", image)
    assert (
        store_image_cell("b.png", assets, base=tmp_path, **where) == (tmp_path / "b.png").resolve()
    )
    with pytest.raises(ImageCellError, match="the cell is empty"):
        store_image_cell(None, assets, **where)


def test_map_rows_in_threads_keeps_order_bounds_read_ahead_and_returns_cell_errors():
    from medibench.sources import ImageCellError, map_rows_in_threads

    read = []

    def items():
        for i in range(50):
            read.append(i)
            yield i

    def fn(i):
        if i == 7:
            raise ImageCellError("f.parquet", i, "input", "broken")
        return i * i

    out = []
    for item, result in map_rows_in_threads(fn, items(), threads=2, window=4):
        assert len(read) <= item + 4  # never more than `window` items read ahead
        out.append((item, result))
    assert [i for i, _ in out] == list(range(50))
    assert isinstance(out[7][1], ImageCellError) and "row 7, column 'input': broken" in str(
        out[7][1]
    )
    assert [r for i, r in out if i != 7] == [i * i for i in range(50) if i != 7]
    with pytest.raises(ZeroDivisionError):
        list(map_rows_in_threads(lambda i: 1 // (i - 3), range(6), threads=2))
    assert list(map_rows_in_threads(str, range(3), threads=1)) == [(0, "0"), (1, "1"), (2, "2")]
