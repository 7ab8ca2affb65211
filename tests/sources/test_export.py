"""medibench export-dataset: hf-parquet, native and miedb round trips (docs/sources.md)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.datasets import load_dataset, load_images, write_native
from medibench.io import write_image
from medibench.samples import Sample

pytest.importorskip("pyarrow")

_PATHS = ("input", "target", "mask")


@pytest.fixture
def native(tmp_path):
    rng = np.random.default_rng(0)
    src = tmp_path / "src"
    src.mkdir()
    samples = []
    for i, (persp, colours) in enumerate(
        [("perception", ("red",)), ("modification", ()), ("perception", ("red", "green", "blue"))]
    ):
        paths = {}
        for role in ("input", "target"):
            paths[role] = str(src / f"{i}_{role}.png")
            write_image(paths[role], rng.integers(0, 256, (12, 10, 3), dtype=np.uint8))
        mask = np.zeros((12, 10), np.uint8)
        mask[2:6, 3:7] = 255
        paths["mask"] = str(src / f"{i}_mask.png")
        write_image(paths["mask"], np.repeat(mask[..., None], 3, axis=2))
        samples.append(
            Sample(
                sample_id=f"s{i}",
                benchmark="toy",
                instruction=f"edit {i}",
                perspective=persp,
                overlay_color=colours,
                split="test" if i < 2 else "dev",
                task="Multiclasses" if len(colours) > 1 else "seg",
                paraphrases=("a", "b"),
                source={"dataset": "toy", "licence": "CC BY 4.0"},
                metadata={"n": i, "nested": {"x": [1, 2]}},
                **paths,
            )
        )
    return write_native(tmp_path / "native", samples)


def _same(a, b, *, fields=None):
    assert a.sample_ids() == b.sample_ids()
    for x, y in zip(a, b, strict=True):
        if fields is None:
            assert x.model_dump(exclude=set(_PATHS)) == y.model_dump(exclude=set(_PATHS))
        ix, iy = load_images(x), load_images(y)
        for role in _PATHS:
            vx, vy = getattr(ix, role), getattr(iy, role)
            if fields is not None and role not in fields:
                continue
            assert (vx is None) == (vy is None)
            if vx is not None:
                np.testing.assert_array_equal(vx, vy)


def _export(spec, out, fmt):
    result = CliRunner().invoke(app, ["export-dataset", spec, "--format", fmt, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return result


def test_hf_parquet_round_trip(native, tmp_path):
    out = tmp_path / "hf"
    _export(f"native:{native.root}", out, "hf-parquet")
    assert sorted(p.name for p in (out / "data").iterdir()) == [
        "dev-00000-of-00001.parquet",
        "test-00000-of-00001.parquet",
    ]
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "license: cc-by-4.0" in card
    back = load_dataset(f"native:{out}")
    assert sorted(back.sample_ids()) == sorted(native.sample_ids())
    ordered = {s.sample_id: s for s in back}
    for a in native:
        b = ordered[a.sample_id]
        assert a.model_dump(exclude=set(_PATHS)) == b.model_dump(exclude=set(_PATHS))
        ia, ib = load_images(a), load_images(b)
        for role in _PATHS:
            np.testing.assert_array_equal(getattr(ia, role), getattr(ib, role))
    assert load_dataset(str(out)).sample_ids() == back.sample_ids()  # detected as native
    assert load_dataset(f"native:{out}").sample_ids() == back.sample_ids()  # a second load


def test_datasets_loads_the_export(native, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    out = tmp_path / "hf"
    _export(f"native:{native.root}", out, "hf-parquet")
    by_id = {s.sample_id: load_images(s) for s in native}
    files = sorted(str(p) for p in (out / "data").glob("*.parquet"))
    plain = datasets.load_dataset(
        "parquet", data_files=files, split="train", cache_dir=str(tmp_path / "c1")
    )
    card = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "c2"))
    assert sorted(card) == ["dev", "test"]
    assert card["test"].num_rows == 2 and card["dev"].num_rows == 1
    for table in (plain, card["test"], card["dev"]):
        assert isinstance(table.features["input"], datasets.Image)
        for row in table:
            images = by_id[row["sample_id"]]
            np.testing.assert_array_equal(np.asarray(row["input"].convert("RGB")), images.input)
            np.testing.assert_array_equal(np.asarray(row["target"].convert("RGB")), images.target)
            assert (np.asarray(row["mask"].convert("L")) > 0).tolist() == images.mask.tolist()
            assert row["paraphrases"] == ["a", "b"]


def test_native_round_trip(native, tmp_path):
    out = tmp_path / "again"
    _export(f"native:{native.root}", out, "native")
    _same(native, load_dataset(f"native:{out}"))


def test_miedb_round_trip(native, tmp_path):
    out = tmp_path / "miedb"
    _export(f"native:{native.root}", out, "miedb")
    names = sorted(p.name for p in (out / "dataBenchmark" / "output").iterdir())
    assert names == ["s0_red.png", "s1_target.png", "s2_red.png"]
    back = load_dataset(f"miedb:{out}")
    assert back.sample_ids() == native.sample_ids()
    for a, b in zip(native, back, strict=True):
        assert (a.instruction, a.perspective, a.overlay_color) == (
            b.instruction,
            b.perspective,
            b.overlay_color,
        )
    _same(native, back, fields=("input", "target"))


def test_bad_format_is_a_clear_error(native, tmp_path):
    result = CliRunner().invoke(
        app, ["export-dataset", f"native:{native.root}", "--format", "csv", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "unknown export format 'csv'; choose one of hf-parquet, native, miedb" in result.output


def test_library_refuses_a_bad_format_and_a_full_folder(native, tmp_path):
    from medibench.datasets._export import export_dataset

    with pytest.raises(ValueError, match="unknown export format 'zip'"):
        export_dataset(native, tmp_path / "x", format="zip")
    with pytest.raises(ValueError, match="is not empty"):
        export_dataset(native, native.root, format="hf-parquet")


def test_a_second_read_of_unchanged_shards_reads_no_parquet(native, tmp_path, monkeypatch):
    from medibench import sources

    out = tmp_path / "hf"
    _export(f"native:{native.root}", out, "hf-parquet")
    first = load_dataset(f"native:{out}")
    assert (out / ".medibench-images" / "index.json").is_file()

    def no_parquet(*a, **k):
        raise AssertionError("the shards were read again")

    monkeypatch.setattr(sources, "iter_parquet_rows", no_parquet)
    again = load_dataset(f"native:{out}")
    assert [s.model_dump() for s in again] == [s.model_dump() for s in first]
    # A changed shard (another size or time) or a removed asset means reading the shards again.
    monkeypatch.undo()
    shard = next((out / "data").glob("test-*.parquet"))
    os.utime(shard, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns + 10**9))
    monkeypatch.setattr(sources, "iter_parquet_rows", no_parquet)
    with pytest.raises(AssertionError, match="read again"):
        load_dataset(f"native:{out}")
    monkeypatch.undo()
    assert load_dataset(f"native:{out}").sample_ids() == first.sample_ids()
    Path(first.get(first.sample_ids()[0]).input).unlink()
    monkeypatch.setattr(sources, "iter_parquet_rows", no_parquet)
    with pytest.raises(AssertionError, match="read again"):
        load_dataset(f"native:{out}")
