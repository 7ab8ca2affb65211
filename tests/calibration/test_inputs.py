"""Reading predictions (npz, CSV, Parquet) and every bad input the issue lists."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.calibration import (
    as_predictions,
    load_predictions,
    save_predictions,
    score,
    softmax,
)
from tests.calibration.conftest import make_logits


@pytest.mark.parametrize("suffix", [".npz", ".csv", ".parquet"])
def test_round_trip_keeps_scores_labels_and_groups(tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    z, y = make_logits(50, 3, seed=1)
    pred = as_predictions(y, logits=z, groups={"seed": np.array(["1", "2"] * 25)})
    path = save_predictions(pred, tmp_path / f"p{suffix}")
    back = load_predictions(path)
    np.testing.assert_allclose(back.probs, pred.probs, rtol=1e-15)
    np.testing.assert_allclose(back.logits, z, rtol=1e-15)
    assert back.labels.tolist() == y.tolist()
    assert back.groups["seed"].tolist() == ["1", "2"] * 25
    only = load_predictions(path, kind="logits")
    np.testing.assert_allclose(only.probs, softmax(z))


def test_csv_with_logits_only_is_softmaxed(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("label,logit_0,logit_1,domain\n0,2.0,0.0,a\n1,0.0,0.0,b\n")
    pred = load_predictions(path)
    assert pred.probs[0, 0] == pytest.approx(np.exp(2) / (np.exp(2) + 1))
    assert pred.probs[1].tolist() == [0.5, 0.5]
    assert pred.groups["domain"].tolist() == ["a", "b"]


def test_probabilities_that_do_not_sum_to_one_name_the_first_bad_row(tmp_path):
    probs = np.array([[0.5, 0.5], [0.7, 0.2], [0.6, 0.6]])
    with pytest.raises(ValueError, match=r"row 1: probabilities sum to 0\.9, not 1.*2 rows"):
        as_predictions([0, 1, 0], probs=probs)
    np.savez(tmp_path / "bad.npz", probs=probs, labels=np.array([0, 1, 0]))
    with pytest.raises(ValueError, match=r"bad\.npz: row 1: .*declare them as logits"):
        load_predictions(tmp_path / "bad.npz")
    # the same numbers declared as logits are softmaxed
    np.savez(tmp_path / "scores.npz", logits=probs, labels=np.array([0, 1, 0]))
    np.testing.assert_allclose(load_predictions(tmp_path / "scores.npz").probs, softmax(probs))
    with pytest.raises(ValueError, match="logits were declared but the file has only prob"):
        load_predictions(tmp_path / "bad.npz", kind="logits")


def test_negative_probabilities_are_refused():
    with pytest.raises(ValueError, match=r"row 0, class 0: probability 1\.1 is outside"):
        as_predictions([0], probs=[[1.1, -0.1]])


def test_labels_out_of_range_and_not_integers():
    with pytest.raises(ValueError, match="row 2: label 3 is out of range for 3 classes"):
        as_predictions([0, 2, 3], probs=np.full((3, 3), 1 / 3))
    with pytest.raises(ValueError, match="row 1: label 1.5 is not an integer"):
        as_predictions([0.0, 1.5], probs=np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="row 0: label -1 is out of range"):
        as_predictions([-1], probs=[[0.5, 0.5]])


def test_nans_name_the_row_and_class(tmp_path):
    with pytest.raises(ValueError, match=r"row 1, class 0: logits value nan is not finite"):
        as_predictions([0, 1], logits=[[0.0, 1.0], [np.nan, 1.0]])
    path = tmp_path / "p.csv"
    path.write_text("label,prob_0,prob_1\n0,0.5,0.5\n1,,0.5\n")
    with pytest.raises(ValueError, match=r"p\.csv: row 1, class 0: probabilities value nan"):
        load_predictions(path)


def test_one_class_only_is_refused():
    with pytest.raises(ValueError, match="1 column: calibration needs at least 2 classes"):
        as_predictions([0, 0], probs=[[1.0], [1.0]])


def test_fewer_samples_than_bins_names_the_source():
    pred = as_predictions([0, 1, 1], probs=[[0.6, 0.4], [0.3, 0.7], [0.2, 0.8]], source="x.npz")
    with pytest.raises(ValueError, match=r"x\.npz \(calibration@1\): 3 samples but 15 bins"):
        score(pred, n_resamples=0)
    assert score(pred, n_bins=3, n_resamples=0)["ece"] == pytest.approx((0.4 + 0.5) / 3)


def test_malformed_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such predictions file"):
        load_predictions(tmp_path / "missing.npz")
    (tmp_path / "p.txt").write_text("x")
    with pytest.raises(ValueError, match="unknown predictions format"):
        load_predictions(tmp_path / "p.txt")
    (tmp_path / "nolabel.csv").write_text("prob_0,prob_1\n0.5,0.5\n")
    with pytest.raises(ValueError, match="no labels"):
        load_predictions(tmp_path / "nolabel.csv")
    (tmp_path / "gap.csv").write_text("label,prob_0,prob_2\n0,0.5,0.5\n")
    with pytest.raises(ValueError, match="column prob_1 is missing"):
        load_predictions(tmp_path / "gap.csv")
    (tmp_path / "text.csv").write_text("label,prob_0,prob_1\n0,half,0.5\n")
    with pytest.raises(ValueError, match="row 0, column prob_0: 'half' is not a number"):
        load_predictions(tmp_path / "text.csv")
