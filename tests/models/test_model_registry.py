"""The model registry, load_model and the EditModel protocol."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.models import MODELS, EditModel, load_model
from medibench.models.baselines import ClassicalModel, IdentityModel
from medibench.registry import UnknownNameError


def test_builtin_models_are_registered_with_help():
    assert {"identity", "classical"} <= set(MODELS.names())
    assert "unchanged" in MODELS.help("identity")
    assert "instruction" in MODELS.help("classical")


def test_load_model_builds_edit_models_with_settings():
    identity = load_model("identity")
    classical = load_model("classical", alpha=0.5, name="classical-a05")
    assert isinstance(identity, IdentityModel) and identity.name == "identity"
    assert isinstance(classical, ClassicalModel) and classical.name == "classical-a05"
    assert classical.alpha == 0.5
    assert isinstance(identity, EditModel) and isinstance(classical, EditModel)


def test_unknown_model_suggests_close_names():
    with pytest.raises(UnknownNameError, match="Did you mean: classical"):
        load_model("clasical")


def test_load_model_rejects_factories_that_do_not_make_edit_models():
    MODELS.register("_not_a_model", lambda: object())
    try:
        with pytest.raises(TypeError, match="not an EditModel"):
            load_model("_not_a_model")
    finally:
        MODELS._entries.pop("_not_a_model")


def test_identity_returns_an_equal_copy():
    image = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    out = load_model("identity").edit(image, "anything at all", seed=3)
    np.testing.assert_array_equal(out, image)
    assert out.dtype == np.uint8
    assert not np.shares_memory(out, image)


def test_models_check_their_input():
    model = load_model("identity")
    with pytest.raises(ValueError, match="uint8"):
        model.edit(np.zeros((4, 4, 3), np.float32), "x", seed=0)
    with pytest.raises(ValueError, match=r"\(H, W, 3\)"):
        model.edit(np.zeros((4, 4, 4), np.uint8), "x", seed=0)
    gray = np.full((4, 4), 7, np.uint8)
    assert model.edit(gray, "x", seed=0).shape == (4, 4, 3)
