"""The grid's report panel: plain column names, and a heat map per metric whose cells are the
spread table's means (blank where a setting has no value, one colour scale per metric)."""

from __future__ import annotations

import json

import pytest

from medibench.prompt_tuning._heatmaps import PLAIN_COLUMNS
from medibench.prompt_tuning._tables import grid_panel


def _row(backbone, method, loss, name, ece, accuracy=None):
    return {"backbone": backbone, "method": method, "loss": loss, "set": name, "runs": 4,
            "accuracy_mean": accuracy, "accuracy_std": 0.01, "ece_mean": ece, "ece_std": 0.02,
            "mce_mean": None, "mce_std": None, "ace_mean": None, "ace_std": None,
            "ece_std_over_seeds": 0.0, "ece_std_over_templates": None}  # fmt: skip


@pytest.fixture
def panel(tmp_path):
    spread = [
        _row("clip:a", "coop", "ce", "in-domain", 0.10, 0.8),
        _row("clip:a", "coop", "mcm", "in-domain", 0.05, 0.7),
        _row("clip:a", "zero-shot", "ce", "in-domain", 0.30, 0.6),  # no (zero-shot, mcm)
        _row("clip:a", "coop", "ce", "shifted", 0.40, 0.5),
        _row("clip:a", "coop", "mcm", "shifted", None),  # no value in this panel but one
    ]
    kendall = [{"backbone": "clip:a", "seed": 1, "template": "t", "set": "shifted",
                "metric": "ece", "tau": 0.5, "pvalue": 0.3, "n": 3}]  # fmt: skip
    folder = tmp_path / "run" / "tables"
    folder.mkdir(parents=True)
    data = {"reference": "in-domain", "bins": 3, "cells": [], "spread": spread, "kendall": kendall}
    (folder / "grid.json").write_text(json.dumps(data))
    return grid_panel(None, tmp_path / "run")


def test_the_columns_read_in_plain_words(panel):
    spread, kendall = panel["tables"]
    assert spread["columns"] == [
        "backbone", "method", "loss", "evaluation set", "runs (seeds x templates)",
        "accuracy, mean", "accuracy, SD", "ECE, mean", "ECE, SD", "MCE, mean", "MCE, SD",
        "ACE, mean", "ACE, SD", "ECE, SD over seeds", "ECE, SD over templates",
    ]  # fmt: skip
    assert kendall["columns"] == [
        "backbone", "seed", "template", "evaluation set", "metric", "Kendall's tau", "p-value",
        "settings ranked",
    ]  # fmt: skip
    assert not any("_" in c for t in panel["tables"] for c in t["columns"])
    assert set(PLAIN_COLUMNS.values()) >= set(spread["columns"][3:])


def test_a_heat_map_per_metric_with_values_on_one_scale(panel):
    maps = [f for f in panel["figures"] if f.get("data", {}).get("kind") == "grid-heatmap"]
    assert [f["data"]["metric"] for f in maps] == ["accuracy", "ece"]  # MCE, ACE: no value
    ece = json.loads(maps[1]["data"]["drawn"])
    assert ece == {
        "clip:a / in-domain": {"coop": {"ce": 0.10, "mcm": 0.05}, "zero-shot": {"ce": 0.30}},
        "clip:a / shifted": {"coop": {"ce": 0.40}},
    }
    assert maps[1]["data"]["scale"] == "0.05,0.4"  # the lowest and highest mean of all panels
    accuracy = json.loads(maps[0]["data"]["drawn"])
    assert accuracy["clip:a / shifted"] == {"coop": {"ce": 0.5}}
    for f in maps:
        assert f["svg"].startswith("<svg") and "blank: no value" in f["title"]
