"""``medibench calibration grid``: cells trained once, MVC-Bench's tables, the report panel."""

from __future__ import annotations

import csv
import json

import pytest
from scipy.stats import kendalltau
from typer.testing import CliRunner

from medibench.cli import app
from medibench.prompt_tuning._grid import load_grid, run_grid
from tests._ray_lock import RAY_GROUP, only_ray_instance
from tests.prompt_tuning.conftest import write_folder_dataset

runner = CliRunner()


def write_config(tmp_path, folder_dataset, tiny_clip, **extra):
    shifted = write_folder_dataset(tmp_path / "shifted", per_class=3, seed=5)
    lines = [
        "out: out",
        f"dataset: {folder_dataset}",
        "shots: 2",
        f"evals: {{in-domain: {folder_dataset}, shifted: {shifted}}}",
        "methods: [zero-shot, linear-probe, coop]",
        'losses: [ce, "mcm:alpha=0.1,beta=0.01"]',
        "seeds: [1, 2]",
        'templates: ["a photo of a {}.", "an image of {}."]',
        f'backbones: ["clip:{tiny_clip}"]',
        "epochs: 1",
        "batch_size: 3",
        "options: {coop: {n_ctx: 2}}",
        "bins: 3",
    ] + [f"{k}: {v}" for k, v in extra.items()]
    path = tmp_path / "grid.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_grid_trains_once_and_writes_the_tables(tmp_path, folder_dataset, tiny_clip):
    config = write_config(tmp_path, folder_dataset, tiny_clip)
    result = runner.invoke(
        app, ["calibration", "grid", str(config), "--out", str(tmp_path / "run")]
    )
    assert result.exit_code == 0, result.output
    assert "24 cells (24 trained, 0 done before)" in " ".join(result.output.split())
    assert not (tmp_path / "out").exists()  # --out, not the YAML's out
    tables = tmp_path / "run" / "tables"
    cells = list(csv.DictReader((tables / "cells.csv").open()))
    assert len(cells) == 48  # 3 methods x 2 losses x 2 seeds x 2 templates, 2 sets
    one = next(
        c
        for c in cells
        if c["method"] == "coop"
        and c["seed"] == "2"
        and c["set"] == "shifted"
        and c["loss"] == "ce"
        and c["template"] == "a photo of a {}."
    )
    cell_dir = next((tmp_path / "run" / "cells").rglob("coop/ce/a_photo_of_a_.-*/seed2"))
    done = json.loads((cell_dir / "done.json").read_text())
    assert float(one["accuracy"]) == pytest.approx(done["accuracy"]["shifted"])
    # Kendall tau: the six settings' ECE in-domain against shifted, one seed and template
    rows = [c for c in cells if c["seed"] == "1" and c["template"] == "an image of {}."]
    key = lambda c: (c["method"], c["loss"])  # noqa: E731
    ref = {key(c): float(c["ece"]) for c in rows if c["set"] == "in-domain"}
    shf = {key(c): float(c["ece"]) for c in rows if c["set"] == "shifted"}
    want = kendalltau([ref[k] for k in sorted(ref)], [shf[k] for k in sorted(ref)])
    kendall = list(csv.DictReader((tables / "kendall.csv").open()))
    got = next(
        k
        for k in kendall
        if k["seed"] == "1" and k["template"] == "an image of {}." and k["metric"] == "ece"
    )
    assert float(got["tau"]) == pytest.approx(want.statistic)
    assert float(got["pvalue"]) == pytest.approx(want.pvalue)
    mean = next(k for k in kendall if k["seed"] == "mean" and k["metric"] == "ece")
    taus = [float(k["tau"]) for k in kendall if k["seed"] != "mean" and k["metric"] == "ece"]
    assert float(mean["tau"]) == pytest.approx(sum(taus) / len(taus))
    spread = list(csv.DictReader((tables / "spread.csv").open()))
    zs = next(
        s
        for s in spread
        if s["method"] == "zero-shot" and s["loss"] == "ce" and s["set"] == "shifted"
    )
    values = [
        float(c["ece"])
        for c in cells
        if c["method"] == "zero-shot" and c["loss"] == "ce" and c["set"] == "shifted"
    ]
    assert int(zs["runs"]) == 4 and float(zs["ece_mean"]) == pytest.approx(sum(values) / 4)
    # zero-shot does not depend on the seed: no spread over seeds
    assert float(zs["ece_std_over_seeds"]) == pytest.approx(0.0, abs=1e-12)
    assert (tables / "diagrams" / "shifted" / "reliability_coop_ce.svg").is_file()
    # done cells are skipped
    again = run_grid(load_grid(config, out=tmp_path / "run"))
    assert (again["trained"], again["skipped"]) == (0, 24)
    # the grid's folder is a run folder: its report shows the panel
    report = runner.invoke(app, ["report", str(tmp_path / "run")])
    assert report.exit_code == 0, report.output
    html = (tmp_path / "run" / "report" / "index.html").read_text()
    assert "Prompt tuning grid" in html and "Kendall tau: in-domain against shifted" in html
    assert html.count("reliability_coop_ce") == 2  # in-domain and shifted


def test_the_old_run_spelling_is_the_grids_folder(tmp_path, folder_dataset, tiny_clip):
    config = write_config(tmp_path, folder_dataset, tiny_clip)
    text = config.read_text().replace(
        "methods: [zero-shot, linear-probe, coop]", "methods: [zero-shot]"
    )
    config.write_text(text.replace("seeds: [1, 2]", "seeds: [1]"))
    old = runner.invoke(app, ["calibration", "grid", str(config), "--run", str(tmp_path / "r")])
    assert old.exit_code == 0, old.output
    assert "--run is deprecated in `medibench calibration grid`: use --out" in old.output
    assert "4 cells (4 trained" in " ".join(old.output.split())
    assert (tmp_path / "r" / "run.sqlite").is_file() and (tmp_path / "r" / "tables").is_dir()
    # with the new name too, the old one is refused (it meant another folder before)
    args = ["calibration", "grid", str(config), "--out", str(tmp_path / "g"), "--run", "r"]
    both = runner.invoke(app, args)
    assert both.exit_code == 2 and "--run is the old name of --out" in both.output
    assert not (tmp_path / "g").exists()


def test_a_run_filled_by_the_old_run_option_keeps_its_panel(tmp_path):
    from medibench.prompt_tuning._tables import grid_panel

    run = tmp_path / "run" / "prompt_tuning"
    run.mkdir(parents=True)
    rows = [{"method": "coop", "tau": 0.5}]
    (run / "grid.json").write_text(json.dumps({"reference": "a", "spread": [], "kendall": rows}))
    panel = grid_panel(None, tmp_path / "run")
    assert panel["tables"][0]["rows"] == [["coop", "0.5000"]]
    assert grid_panel(None, tmp_path) is None


def test_bad_grid_files(tmp_path, folder_dataset, tiny_clip):
    with pytest.raises(ValueError, match="unknown key\\(s\\) method"):
        load_grid(write_config(tmp_path, folder_dataset, tiny_clip, method="coop"))
    path = tmp_path / "g.yaml"
    path.write_text(
        "dataset: x\nevals: {a: b}\nmethods: [coop, tip-adapter]\nseeds: [1]\nbackbones: [clip:m]\n"
    )
    with pytest.raises(ValueError, match="unknown method\\(s\\) tip-adapter"):
        load_grid(path)
    path.write_text(
        "dataset: x\nevals: {a: b}\nreference: c\nmethods: [coop]\nseeds: [1]\n"
        "backbones: [clip:m]\n"
    )
    with pytest.raises(ValueError, match="reference 'c' is not an eval set"):
        load_grid(path)
    path.write_text("dataset: x\nmethods: [coop]\nseeds: [1]\nbackbones: [clip:m]\n")
    with pytest.raises(ValueError, match="'evals' is missing or empty"):
        load_grid(path)


@pytest.mark.slow
@RAY_GROUP
def test_grid_as_ray_tasks(tmp_path, folder_dataset, tiny_clip):
    pytest.importorskip("ray")
    import ray

    config = write_config(tmp_path, folder_dataset, tiny_clip)
    text = config.read_text().replace(
        "methods: [zero-shot, linear-probe, coop]", "methods: [zero-shot, coop]"
    )
    config.write_text(text.replace("seeds: [1, 2]", "seeds: [1]"))
    # One CPU: the cells run one after another in one Ray worker, which imports torch and
    # transformers once (a second worker would import them again on a two-core machine).
    with only_ray_instance():
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
        summary = run_grid(load_grid(config), executor="ray")
    assert (summary["trained"], summary["skipped"]) == (8, 0)
    assert len(list(csv.DictReader((tmp_path / "out" / "tables" / "cells.csv").open()))) == 16
