"""The fused stencil's strips, row pairs and paths on shapes the 37x45 grid does not reach.

Strips are ``_ssim_fused._BLOCK`` channel-elements wide (384 by default, 128 RGB pixels); the
shapes below are cut for 192-element strips (64 RGB pixels), which every test here sets, and
the last test crosses the default's strips. Output rows go in pairs, and the plain mean, the
weighted (region) sums and the staged path (map, long filters, three regions) are separate
loops: each is checked against float64 scikit-image or the OpenCV path here.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from medibench.metrics import _ssim_fused, masked_ssim, ssim, ssim_by_region, ssim_map

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _strips_of_192(monkeypatch, request):
    if not request.node.name.startswith("test_the_default_strips"):
        monkeypatch.setattr(_ssim_fused, "_BLOCK", 192)


def _pair(shape: tuple[int, ...], seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, shape, dtype=np.uint8)
    b = np.clip(a + rng.normal(0, 30, shape), 0, 255).astype(np.uint8)
    h, w = shape[:2]
    b[h // 4 : h // 2, w // 3 : w // 2] = 255 - b[h // 4 : h // 2, w // 3 : w // 2]
    roi = np.zeros((h, w), bool)
    roi[h // 5 : h // 2 + 3, w // 4 : max(w // 4 + 3, w - 9)] = True
    return a, b, roi


def _reference(a, b, axis, **kw) -> float:
    return structural_similarity(
        a.astype(np.float64),
        b.astype(np.float64),
        data_range=255,
        channel_axis=axis,
        gaussian_weights=kw.get("window", "gaussian") == "gaussian",
        win_size=kw.get("win_size"),
        sigma=kw.get("sigma", 1.5),
        use_sample_covariance=kw.get("use_sample_covariance", False),
    )


SHAPES = [
    (11, 11),  # as small as the filter: reflection everywhere, one strip
    (12, 200),  # gray: two strips (192 + 8 elements), an even number of rows
    (23, 130, 3),  # RGB: three strips (64 + 64 + 2 pixels), an odd number of rows
    (70, 65, 3),  # one pixel past a strip
    (31, 97, 2),  # 2 channels: 96-pixel strips
    (17, 40, 5),  # 5 channels: strips of 190 elements
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_mean_and_regions_match_skimage_across_strips(monkeypatch, shape, dtype):
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "numba")
    a, b, roi = _pair(shape, seed=len(shape) * 100 + shape[1])
    axis = -1 if a.ndim == 3 else None
    tol = 1e-5 if dtype is np.float32 else 1e-12
    kw = dict(data_range=255, channel_axis=axis, dtype=dtype)
    assert ssim(a, b, **kw) == pytest.approx(_reference(a, b, axis), abs=tol)
    full = structural_similarity(
        a.astype(np.float64),
        b.astype(np.float64),
        data_range=255,
        channel_axis=axis,
        gaussian_weights=True,
        use_sample_covariance=False,
        full=True,
    )[1]
    full = full if full.ndim == 3 else full[..., None]
    by = ssim_by_region(a, b, roi, **kw)
    assert by["full"] == pytest.approx(_reference(a, b, axis), abs=tol)
    assert by["outside"] == pytest.approx(full[~roi].mean(), abs=tol)
    assert by["inside"] == pytest.approx(full[roi].mean(), abs=tol)
    assert masked_ssim(a, b, roi, **kw) == pytest.approx(full[~roi].mean(), abs=tol)
    np.testing.assert_allclose(
        ssim_map(a, b, **kw).reshape(full.shape), full, atol=2e-5 if dtype is np.float32 else 1e-12
    )


@pytest.mark.parametrize(
    "opts",
    [
        dict(window="uniform", use_sample_covariance=True),  # 7 taps zero-padded to 11
        dict(window="gaussian", win_size=15),  # crop (7) wider than the filter's radius (5)
        dict(window="gaussian", sigma=2.0),  # 15 taps: the staged path
        dict(window="uniform", win_size=3),
    ],
    ids=str,
)
def test_other_windows_across_strips(monkeypatch, opts):
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "numba")
    a, b, roi = _pair((41, 150, 3), seed=7)
    for dtype, tol in ((np.float32, 1e-5), (np.float64, 1e-12)):
        got = ssim(a, b, data_range=255, dtype=dtype, **opts)
        assert got == pytest.approx(_reference(a, b, -1, **opts), abs=tol)
        fused = ssim_by_region(a, b, roi, data_range=255, dtype=dtype, **opts)
        monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "opencv")
        cv = ssim_by_region(a, b, roi, data_range=255, dtype=dtype, **opts)
        monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "numba")
        for key in cv:
            assert fused[key] == pytest.approx(cv[key], abs=tol)


def test_three_regions_take_the_staged_path(monkeypatch):
    # fused_ssim takes any number of regions; more than the weighted loop's three sums are
    # summed per pixel from the stored row.
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "numba")
    a, b, roi = _pair((29, 140, 3), seed=11)
    masks = np.stack([roi, ~roi, np.roll(roi, 9, axis=1)])
    taps = np.exp(-0.5 * (np.arange(-5, 6) / 1.5) ** 2)
    taps /= taps.sum()
    kw = dict(c1=(0.01 * 255) ** 2, c2=(0.03 * 255) ** 2, cov_norm=1.0, crop=5)
    _, sums = _ssim_fused.fused_ssim(
        a, b, taps, masks=masks, want_map=False, dtype=np.float64, **kw
    )
    s, _ = _ssim_fused.fused_ssim(
        a, b, taps, masks=masks[:0], want_map=True, dtype=np.float64, **kw
    )
    assert s is not None
    assert sums[0] == pytest.approx(s[5:-5, 5:-5].sum(), rel=1e-12)
    for i, m in enumerate(masks):
        assert sums[1 + i] == pytest.approx(s[m].sum(), rel=1e-12)


@pytest.mark.parametrize("shape", [(64, 64, 3), (33, 201), (11, 300, 3)], ids=str)
def test_identical_images_give_exactly_one(monkeypatch, shape):
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "numba")
    a, _, roi = _pair(shape, seed=5)
    axis = -1 if a.ndim == 3 else None
    for dtype in (np.float32, np.float64):
        kw = dict(data_range=255, channel_axis=axis, dtype=dtype)
        assert ssim(a, a, **kw) == 1.0
        assert masked_ssim(a, a, roi, **kw) == 1.0
        assert set(ssim_by_region(a, a, roi, **kw).values()) == {1.0}
        assert (ssim_map(a, a, **kw) == 1.0).all()


def test_offset_is_near_the_data_and_short(monkeypatch):
    # The kernel centres the data on the mean of every 8th row, rounded to 8 significant bits
    # (uint8 minus the offset is then exact in float32): float data far from 0 stays accurate.
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "numba")
    a, b, _ = _pair((40, 90, 3), seed=3)
    for shift in (0.5, 1e4):
        far_a, far_b = a.astype(np.float64) + shift, b.astype(np.float64) + shift
        ref = _reference(far_a, far_b, -1)
        got = ssim(far_a, far_b, data_range=255, dtype=np.float32)
        assert got == pytest.approx(ref, abs=1e-5)


@pytest.mark.parametrize("shape", [(12, 392), (23, 258, 3), (70, 129, 3)], ids=str)
def test_the_default_strips_match_skimage(monkeypatch, shape):
    assert _ssim_fused._BLOCK == 384  # two strips and a bit: 384 + 8, 128 + 128 + 2, 128 + 1
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "numba")
    a, b, roi = _pair(shape, seed=shape[1])
    axis = -1 if a.ndim == 3 else None
    kw = dict(data_range=255, channel_axis=axis, dtype=np.float32)
    assert ssim(a, b, **kw) == pytest.approx(_reference(a, b, axis), abs=1e-5)
    by = ssim_by_region(a, b, roi, **kw)
    assert by["full"] == ssim(a, b, **kw)  # bit for bit, as at every strip width
    assert by["outside"] == masked_ssim(a, b, roi, region="outside", **kw)


def test_a_strip_wider_than_the_rings_rows_is_refused(monkeypatch):
    from medibench.metrics import _ssim_stencil

    # The ring's rows are ROW elements (a compile-time constant of the vertical loops); 192-element
    # strips (every other test here) fit them with room to spare, a wider strip would overrun.
    monkeypatch.setattr(_ssim_fused, "_BLOCK", _ssim_stencil.ROW + 3)
    monkeypatch.setenv("MEDIBENCH_SSIM_BACKEND", "numba")
    a, b, _ = _pair((20, 400), seed=3)
    with pytest.raises(ValueError, match=r"wider than the ring's rows \(ROW\)"):
        ssim(a, b, data_range=255, channel_axis=None, dtype=np.float32)


def test_a_cache_numba_would_not_load_counts_as_cold(tmp_path):
    # A stale build would be rebuilt in-process by the first caller, which would then round
    # differently from the processes that load the rebuilt cache; a cold cache is filled by a
    # child process instead. The index is written as numba writes it: its version, then the
    # source's sha256 and the overloads.
    import os

    import numba

    source = tmp_path / "_ssim_stencil.py"
    source.write_text("# the stencil\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    assert _ssim_fused._cold_cache(cache, source)  # no index yet
    index = cache / "_ssim_stencil.ssim_rows-32.py311.nbi"
    numba_version = numba.__version__
    _write_index(index, numba_version, source.read_bytes())
    assert not _ssim_fused._cold_cache(cache, source)  # built from this source by this numba
    _write_index(index, numba_version, b"# an older stencil\n")
    assert _ssim_fused._cold_cache(cache, source)  # another source: numba would rebuild it
    _write_index(index, "0.1.0", source.read_bytes())
    assert _ssim_fused._cold_cache(cache, source)  # another numba: likewise
    # An index this does not read: current when it is newer than the source.
    index.write_bytes(b"not a pickle")
    os.utime(source, (1_000_000, 1_000_000))
    os.utime(index, (999_000, 999_000))
    assert _ssim_fused._cold_cache(cache, source)
    os.utime(index, (1_000_500, 1_000_500))
    assert not _ssim_fused._cold_cache(cache, source)


def test_the_one_off_build_says_so_before_it_starts(monkeypatch, tmp_path, capsys):
    # The first use after installing the extra compiles for about a minute (179 s for a 5-sample
    # score on a loaded machine): on a cold cache the user is told first; on a warm one, nothing.
    import subprocess

    import numba

    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))  # as NUMBA_CACHE_DIR does
    folder = _ssim_fused._cache_folder()
    assert folder is not None and folder.parent == tmp_path  # numba's own locator, honoured
    source = Path(_ssim_fused.__file__).with_name("_ssim_stencil.py")
    index = folder / "_ssim_stencil.ssim_rows-99.py311.nbi"
    said_before = []

    def build(args, **kwargs):  # the child's build, without the minute: it writes the index
        assert "warm()" in args[-1] and kwargs["env"]["MEDIBENCH_SSIM_WARMING"] == "1"
        said_before.append(capsys.readouterr().err)
        _write_index(index, numba.__version__, source.read_bytes())

    monkeypatch.setattr(subprocess, "run", build)
    _ssim_fused._fill_cache()
    assert said_before == [
        "medibench: compiling the fast SSIM kernel once with numba "
        f"(about {_ssim_fused._BUILD_SECONDS} s on an idle core; cached afterwards in {folder})\n"
    ]
    assert capsys.readouterr().err.startswith("medibench: the SSIM kernel took ")
    _ssim_fused._fill_cache()  # warm: no build, no word
    assert len(said_before) == 1
    assert capsys.readouterr().err == ""


def _write_index(index: Path, version: str, source: bytes) -> None:
    """An index as numba writes it: its version, then the source's sha256 and the overloads."""
    import hashlib
    import pickle

    index.write_bytes(pickle.dumps(version) + pickle.dumps((hashlib.sha256(source).digest(), {})))


def test_a_process_that_waits_for_the_build_does_not_build_again(monkeypatch, tmp_path, capsys):
    # Parallel workers (xdist, `score --workers`) meeting a cold cache: one builds under the
    # lock, the others wait for it and find the cache filled, instead of each compiling.
    import fcntl
    import subprocess
    import threading

    import numba

    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    folder = _ssim_fused._cache_folder()
    assert folder is not None
    folder.mkdir(parents=True, exist_ok=True)
    source = Path(_ssim_fused.__file__).with_name("_ssim_stencil.py")
    builds = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: builds.append(a))
    holder = os.open(folder / ".medibench-build.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another process is building
    waiter = threading.Thread(target=_ssim_fused._fill_cache)
    waiter.start()
    waiter.join(timeout=0.5)
    assert waiter.is_alive()  # it waits for the lock
    _write_index(folder / "_ssim_stencil.ssim_rows-99.py311.nbi", numba.__version__,
                 source.read_bytes())  # fmt: skip
    os.close(holder)  # the build is done
    waiter.join(timeout=30)
    assert not waiter.is_alive() and builds == []
    assert "another process is compiling the fast SSIM kernel: waiting for it" in (
        capsys.readouterr().err
    )
