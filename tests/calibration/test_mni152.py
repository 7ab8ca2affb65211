"""The MNI152 tissue example: the numbers the README quotes, reproduced offline."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nilearn")

from medibench.calibration.mni152 import run_example, shift_domain, tissue_volume  # noqa: E402

# python -m medibench.calibration.mni152 --out DIR (seed 0; 6,000 / 3,000 / 6,000 voxels)
README = {
    "temperature": 0.4251,
    ("before", "in-domain"): {"accuracy": 0.9743, "ece": 0.0369, "nll": 0.0892},
    ("before", "shifted"): {"accuracy": 0.8150, "ece": 0.1169, "nll": 0.6514},
    ("after_temperature", "in-domain"): {"accuracy": 0.9743, "ece": 0.0038, "nll": 0.0666},
    ("after_temperature", "shifted"): {"accuracy": 0.8150, "ece": 0.1561, "nll": 1.3766},
}


@pytest.mark.slow
def test_labels_come_from_the_masks():
    t1, labels, brain = tissue_volume()  # brain: the brain mask dilated by 2 voxels
    assert t1.shape == labels.shape == (99, 117, 95)
    assert (labels[~brain] == -1).all()
    assert np.bincount(labels[brain]).tolist() == [153732, 79732, 39090]
    assert set(np.unique(labels)) == {-1, 0, 1, 2}
    shifted = shift_domain(t1, seed=0)
    assert np.array_equal(shifted, shift_domain(t1, seed=0))
    assert np.abs(shifted - t1)[brain].mean() > 0.05


@pytest.mark.slow
def test_the_readme_numbers():
    ex = run_example(seed=0)
    s = ex.summary
    assert s["temperature"] == pytest.approx(README["temperature"], abs=1e-3)
    for (stage, domain), values in ((k, v) for k, v in README.items() if k != "temperature"):
        for metric, want in values.items():
            assert s[stage][domain][metric] == pytest.approx(want, abs=1e-3), (stage, domain)
    # the story the numbers tell: shift costs accuracy and calibration, and a temperature fitted
    # in-domain fixes in-domain calibration but not the shifted domain's
    assert s["before"]["shifted"]["ece"] > 3 * s["before"]["in-domain"]["ece"]
    assert s["after_temperature"]["in-domain"]["ece"] < s["before"]["in-domain"]["ece"]
    assert s["after_temperature"]["shifted"]["ece"] > s["before"]["shifted"]["ece"]
    assert ex.test.n == 12_000 and ex.val.n == 3_000
