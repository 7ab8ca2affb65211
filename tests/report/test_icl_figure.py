"""The score-vs-K figure of an in-context run (K = 0, 1, 2): each plotted point is the
leaderboard's overall mean of that entry, K = 0 (no demonstrations) included."""

from __future__ import annotations

import json

import pytest

from medibench.report import build_report
from medibench.report._icl import k_curves


@pytest.fixture(scope="module")
def icl_report(icl_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("icl-report")
    build_report(icl_run, out, n_resamples=200, workers=1)
    return out


def test_the_plotted_points_are_the_leaderboards_means(icl_report):
    drawn = json.loads((icl_report / "plots/native@1/score_vs_k.json").read_text())
    rows = json.loads((icl_report / "tables/native@1/leaderboard.json").read_text())["rows"]
    overall = {r["model"]: r for r in rows if r["by"] == "all" and r["group"] == "micro"}
    assert set(drawn["curves"]) == {"ssim", "psnr"}
    for metric, curves in drawn["curves"].items():
        assert list(curves) == ["mean-of-examples"]
        points = curves["mean-of-examples"]
        assert [k for k, _ in points] == [0, 1, 2]
        for k, mean in points:
            assert mean == pytest.approx(
                overall[f"mean-of-examples@icl-{int(k)}"][metric], abs=1e-12
            )
    # Without demonstrations the editor returns its input; with them, the mean of their targets:
    # the curve rises from K = 0.
    ssim = drawn["curves"]["ssim"]["mean-of-examples"]
    assert ssim[0][1] < ssim[1][1]
    page = (icl_report / "index.html").read_text()
    assert 'data-kind="icl"' in page and "plots/native@1/score_vs_k.png" in page


def test_k_curves_keep_models_with_two_k_and_their_intervals():
    rows = [
        {"model": "m@icl-2", "by": "all", "group": "micro", "s": 0.5, "s_ci_low": 0.4,
         "s_ci_high": 0.6},
        {"model": "m@icl-0", "by": "all", "group": "micro", "s": 0.2, "s_ci_low": None,
         "s_ci_high": None},
        {"model": "m@icl-0", "by": "task", "group": "t", "s": 0.9},
        {"model": "lone@icl-1", "by": "all", "group": "micro", "s": 0.7},
        {"model": "plain", "by": "all", "group": "micro", "s": 0.1},
    ]  # fmt: skip
    assert k_curves(rows, ["s", "absent"]) == {"s": {"m": [[0, 0.2, None, None],
                                                           [2, 0.5, 0.4, 0.6]]}}  # fmt: skip


def test_demonstrations_from_another_pool_show_that_pools_images(tmp_path):
    """``--icl-pool`` another dataset whose ids are the run's own (a0 ... a9; other patients,
    images and pixels, a train split): the
    sample view's thumbnails are the pool's images, never the run's samples of the same id."""
    import numpy as np

    from medibench.io import read_image
    from medibench.runs import RunConfig, RunStore, run
    from medibench.runs._demos import read_demonstrations
    from tests.runs.icl_data import TEMPTING, write_dataset

    data = write_dataset(tmp_path / "data", TEMPTING)
    others = {sid: (f"Q{i}", f"J{i}", task, modality, "train", True, None)
              for i, (sid, (_, _, task, modality, *_)) in enumerate(TEMPTING.items())}  # fmt: skip
    pool = write_dataset(tmp_path / "pool", others, offset=100)
    config = RunConfig(dataset=f"native:{data}", models=("tests.runs.icl_data:make_mean",),
                       out=tmp_path / "run", icl_k=(1,), icl_pool=f"native:{pool}",
                       protocols=("native@1",))  # fmt: skip
    run(config, progress=False).close()
    with RunStore(tmp_path / "run") as store:
        shown = read_demonstrations(store)[("mean-of-examples@icl-1", "a0", 0)]["demo_ids"]
    index = build_report(tmp_path / "run", tmp_path / "report", n_resamples=50, plots=False,
                         workers=1)  # fmt: skip
    text = index.read_text(encoding="utf-8")
    blob = json.loads(text.split('id="report-data">', 1)[1].split("</script>", 1)[0])
    assert blob["demo_pool"]["spec"] == f"native:{pool}" and blob["demo_pool"]["error"] is None
    (sid,) = shown
    picture = blob["demo_pool"]["pictures"][sid]
    copied = read_image(tmp_path / "report" / picture["full"], mode="rgb")
    assert np.array_equal(copied, read_image(pool / "img" / f"{sid}.png", mode="rgb"))
    assert not np.array_equal(copied, read_image(data / "img" / f"{sid}.png", mode="rgb"))
