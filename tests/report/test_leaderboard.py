import csv
import math

import pytest

from medibench.report import leaderboard, write_leaderboard_csv
from medibench.samples import Sample, Score


def _sample(sid, perspective):
    return Sample(
        sample_id=sid, benchmark="b", input="x.png", instruction="Do it.", perspective=perspective
    )


SAMPLES = {
    s.sample_id: s
    for s in [
        _sample("p1", "perception"),
        _sample("p2", "perception"),
        _sample("m1", "modification"),
    ]
}


def _score(sid, model, status="ok", **metrics):
    return Score(
        sample_id=sid,
        model=model,
        protocol="native",
        protocol_version="1",
        metrics=metrics,
        status=status,
    )


def test_means_skip_missing_values_and_count_them():
    scores = [
        _score("p1", "a", ssim=0.5, dice=1.0),
        _score("p2", "a", ssim=0.7, dice=None),
        _score("m1", "a", ssim=0.2, cp_psnr=math.inf),
        _score("p1", "b", status="missing", ssim=None, dice=None),
        _score("p2", "b", ssim=0.1, dice=0.0),
    ]
    rows = leaderboard(scores, SAMPLES, metrics=["ssim", "dice", "cp_psnr"])
    by = {(r["perspective"], r["model"]): r for r in rows}
    assert by[("perception", "a")] == {
        "perspective": "perception",
        "model": "a",
        "n": 2,
        "n_missing": 0,
        "ssim": pytest.approx(0.6),
        "dice": 1.0,
        "cp_psnr": None,
    }
    assert by[("perception", "b")]["n_missing"] == 1
    assert by[("perception", "b")]["dice"] == 0.0  # a real 0, not a missing one
    assert by[("modification", "a")]["cp_psnr"] == math.inf


def test_csv_round_trip(tmp_path):
    rows = leaderboard([_score("p1", "a", ssim=0.25)], SAMPLES, by="all")
    path = write_leaderboard_csv(rows, tmp_path / "r.csv")
    with open(path) as fh:
        assert list(csv.DictReader(fh)) == [
            {"all": "all", "model": "a", "n": "1", "n_missing": "0", "ssim": "0.25"}
        ]
    with pytest.raises(ValueError, match="no leaderboard rows"):
        write_leaderboard_csv([], tmp_path / "e.csv")
