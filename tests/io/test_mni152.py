"""medibench.io's MNI152 volumes: nilearn's resampled 2 mm volumes, computed once per machine
and read back bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

nib = pytest.importorskip("nibabel")
datasets = pytest.importorskip("nilearn.datasets")

from medibench.io._mni152 import _path, _stored, load_mni152  # noqa: E402


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIBENCH_CACHE", str(tmp_path / "cache"))
    _stored.cache_clear()
    yield tmp_path / "cache"
    _stored.cache_clear()


def _same(image, reference) -> None:
    data, ref = np.asanyarray(image.dataobj), np.asanyarray(reference.dataobj)
    assert data.dtype == ref.dtype and np.array_equal(data, ref)
    assert np.array_equal(image.get_fdata(), reference.get_fdata())
    assert np.array_equal(image.affine, reference.affine)
    assert image.header.get_zooms() == reference.header.get_zooms()
    canonical, ref_canonical = nib.as_closest_canonical(image), nib.as_closest_canonical(reference)
    assert np.array_equal(np.asanyarray(canonical.dataobj), np.asanyarray(ref_canonical.dataobj))


@pytest.mark.parametrize("kind", ["template", "gm_mask", "brain_mask"])
def test_a_volume_is_nilearns_computed_then_read_from_the_cache(cache, kind, monkeypatch):
    reference = getattr(datasets, f"load_mni152_{kind}")(resolution=2)
    _same(load_mni152(kind), reference)
    stored = _path(kind, 2)
    assert stored.is_file() and stored.is_relative_to(cache)
    assert "nilearn" in stored.parent.name  # the versions that computed it are its key
    # a later process: nilearn is not asked again
    _stored.cache_clear()
    monkeypatch.setattr(datasets, f"load_mni152_{kind}", lambda **_: pytest.fail("recomputed"))
    _same(load_mni152(kind), reference)


def test_an_unreadable_cache_file_is_computed_again_and_rewritten(cache):
    path = _path("gm_mask", 2)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not an npz")
    _same(load_mni152("gm_mask"), datasets.load_mni152_gm_mask(resolution=2))
    with np.load(path) as stored:
        assert set(stored.files) == {"data", "affine", "header"}


def test_an_unknown_volume_is_refused_by_name(cache):
    with pytest.raises(ValueError, match="unknown MNI152 volume 'csf_mask': one of template, "):
        load_mni152("csf_mask")


def test_each_call_is_a_new_image_a_caller_may_change(cache):
    first = load_mni152("brain_mask")
    np.asanyarray(first.dataobj)[:] = 0
    assert np.asanyarray(load_mni152("brain_mask").dataobj).any()


def test_without_nilearn_the_error_names_the_extra(cache, monkeypatch):
    import importlib.metadata

    real = importlib.metadata.version

    def version(name):
        if name == "nilearn":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    with pytest.raises(ImportError, match=r"need nilearn: pip install 'medibench\[demo-data\]'"):
        load_mni152("template")
