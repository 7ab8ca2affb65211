"""The native dataset layout: round trip, validation errors, image loading, load_dataset."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from medibench.datasets import (
    DATASETS,
    MANIFEST,
    DatasetError,
    NativeDataset,
    load_dataset,
    load_images,
    read_native,
    write_native,
)
from medibench.io import write_image
from medibench.registry import UnknownNameError
from medibench.samples import RecordError, Sample


def _images(folder: Path, sid: str, *, value: int = 100) -> dict[str, str]:
    """Write a 6x8 input, target and mask for ``sid`` under ``folder``; return relative paths."""
    rgb = np.full((6, 8, 3), value, np.uint8)
    rgb[1, 2] = (10, 20, 30)
    mask = np.zeros((6, 8), bool)
    mask[2:4, 3:6] = True
    paths = {k: f"img/{sid}_{k}.png" for k in ("input", "target", "mask")}
    write_image(folder / paths["input"], rgb)
    write_image(folder / paths["target"], 255 - rgb)
    write_image(folder / paths["mask"], mask)
    return paths


def _record(sid: str, paths: dict[str, str], **extra) -> dict:
    return {
        "sample_id": sid,
        "benchmark": "toy",
        "instruction": "Remove the lesion.",
        "perspective": "modification",
        "task": "remove-lesion",
        **paths,
        **extra,
    }


def _write_manifest(folder: Path, lines: list[str]) -> None:
    (folder / MANIFEST).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A valid two-sample native dataset."""
    lines = []
    for sid in ("a", "b"):
        lines.append(json.dumps(_record(sid, _images(tmp_path, sid))))
    _write_manifest(tmp_path, lines)
    return tmp_path


def test_read_resolves_paths_inside_the_folder(toy: Path) -> None:
    ds = read_native(toy)
    assert isinstance(ds, NativeDataset)
    assert (ds.name, ds.root, len(ds), ds.sample_ids()) == (toy.name, toy.resolve(), 2, ["a", "b"])
    a = ds.get("a")
    assert a.input == str(toy.resolve() / "img" / "a_input.png")
    assert a.mask == str(toy.resolve() / "img" / "a_mask.png")
    assert [s.sample_id for s in ds] == ["a", "b"]


def test_get_unknown_id_suggests_close_ones(toy: Path) -> None:
    with pytest.raises(KeyError, match=r"no sample 'aa'.*Did you mean: a"):
        read_native(toy).get("aa")


def test_write_then_read_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "src"
    originals = [
        Sample.parse(
            _record(
                sid,
                {k: str(src / v) for k, v in _images(src, sid).items()},
                region="liver",
                metadata={"radius": 3.5},
                source={"licence": "MIT"},
            )
        )
        for sid in ("s1", "s2")
    ]
    out = tmp_path / "out"
    written = write_native(out, originals)
    again = read_native(out)
    assert [s.sample_id for s in again] == ["s1", "s2"]
    for original, read in zip(originals, again, strict=True):
        # Images were copied into the folder; everything but the paths is unchanged.
        for field in ("input", "target", "mask"):
            path = Path(getattr(read, field))
            assert path.is_absolute() and out.resolve() in path.parents
            assert path.read_bytes() == Path(getattr(original, field)).read_bytes()
        expected = original.model_copy(
            update={f: getattr(read, f) for f in ("input", "target", "mask")}
        )
        assert read == expected
    assert list(written) == list(again)
    # The manifest stores relative paths.
    first = json.loads((out / MANIFEST).read_text().splitlines()[0])
    assert first["input"] == "images/s1_input.png"


def test_write_keeps_relative_paths_and_refuses_overwrite(toy: Path) -> None:
    samples = [
        Sample.parse(_record(sid, {k: f"img/{sid}_{k}.png" for k in ("input", "target", "mask")}))
        for sid in ("a", "b")
    ]
    with pytest.raises(DatasetError, match="already exists; pass overwrite=True"):
        write_native(toy, samples)
    ds = write_native(toy, samples[:1], overwrite=True)
    assert ds.sample_ids() == ["a"]
    assert json.loads((toy / MANIFEST).read_text())["input"] == "img/a_input.png"


def test_write_refuses_duplicate_ids(tmp_path: Path) -> None:
    paths = _images(tmp_path, "a")
    sample = Sample.parse(_record("a", paths))
    with pytest.raises(DatasetError, match="duplicate sample_id 'a'"):
        write_native(tmp_path, [sample, sample])


def test_malformed_json_line_names_line_and_id(toy: Path) -> None:
    lines = (toy / MANIFEST).read_text().splitlines()
    lines.insert(1, '{"sample_id": "broken", "benchmark": ')
    _write_manifest(toy, lines)
    with pytest.raises(
        DatasetError, match=r"samples.jsonl line 2 \(sample 'broken'\?\): not valid JSON"
    ):
        read_native(toy)


def test_missing_field_is_a_record_error_naming_sample_and_line(toy: Path) -> None:
    record = _record("c", _images(toy, "c"))
    del record["instruction"]
    _write_manifest(toy, [*(toy / MANIFEST).read_text().splitlines(), json.dumps(record)])
    with pytest.raises(
        RecordError, match=r"sample 'c' \(.*samples.jsonl line 3\): field 'instruction'"
    ):
        read_native(toy)


def test_duplicate_id_names_both_lines(toy: Path) -> None:
    lines = (toy / MANIFEST).read_text().splitlines()
    _write_manifest(toy, [*lines, lines[0]])
    with pytest.raises(
        DatasetError, match=r"line 3: duplicate sample_id 'a' \(first used on line 1\)"
    ):
        read_native(toy)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            "../x.png",
            r"line 1, sample 'a', field 'input': path '../x.png' escapes the dataset folder",
        ),
        ("img/../../x.png", r"path 'img/../../x.png' escapes the dataset folder .* \(via '..'\)"),
        ("/etc/passwd", r"line 1, sample 'a', field 'input': path '/etc/passwd' is absolute"),
    ],
)
def test_paths_leaving_the_folder_are_refused(toy: Path, path: str, message: str) -> None:
    (toy.parent / "x.png").write_bytes(b"not read")
    record = _record("a", {"input": path})
    _write_manifest(toy, [json.dumps(record)])
    with pytest.raises(DatasetError, match=message):
        read_native(toy)


def test_symlink_escape_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "ds", tmp_path / "outside"
    root.mkdir()
    _images(outside, "a")
    os.symlink(outside / "img", root / "img")  # root/img -> a folder outside the dataset
    _write_manifest(root, [json.dumps(_record("a", {"input": "img/a_input.png"}))])
    with pytest.raises(DatasetError, match=r"sample 'a', field 'input': .*through a symbolic link"):
        read_native(root)


def test_symlink_inside_the_folder_is_fine(toy: Path) -> None:
    os.symlink(toy / "img", toy / "alias")
    _write_manifest(toy, [json.dumps(_record("a", {"input": "alias/a_input.png"}))])
    assert read_native(toy).get("a").input == str(toy.resolve() / "img" / "a_input.png")


def test_all_missing_images_are_reported_together(toy: Path) -> None:
    (toy / "img" / "a_mask.png").unlink()
    (toy / "img" / "b_input.png").unlink()
    with pytest.raises(DatasetError) as err:
        read_native(toy)
    message = str(err.value)
    assert "2 image file(s) missing" in message
    assert "line 1 sample 'a' mask 'img/a_mask.png'" in message
    assert "line 2 sample 'b' input 'img/b_input.png'" in message


def test_folder_without_manifest(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="has no samples.jsonl"):
        read_native(tmp_path)
    with pytest.raises(DatasetError, match="does not exist"):
        read_native(tmp_path / "nope")


def test_blank_lines_are_skipped_and_line_numbers_kept(toy: Path) -> None:
    lines = (toy / MANIFEST).read_text().splitlines()
    _write_manifest(toy, [lines[0], "", lines[0]])
    with pytest.raises(DatasetError, match="line 3: duplicate sample_id 'a'"):
        read_native(toy)


def test_load_images(toy: Path) -> None:
    images = load_images(read_native(toy).get("a"))
    assert images.input.shape == (6, 8, 3) and images.input.dtype == np.uint8
    assert images.input[1, 2].tolist() == [10, 20, 30] and images.input[0, 0].tolist() == [100] * 3
    assert images.target is not None and images.target[0, 0].tolist() == [155] * 3
    assert images.mask is not None and images.mask.dtype == bool
    assert int(images.mask.sum()) == 6 and images.mask[2:4, 3:6].all()


def test_load_images_relative_path_needs_root(toy: Path) -> None:
    sample = Sample.parse(_record("a", {"input": "img/a_input.png"}))
    with pytest.raises(DatasetError, match="is relative; pass root="):
        load_images(sample)
    images = load_images(sample, root=toy)
    assert images.target is None and images.mask is None and images.input.shape == (6, 8, 3)


def test_load_dataset_native(toy: Path) -> None:
    ds = load_dataset(f"native:{toy}")
    assert ds.sample_ids() == ["a", "b"]
    with pytest.raises(DatasetError, match="needs a folder"):
        load_dataset("native")


def test_load_dataset_unknown_kind_suggests() -> None:
    assert {"native", "starter"} <= set(DATASETS.names())
    with pytest.raises(UnknownNameError, match="unknown dataset 'nativ'. Did you mean: native"):
        load_dataset("nativ:/tmp")
    with pytest.raises(ValueError, match="has no kind"):
        load_dataset(":x")


def test_a_relative_dataset_folder_resolves_its_files(tmp_path: Path, monkeypatch) -> None:
    # A plug-in that passes the folder as typed (docs/benchmarks.md's toybench: `toybench:DIR`)
    from medibench.datasets import resolve_inside

    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "a.png").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    found = resolve_inside(Path("ds"), "a.png", what="toy.csv a")
    assert found == tmp_path.resolve() / "ds" / "a.png"
    with pytest.raises(DatasetError, match=r"toy.csv a: path '../x.png' escapes .* \(via '..'\)"):
        resolve_inside(Path("ds"), "../x.png", what="toy.csv a")
