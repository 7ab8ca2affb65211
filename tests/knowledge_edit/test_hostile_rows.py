"""Row paths that leave the dataset: a SLAKE or VQA-RAD row (official JSON or Parquet copy)
whose image name climbs out, is absolute, or goes through a link out is refused naming the
file, the row and the path; nothing outside is copied into the task set; ``medibench edit
tasks`` on a hostile archive exits 2 with one line."""

from __future__ import annotations

import json
import os
import stat
import zipfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.io import encode_image
from medibench.knowledge_edit import TaskError, read_slake, read_vqarad

ESCAPES = [
    ("../../../../etc/hostname", "escapes the dataset folder"),
    ("../secret.png", "escapes the dataset folder"),
    ("a/../../secret.png", "escapes the dataset folder"),
    ("/etc/hostname", "is absolute"),
    ("//etc/hostname", "is absolute"),
    ("C:/secret.png", "is absolute"),
    # imgs/out -> the folder above
    ("out/secret.png", "escapes the dataset folder .* through a symbolic link"),
]


def _png(path: Path, value: int = 50) -> bytes:
    data = encode_image(np.full((8, 8, 3), value, np.uint8), ".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def _secret(tmp_path: Path) -> None:
    """A file outside the dataset that a hostile row may try to reach, and a link to it."""
    _png(tmp_path / "secret.png", 7)


def _slake(root: Path, img_name: str) -> Path:
    base = root / "Slake1.0"
    base.mkdir(parents=True)
    rows = [{"qid": 1, "img_name": "ok.png", "question": "Organ?", "answer": "Lung",
             "q_lang": "en"},
            {"qid": 2, "img_name": img_name, "question": "Which?", "answer": "Liver",
             "q_lang": "en"}]  # fmt: skip
    (base / "test.json").write_text(json.dumps(rows))
    _png(base / "imgs" / "ok.png")
    os.symlink(root.parent, base / "imgs" / "out")
    return root


def _vqarad(root: Path, image_name: str) -> Path:
    root.mkdir(parents=True)
    rows = [{"qid": "a1", "phrase_type": "test_freeform", "image_name": image_name,
             "question": "Mass?", "answer": "yes"}]  # fmt: skip
    (root / "VQA_RAD Dataset Public.json").write_text(json.dumps(rows))
    (root / "VQA_RAD Image Folder").mkdir()
    os.symlink(root.parent, root / "VQA_RAD Image Folder" / "out")
    return root


def _stored(images: Path) -> list[bytes]:
    return [p.read_bytes() for p in images.rglob("*") if p.is_file()] if images.exists() else []


@pytest.mark.parametrize(("name", "why"), ESCAPES)
def test_a_slake_row_out_of_the_folder_is_refused(tmp_path, name, why):
    _secret(tmp_path)
    root = _slake(tmp_path / "slake", name)
    images = tmp_path / "ts" / "images"
    with pytest.raises(TaskError, match=rf"test\.json row 1, image: path '.*' {why}"):
        read_slake(root, images)
    assert (tmp_path / "secret.png").read_bytes() not in _stored(images)


@pytest.mark.parametrize(("name", "why"), ESCAPES)
def test_a_vqarad_row_out_of_the_folder_is_refused(tmp_path, name, why):
    _secret(tmp_path)
    root = _vqarad(tmp_path / "rad", name)
    with pytest.raises(TaskError, match=rf"Public\.json row 0, image: path '.*' {why}"):
        read_vqarad(root, tmp_path / "ts" / "images")
    assert not _stored(tmp_path / "ts" / "images")


@pytest.mark.parametrize(("name", "why"), ESCAPES)
def test_a_parquet_img_name_out_of_the_folder_is_refused(tmp_path, name, why):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    _secret(tmp_path)
    folder = tmp_path / "slake" / "data"
    folder.mkdir(parents=True)
    (folder / "imgs").mkdir()
    os.symlink(tmp_path, folder / "imgs" / "out")
    rows = [{"question": "Which?", "answer": "Liver", "img_name": name}]
    pq.write_table(pa.Table.from_pylist(rows), folder / "test-00000-of-00001.parquet")
    with pytest.raises(TaskError, match=rf"row 0.*image: path '.*' {why}"):
        read_slake(tmp_path / "slake", tmp_path / "ts" / "images")
    assert not _stored(tmp_path / "ts" / "images")


def test_edit_tasks_on_a_zip_with_a_link_chain_exits_2_and_writes_nothing_outside(tmp_path):
    home = tmp_path / "a" / "b"
    home.mkdir(parents=True)
    archive = home / "x.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, target in [("l", "."), ("l2", "l/.."), ("l3", "l2/..")]:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
        zf.writestr("l3/X", b"escaped")
    res = CliRunner().invoke(app, ["edit", "tasks", "--slake", str(archive), "--out",
                                   str(home / "ts")])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "is a link to" in res.output
    assert not list(tmp_path.rglob("X"))


@pytest.mark.parametrize("name", [n for n, _ in ESCAPES])
def test_edit_tasks_with_a_hostile_row_exits_2_naming_the_row(tmp_path, name):
    _secret(tmp_path)
    root = _slake(tmp_path / "slake", name)
    res = CliRunner().invoke(app, ["edit", "tasks", "--slake", str(root), "--out",
                                   str(tmp_path / "ts")])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "row 1, image: path" in res.output
    assert (tmp_path / "secret.png").read_bytes() not in _stored(tmp_path / "ts" / "images")
