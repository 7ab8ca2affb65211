"""``medibench edit sweep``: a 2x2 grid with 2 seeds on the taught tiny LLaVA, its table checked
against each run's own scores and the bootstrap over seeds, its heat maps, a killed sweep that
resumes to the same table, and the errors it names."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from medibench.cli import app
from medibench.knowledge_edit._sweep import parse_grid, sweep_cells
from tests._kill import kill_mid_write
from tests._ray_lock import RAY_GROUP, only_ray_instance

runner = CliRunner()


def cli(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def one_line(text: str) -> str:
    return " ".join(text.split())


def sweep_args(tasks, model, out, *more):
    return ["edit", "sweep", "--tasks", tasks, "--model", model, "--editor", "lora",
            "--grid", "lr=0.01,0.05", "--grid", "steps=1,2", "--seeds", "0,1", "--limit", 1,
            "--matcher", "exact", "--max-new-tokens", 4, "--out", out, *more]  # fmt: skip


@pytest.fixture(scope="module")
def swept(tmp_path_factory, synthetic, taught_path):
    out = tmp_path_factory.mktemp("sweep") / "full"
    r = cli(*sweep_args(synthetic.root, taught_path, out))
    assert r.exit_code == 0, r.output
    return out, r.output


def test_grid_values_read_as_numbers_and_steps_is_the_editors_step_count():
    assert parse_grid(["lr=1e-4,1e-3", "steps=5,20"], "lora") == [
        ("lr", [1e-4, 1e-3]), ("max_steps", [5, 20])]  # fmt: skip
    assert parse_grid(["steps=3", "distance=cosine,euclidean"], "grace@paper") == [
        ("n_iter", [3]), ("distance", ["cosine", "euclidean"])]  # fmt: skip


def test_cells_are_named_by_their_values_and_seed(tmp_path):
    cells = sweep_cells([("lr", [0.01, 0.05]), ("max_steps", [1])], [0, 1], tmp_path)
    names = [c.folder.relative_to(tmp_path).as_posix() for c in cells]
    low, high = "cells/lr=0.01,max_steps=1", "cells/lr=0.05,max_steps=1"
    assert names == [f"{low}/seed0", f"{low}/seed1", f"{high}/seed0", f"{high}/seed1"]


@pytest.mark.parametrize(
    ("grid", "editor", "message"),
    [
        (["lr"], "lora", "--grid 'lr': expected KEY=V1,V2,..."),
        (["rate=1,2"], "lora", "--grid 'rate=1,2': editor lora has no option 'rate'; its options:"),
        (["seed=1,2"], "ft", "give seeds with --seeds"),
        (["lr=1,1"], "ft", "a value is given twice"),
        (["lr=1", "lr=2"], "ft", "lr is already a grid key"),
        (["template=x"], "in-context", "--editor in-context: a sweep needs an editor with options"),
    ],
)
def test_bad_grids_are_named(grid, editor, message):
    with pytest.raises(ValueError) as info:
        parse_grid(grid, editor)
    assert message in str(info.value)


def test_the_table_is_the_mean_over_seeds_of_each_runs_scores(swept):
    from medibench.knowledge_edit import read_results, summarize
    from medibench.stats import bootstrap_ci

    out, output = swept
    data = json.loads((out / "sweep.json").read_text())
    assert data["grid_keys"] == ["lr", "max_steps"]
    assert [(r["lr"], r["max_steps"], r["seeds"]) for r in data["rows"]] == [
        (0.01, 1, 2), (0.01, 2, 2), (0.05, 1, 2), (0.05, 2, 2)]  # fmt: skip
    for row in data["rows"]:
        folder = out / "cells" / f"lr={row['lr']},max_steps={row['max_steps']}"
        scores = [summarize(read_results(folder / f"seed{s}" / "edit_results.jsonl"))
                  for s in (0, 1)]  # fmt: skip
        for m in ("reliability", "generality", "locality"):
            values = [s[m] for s in scores if s[m] is not None]
            assert row[f"{m}_n"] == len(values)
            if not values:
                assert row[m] is None
                continue
            assert row[m] == pytest.approx(sum(values) / len(values))
            if len(values) == 2:
                low, high = bootstrap_ci(values, n_resamples=1000, seed=42)
                assert (row[f"{m}_ci_low"], row[f"{m}_ci_high"]) == pytest.approx((low, high))
    with (out / "sweep.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) == 4
    for m in ("reliability", "generality", "locality"):
        assert (out / f"heatmap_{m}.png").is_file() and (out / f"heatmap_{m}.svg").is_file()
    config = json.loads((out / "cells" / "lr=0.05,max_steps=2" / "seed1" / "done.json").read_text())
    assert config["config"] == {"lr": 0.05, "max_steps": 2, "seed": 1}
    assert "8 run(s) now, 0 done before" in one_line(output)


def test_a_killed_sweep_resumes_to_the_same_table(swept, synthetic, taught_path, tmp_path):
    full, _ = swept
    out = tmp_path / "killed"
    # renames into OUT: 0 sweep_settings.json, then per run its results file and done.json;
    # killed while the second run writes its results (the first run is done)
    kill_mid_write(sweep_args(synthetic.root, taught_path, out), out, hang_at=3)
    done = sorted(p.parent.name for p in out.rglob("done.json"))
    assert done == ["seed0"] and not (out / "sweep.json").exists()
    r = cli(*sweep_args(synthetic.root, taught_path, out))
    assert r.exit_code == 0, r.output
    assert "7 run(s) now, 1 done before" in one_line(r.output)
    for name in ("sweep.json", "sweep.csv"):
        assert (out / name).read_bytes() == (full / name).read_bytes(), name
    again = cli(*sweep_args(synthetic.root, taught_path, out))
    assert "0 run(s) now, 8 done before" in one_line(again.output)
    assert (out / "sweep.csv").read_bytes() == (full / "sweep.csv").read_bytes()


def test_a_sweep_of_other_settings_is_refused_in_the_same_folder(swept, synthetic, taught_path):
    out, _ = swept
    args = sweep_args(synthetic.root, taught_path, out)
    args[args.index("--limit") + 1] = 2
    r = cli(*args)
    assert r.exit_code != 0
    assert f"--out {out} holds a sweep of other settings (limit differ" in one_line(r.output)


def test_sweep_options_are_checked_before_anything_runs(tmp_path, synthetic, taught_path):
    out = tmp_path / "s"
    r = cli(*sweep_args(synthetic.root, taught_path, out, "--seeds", "1,1"))
    assert r.exit_code != 0 and "--seeds 1,1: a seed is given twice" in one_line(r.output)
    r = cli(*sweep_args(synthetic.root, taught_path, out, "--grid", "rank=x,y", "--executor",
                        "dask"))  # fmt: skip
    assert r.exit_code != 0 and "--executor must be local or ray" in one_line(r.output)
    r = cli(*sweep_args(tmp_path / "none", taught_path, out))
    assert r.exit_code != 0 and "not an edit task set" in one_line(r.output)
    assert not out.exists()


@pytest.mark.slow
@RAY_GROUP
def test_a_sweep_as_ray_tasks_gives_the_local_table(tmp_path, synthetic, taught_path):
    pytest.importorskip("ray")
    import ray

    def args(out):
        return ["edit", "sweep", "--tasks", synthetic.root, "--model", taught_path, "--editor",
                "lora", "--grid", "steps=1,2", "--limit", 1, "--matcher", "exact",
                "--max-new-tokens", 4, "--out", out]  # fmt: skip

    local = cli(*args(tmp_path / "local"))
    assert local.exit_code == 0, local.output
    # one CPU: the runs go one after another in one worker (torch imported once)
    with only_ray_instance():  # its own instance, never another test's or session's
        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
        remote = cli(*args(tmp_path / "ray"), "--executor", "ray")
    assert remote.exit_code == 0, remote.output
    assert "2 run(s) now, 0 done before" in one_line(remote.output)
    for name in ("sweep.csv", "sweep.json"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
