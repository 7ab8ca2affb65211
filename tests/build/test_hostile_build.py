"""``medibench build`` on hostile and unlucky inputs: a full disk ends with the run's clean
message, a bad key is named, an item that cannot be built fails alone, a damaged DICOM is
blamed on itself, and output options are checked before anything is built."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from medibench.build import BuildError, build, read_source
from medibench.cli import app
from tests.build.conftest import mni_png_source

runner = CliRunner()


def _invoke(*args):
    res = runner.invoke(app, [str(a) for a in args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res


@pytest.mark.parametrize("value", ["[1]", "high", "[0.5, 1]", "true", "{a: 1}", ".nan"])
def test_a_bad_label_threshold_names_the_key(png_source, value):
    text = png_source.read_text() + f"label_threshold: {value}\n"
    png_source.write_text(text)
    with pytest.raises(BuildError, match=r"'label_threshold' must be a number, got"):
        read_source(png_source)
    res = _invoke("build", "perception", "--source", png_source, "--out",
                  png_source.parent / "out")  # fmt: skip
    assert res.exit_code == 2 and "'label_threshold' must be a number" in res.output


def test_a_full_disk_is_the_runs_clean_message(png_source, tmp_path, monkeypatch):
    from medibench.io import _write

    real = _write.os.replace
    calls = {"n": 0}

    def full(src, dst):
        calls["n"] += 1
        if calls["n"] > 3:  # a few files land, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real(src, dst)

    monkeypatch.setattr(_write.os, "replace", full)
    out = tmp_path / "out"
    res = _invoke("build", "perception", "--source", png_source, "--out", out)
    assert res.exit_code == 1, res.output
    text = " ".join(res.output.split())
    assert "no space left on the device to write" in text
    assert "run the same command again to resume" in text
    assert not list(out.rglob("*.tmp"))  # no half-written file left


def test_an_item_level_ensopc_is_a_clean_stop_too(png_source, tmp_path, monkeypatch):
    from medibench.build import _engine

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", "x.png")

    monkeypatch.setattr(_engine, "_write", full)
    res = _invoke("build", "perception", "--source", png_source, "--out", tmp_path / "out")
    assert res.exit_code == 1 and "no space left on the device" in res.output


def test_an_empty_intensity_range_fails_each_item_not_the_build(demo_sources, tmp_path):
    folder = tmp_path / "mni"
    shutil.copytree(demo_sources["mni152"].parent, folder)
    source = folder / "SOURCE.yaml"
    source.write_text(source.read_text() + "intensity: [5, 5]\n")
    result = build("perception", source, tmp_path / "out")
    assert result.failures and not result.built
    assert all("'intensity: [5, 5]' is an empty range" in e for e in result.failures.values())
    res = _invoke("build", "perception", "--source", source, "--out", tmp_path / "out2")
    assert res.exit_code == 1 and "is an empty range" in res.output


def test_an_item_that_raises_fails_alone(tmp_path, monkeypatch):
    source = mni_png_source(tmp_path / "src", patients=2, per_patient=1)
    bad = tmp_path / "src" / "img" / "p0_0.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n cut off")
    result = build("perception", source, tmp_path / "out")
    assert list(result.failures) == ["p0_0"] and result.built == ["p1_0"]
    assert str(bad) in result.failures["p0_0"]


@pytest.mark.parametrize("cut", [300, 0.5])
def test_a_damaged_dicom_in_a_series_is_blamed_on_itself(demo_sources, tmp_path, cut):
    folder = tmp_path / "liver"
    shutil.copytree(demo_sources["liver"].parent, folder)
    damaged = folder / "ct" / "ct2.dcm"
    data = damaged.read_bytes()
    damaged.write_bytes(data[: int(cut * len(data)) if isinstance(cut, float) else cut])
    result = build("perception", folder / "SOURCE.yaml", tmp_path / "out")
    (error,) = result.failures.values()
    assert str(damaged) in error and "liver_seg.dcm" not in error


def test_out_at_a_file_is_refused(png_source, tmp_path):
    out = tmp_path / "a-file"
    out.write_text("not a folder")
    res = _invoke("build", "perception", "--source", png_source, "--out", out)
    assert res.exit_code == 2 and "is a file; give a folder" in res.output
    assert out.read_text() == "not a folder"


def test_an_unknown_export_is_refused_before_building(png_source, tmp_path):
    out = tmp_path / "out"
    res = _invoke("build", "perception", "--source", png_source, "--out", out,
                  "--export", "nope")  # fmt: skip
    assert res.exit_code == 2 and "unknown export format(s) ['nope']" in res.output
    assert not (out / "items").exists() and not list(Path(out).rglob("*.png"))
